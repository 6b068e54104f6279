"""Our stylesheet as text, so every shadow root gets it inline: no extra request, works when embedded."""

from __future__ import annotations

from functools import cache
from pathlib import Path

STATIC_DIR = Path(__file__).resolve().parents[2] / "static"


@cache
def stylesheet() -> str:
    return (STATIC_DIR / "css" / "blocktrace.css").read_text(encoding="utf-8")


def styled(**params) -> dict:
    """Keyword arguments that give a Panel pane our stylesheet."""
    return {"stylesheets": [stylesheet()], **params}
