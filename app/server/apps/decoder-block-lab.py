"""Entry for plain `panel serve app/server/apps/*.py`: the decoder-block-lab explorable at /decoder-block-lab."""

from blocktrace.app.server.registry import EXPLORABLE_SPECS
from blocktrace.app.server.routes import explorable_page

explorable_page(EXPLORABLE_SPECS["decoder-block-lab"])().servable()
