"""Entry for plain `panel serve app/server/apps/*.py`: the transformer-block-trace explorable."""

from blocktrace.app.server.registry import EXPLORABLE_SPECS
from blocktrace.app.server.routes import explorable_page

explorable_page(EXPLORABLE_SPECS["transformer-block-trace"])().servable()
