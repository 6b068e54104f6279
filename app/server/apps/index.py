"""Entry for plain `panel serve app/server/apps/*.py --index app/server/apps/index.py`: the list of explorables."""

from blocktrace.app.server.pages import index_page

index_page(flat=True).servable()
