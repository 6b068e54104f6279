"""Entry for plain `panel serve app/server/apps/*.py`: the block-floor explorable at /block-floor."""

from blocktrace.app.server.registry import EXPLORABLE_SPECS
from blocktrace.app.server.routes import explorable_page

explorable_page(EXPLORABLE_SPECS["block-floor"])().servable()
