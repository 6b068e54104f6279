"""Callbacks that do not keep a closed page alive.

Bokeh wraps each callback a session schedules (periodic, timeout, next tick) in a closure over its
Document, in a reference cycle with the callback object. When the session closes, Bokeh drops them;
if they were frozen meanwhile (session_memory.py freezes every live object), that cycle stays in
memory until a full collection, and whatever the callback refers to stays with it: with a bound
method of a page's view, the whole page. Called through a weak reference instead, a left-over
callback keeps nothing of the page, and session_reclaim.py can free the page as it closes.
"""

from __future__ import annotations

import inspect
import weakref
from collections.abc import Callable
from typing import Any

import panel as pn

__all__ = ["periodically", "weakly"]


def weakly(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn`, called through a weak reference (nothing happens once it is gone). A bound method lives as long
    as its object; any other function must be held by its page (an attribute of a view) for as long as the
    page is open."""
    ref: Callable[[], Callable[..., Any] | None] = (
        weakref.WeakMethod(fn) if inspect.ismethod(fn) else weakref.ref(fn))

    def call(*args: Any, **kwargs: Any) -> Any:
        target = ref()
        return None if target is None else target(*args, **kwargs)

    call.__name__ = call.__qualname__ = f"weakly({getattr(fn, '__qualname__', type(fn).__name__)})"
    return call


def periodically(fn: Callable[[], Any], period_ms: int) -> None:
    """Call `fn` every `period_ms` in the current page's session, weakly (the page must hold `fn`); nothing
    outside a served session.

    Bokeh's own periodic callback (`Document.add_periodic_callback`), not Panel's `add_periodic_callback`:
    Panel's records every call in its process-wide busy counter, a parameter rewritten several times a call.
    That bookkeeping takes about 1 ms a call (0.97 ms measured for one add and remove); with 100 pages polling
    every few seconds it was 4 % of the server's event loop, for a busy indicator these pages do not show.
    Bokeh drops the callback with its session.
    """
    doc = pn.state.curdoc
    if doc is None or doc.session_context is None:
        return
    doc.add_periodic_callback(weakly(fn), period_ms)
