"""Driving a browser-drawn explorable without a browser: its payload as the browser gets it, and a change as the
browser sends it (explorables/components/drawn_view/draw.js), which the server checks before the state sees it."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["meta", "press", "send"]


def meta(view: Any) -> dict:
    """The drawing component's last payload (its JSON part)."""
    return json.loads(view.drawing.meta)


def send(view: Any, name: str, value: Any) -> None:
    """One control change, numbered as the browser numbers them."""
    view._sent_n = getattr(view, "_sent_n", 0) + 1
    view.drawing.sent = json.dumps({"name": name, "value": value, "n": view._sent_n})


def press(view: Any, label: str) -> None:
    """Press the drawn button with this visible label."""
    [c] = [c for c in json.loads(view.drawing.spec)["controls"] if c["label"] == label]
    assert c["kind"] == "button"
    send(view, "action", c["name"])
