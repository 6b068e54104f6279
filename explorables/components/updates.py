"""View updates as one batch of Bokeh model changes, safe whichever Panel event path triggered them.

A key press such as Enter in a text field reaches Panel as a separate event that is handled
without Bokeh's document lock; setting `source.data` there fails ("_pending_writes should be
non-None"). Panel's `unlocked()` holds the document, applies every change, and sends them
together, which is also one message per change instead of one per property.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TypeVar

import panel as pn
import param
from panel.io.document import unlocked
from param.parameterized import batch_call_watchers

__all__ = ["LiveHTML", "batched", "set_object", "set_params"]

F = TypeVar("F", bound=Callable)


def batched(method: F) -> F:
    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        with unlocked():
            return method(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def set_object(pane, html: str) -> None:
    """Replace a pane's HTML only when it differs: an unchanged pane costs no message and no re-render."""
    if pane.object != html:
        pane.object = html


def set_params(obj: param.Parameterized, **values) -> None:
    """Set several parameters at once, their watchers called once after all are set: `obj.param.update`
    without the snapshot of every value it keeps for use as a context manager. That snapshot reads every
    parameter; on a Panel component (about 50 of them) it was a tenth of a slider change's server time."""
    for name in values:
        if name not in obj.param:
            raise ValueError(f"{name!r} is not a parameter of {type(obj).__name__}")
    with batch_call_watchers(obj):
        for name, value in values.items():
            setattr(obj, name, value)


class LiveHTML(pn.pane.HTML):
    """An HTML pane for content that changes with every control change (Panel's HTML pane, named for what it
    holds)."""
