"""Our stylesheet as text, so every shadow root gets it inline: no extra request, works when embedded."""

from __future__ import annotations

from functools import cache
from importlib.resources import files
from pathlib import Path

__all__ = ["STATIC_DIR", "WRAPPING_CHOICES", "dark", "styled", "stylesheet"]

STATIC_DIR = Path(str(files("blocktrace.explorables"))).parent / "static"  # beside the package, installed or not


@cache
def _read(name: str) -> str:
    return (STATIC_DIR / "css" / name).read_text(encoding="utf-8")


def dark() -> bool:
    """True in a session opened with ?theme=dark (Panel's config is per session inside a server)."""
    import panel as pn

    return pn.config.theme == "dark"


def stylesheet() -> str:
    """Our CSS for this session: the light sheet, plus the dark overrides in a dark session."""
    return _read("blocktrace.css") + (_read("dark.css") if dark() else "")


def styled(**params) -> dict:
    """Keyword arguments that give a Panel pane our stylesheet."""
    return {"stylesheets": [stylesheet()], **params}


# Radio and checkbox labels inside Bokeh's shadow DOM: let long answers wrap on a phone.
WRAPPING_CHOICES = ":host { max-width: 100%; } label { white-space: normal; overflow-wrap: anywhere; }"
