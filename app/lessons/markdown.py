"""Markdown to safe HTML: raw HTML in the source is shown as text, unsafe links are dropped."""

from __future__ import annotations

from functools import cache

from markdown_it import MarkdownIt

__all__ = ["render"]


@cache
def _renderer() -> MarkdownIt:
    # "html": False escapes any tag written in the Markdown; markdown-it also refuses javascript: links.
    return MarkdownIt("commonmark", {"html": False, "typographer": True}).enable(["table", "replacements"])


def render(text: str) -> str:
    return _renderer().render(text)
