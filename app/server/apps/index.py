"""Entry for plain `panel serve app/apps/*.py --index app/apps/index.py`: the list of explorables."""

from blocktrace.app.server.pages import index_page

index_page(flat=True).servable()
