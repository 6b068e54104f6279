"""Bokeh's list and dict property values remember their owner in a tuple instead of a set of their own.

Every list, dict or set a Bokeh model holds as a property value (`css_classes`, `stylesheets`,
`tags`, `js_event_callbacks`, a glyph's `decorations`, ...) is a `PropertyValueContainer`, which keeps
the models that own it so that mutating it in place notifies them. Bokeh gives each container its own
`set` for that (216 bytes even when empty), and Bokeh builds these containers for every such
property of every model, set or not. A student's block-trace page holds about 1,800 of them on one
owner each.

Here the owners are a tuple, empty and shared until an owner registers, then one entry per owner
(48 bytes for one). Registering, unregistering and notifying behave as Bokeh's set does: an owner is
held at most once, and every owner is told of a mutation. tests/app/test_container_owners.py checks
the behaviour.

Measured (2026-12-04, Python 3.11, Bokeh 3.9.2, `benchmarks/classroom.py --students 100 --procs 1,2`,
back to back, the patch left out of PATCHES for the first run): server memory a session 2.94 and
3.05 MB with Bokeh's sets, 2.64 and 2.74 MB with tuples (one and two processes). `tracemalloc` on 30
served sessions agrees: 2.98 and 2.68 MB.

Upstream: app/tuning/UPSTREAM.md, "container_owners" (what would retire this patch).
"""

from __future__ import annotations

from typing import Any

from bokeh.core.property.wrappers import PropertyValueContainer

__all__ = ["apply"]

_RELIED_ON = ("__init__", "_register_owner", "_unregister_owner", "_notify_owners")  # three replaced, one read


def _init(self, *args: Any, **kwargs: Any) -> None:
    """Bokeh's, without the per-container set: `_owners` is the class's empty tuple until an owner registers."""
    super(PropertyValueContainer, self).__init__(*args, **kwargs)


def _register_owner(self, owner, descriptor) -> None:
    pair = (owner, descriptor)
    if pair not in self._owners:
        self._owners = (*self._owners, pair)


def _unregister_owner(self, owner, descriptor) -> None:
    pair = (owner, descriptor)
    if pair in self._owners:
        self._owners = tuple(held for held in self._owners if held != pair)


def apply() -> None:
    """Install once (idempotent). `_notify_owners` and Bokeh's other readers only iterate `_owners`."""
    if PropertyValueContainer.__dict__.get("_register_owner") is _register_owner:
        return
    for name in _RELIED_ON:  # the methods this relies on; one that has moved stands the patch down
        if not callable(PropertyValueContainer.__dict__.get(name)):
            raise AttributeError(f"PropertyValueContainer.{name} is not a method of its own")
    PropertyValueContainer._owners = ()
    PropertyValueContainer.__init__ = _init
    PropertyValueContainer._register_owner = _register_owner
    PropertyValueContainer._unregister_owner = _unregister_owner
