"""Entry for plain `panel serve app/apps/*.py`: the block-floor explorable at /block-floor."""

from app.registry import EXPLORABLE_SPECS
from app.server import explorable_page

explorable_page(EXPLORABLE_SPECS["block-floor"])().servable()
