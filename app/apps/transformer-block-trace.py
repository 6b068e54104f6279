"""Entry for plain `panel serve app/apps/*.py`: the transformer-block-trace explorable at /transformer-block-trace."""

from app.registry import EXPLORABLE_SPECS
from app.server import explorable_page

explorable_page(EXPLORABLE_SPECS["transformer-block-trace"])().servable()
