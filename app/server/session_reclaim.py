"""A closed session's memory back in one short step: its own reference cycles found and taken apart.

A student's page is about 16,000 objects the cycle collector tracks, nearly all in reference cycles
(Bokeh models and their documents, Panel widgets and their param watchers). Live pages are frozen out of
the collector's sight (session_memory.py), so once a page closes its cycles stay in memory until a full
collection walks the whole heap: 1.4-2.6 s with 100 students, a pause every student would feel.

This walks only what the closed session can reach, and finds which of it nothing else refers to, the
way CPython's own collector decides (Modules/gcmodule.c, `subtract_refs` and `move_unreachable`):

1. From the session's roots (its Document and root models), every object the collector tracks, not
   descending into modules, classes, code, frames or module globals (shared by every session).
2. For each walked object, how many references to it come from walked objects (`gc.get_referents`);
   `sys.getrefcount` minus those is how many come from outside the walk.
3. Anything with a reference from outside is alive, and so is everything it reaches. The rest is
   garbage: nothing outside refers to it, directly or through anything alive.
4. The garbage's containers are emptied (dicts, lists, sets, deques with their built-in `clear`,
   instances' attribute dicts), which breaks its cycles; reference counting frees it as it goes.

Steps 1-3 run in one go with the interpreter's thread switching held off (`sys.setswitchinterval`),
so no other thread can change a reference between the counts and the decision; step 4 only touches
objects nothing else can reach. A walk that passes WALK_LIMIT objects (a session reaching into shared
state) stops and takes nothing apart. What this cannot take apart (cycles through tuples or slots
only, an instance with `__del__`) is left to the collector, as before.

Only `gc` and `sys` are used: no Panel, Bokeh or Tornado internals.
"""

from __future__ import annotations

import gc
import sys
import time
import types
from collections import Counter, deque
from dataclasses import dataclass
from functools import cache
from typing import Any

WALK_LIMIT = 200_000  # objects; a block-trace page is about 16,000, a lesson page under twice that
NOT_WALKED = (types.ModuleType, type, types.CodeType, types.FrameType, types.CoroutineType,
              types.GeneratorType, types.AsyncGeneratorType)
EMPTIED = (dict, list, set, deque)
HOLD_GIL_S = 10.0  # the switch interval while the references are counted (no other thread runs)


@dataclass(frozen=True)
class Reclaimed:
    walked: int  # objects walked from the session's roots
    freed: int  # of them, found unreachable from anything else and taken apart
    aborted: bool  # the walk passed WALK_LIMIT: nothing was taken apart
    ms: float  # wall time of the whole step


def reclaim(roots: list[Any], limit: int = WALK_LIMIT, shared: tuple[type, ...] = ()) -> Reclaimed:
    """Take apart whatever `roots` reach that nothing else refers to. `roots` is emptied (its references
    would otherwise count as references from outside); the caller must hold no other reference to them.
    Instances of `shared` types (objects every session uses) are not walked into: what they refer to
    counts as referred to from outside, which keeps the walk to the session's own objects."""
    started = time.perf_counter()
    interval = sys.getswitchinterval()
    sys.setswitchinterval(HOLD_GIL_S)
    try:
        walked, garbage = _unreachable(roots, limit, NOT_WALKED + shared)
    finally:
        sys.setswitchinterval(interval)
    freed = len(garbage)
    _take_apart(garbage)
    return Reclaimed(walked, freed, walked > limit, 1000 * (time.perf_counter() - started))


def _unreachable(roots: list[Any], limit: int, not_walked: tuple[type, ...]) -> tuple[int, list[Any]]:
    """(objects walked, those of them nothing outside the walk reaches)."""
    shared = {id(vars(m)) for m in list(sys.modules.values()) if isinstance(m, types.ModuleType)}
    order: list[Any] = []  # every walked object, once: the one reference the counts below allow for
    index: dict[int, int] = {}  # id -> position in order (ids are stable: order keeps each alive)
    stack = roots
    while stack:
        obj = stack.pop()
        key = id(obj)
        if key in index or key in shared or isinstance(obj, not_walked) or not gc.is_tracked(obj):
            continue
        index[key] = len(order)
        order.append(obj)
        if len(order) > limit:
            stack.clear()
            return len(order), []
        stack.extend(gc.get_referents(obj))
    obj = None  # noqa: F841 - the loop variable's reference would count as one from outside
    # References from walked objects, counted per target in one pass (the list of every edge goes before
    # any count is read: it holds a reference to each target too).
    edges = gc.get_referents(*order)
    inside = Counter(map(id, edges))
    del edges
    # What getrefcount reads, in this very expression, for an object referred to by its list alone (the
    # list, the loop's variable, the argument: interpreters differ), is subtracted from each count.
    count = sys.getrefcount
    base = [count(probe) for probe in [object()]][0]
    alive = [count(obj) - base > inside[id(obj)] for obj in order]
    reached = [i for i, live in enumerate(alive) if live]
    while reached:
        for target in gc.get_referents(order[reached.pop()]):
            position = index.get(id(target))
            if position is not None and not alive[position]:
                alive[position] = True
                reached.append(position)
        target = None  # noqa: F841
    return len(order), [obj for obj, live in zip(order, alive, strict=True) if not live]


def _take_apart(garbage: list[Any]) -> None:
    """Empty the garbage's containers so its cycles break, then let it go; anything that complains while it
    is freed (a weak reference's callback reading a field already emptied) is ignored, as it is garbage."""
    hook = sys.unraisablehook
    sys.unraisablehook = lambda _unraisable: None
    try:
        for obj in garbage:
            if issubclass(type(obj), EMPTIED):  # type(), not isinstance(): a proxy may pass for a dict
                _native_clear(type(obj))(obj)
                continue
            if hasattr(type(obj), "__del__"):
                continue  # its finaliser may need its fields: the collector's business
            try:
                attributes = object.__getattribute__(obj, "__dict__")
            except (AttributeError, TypeError):
                continue
            if type(attributes) is dict:
                attributes.clear()
        obj = None  # noqa: F841
        garbage.clear()
    finally:
        sys.unraisablehook = hook


@cache
def _native_clear(kind: type) -> Any:
    """The first built-in `clear` along `kind`'s MRO: a subclass's own (Bokeh's containers notify their
    owners when cleared) is passed over."""
    for base in kind.__mro__:
        method = base.__dict__.get("clear")
        if isinstance(method, types.MethodDescriptorType):
            return method
    raise TypeError(f"{kind.__name__} has no built-in clear")
