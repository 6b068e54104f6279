"""Entry for plain `panel serve app/server/apps/*.py`: the train-the-block explorable at /train-the-block."""

from blocktrace.app.server.registry import EXPLORABLE_SPECS
from blocktrace.app.server.routes import explorable_page

explorable_page(EXPLORABLE_SPECS["train-the-block"])().servable()
