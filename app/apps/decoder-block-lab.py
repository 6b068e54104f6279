"""Entry for plain `panel serve app/apps/*.py`: the decoder-block-lab explorable at /decoder-block-lab."""

from app.registry import EXPLORABLE_SPECS
from app.server import explorable_page

explorable_page(EXPLORABLE_SPECS["decoder-block-lab"])().servable()
