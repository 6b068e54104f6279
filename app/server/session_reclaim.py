"""A closed session's memory back in short steps: its own reference cycles found and taken apart.

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
4. Every weak reference to the garbage is cleared, as the collector clears them (Modules/gcmodule.c,
   `handle_weakrefs`), and the callbacks of those that are not garbage themselves are called (weak tables
   drop their entries): no weak table can hand out an object about to be emptied.
5. The garbage's containers are emptied (dicts, lists, sets, deques with their built-in `clear`,
   instances' attribute dicts), which breaks its cycles; reference counting frees it as it goes.

The walk (step 1) may be cut into steps with other work in between (`reclaim_in_steps`): what changes
meanwhile only decides what is walked. Steps 2 to 4 run in one go, from the references as they are
then, with the collector off (`gc.disable()`: a collection and its callbacks cannot run while counts are
read) and the interpreter's thread switching held off (`sys.setswitchinterval`), so no other thread
can change a reference between the counts and the decision; step 5 only touches objects nothing else
can reach. A walk that passes `reclaim_walk_limit` objects (a setting, app/settings.py; a session
reaching into shared state) stops and takes nothing apart. What this cannot take apart (cycles through
tuples or slots only, an instance with `__del__`) is left to the collector, as before.

The reference-count probe (step 2) and the clearing of weak references (step 4, CPython's own
`_PyWeakref_ClearRef`, the function the collector uses, through ctypes) hold for CPython 3.11 to 3.13
with the GIL: 3.14 borrows references on the stack (the counts read differ), and a free-threaded build
lets other threads run whatever the switch interval. Elsewhere `unsupported()` says why, and the server
leaves closed pages to the quiet-time full collection (session_memory.py). The server's
`BLOCKTRACE_SESSION_RECLAIM=0` switches this off on any interpreter.

Only `gc`, `sys`, `weakref` and that one CPython function are used: no Panel, Bokeh or Tornado internals.
"""

from __future__ import annotations

import ctypes
import gc
import logging
import sys
import sysconfig
import time
import types
import weakref
from collections import Counter, deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from blocktrace.app.settings import settings

log = logging.getLogger(__name__)

NOT_WALKED = (types.ModuleType, type, types.CodeType, types.FrameType, types.CoroutineType,
              types.GeneratorType, types.AsyncGeneratorType)
EMPTIED = (dict, list, set, deque)
HOLD_GIL_S = 10.0  # the switch interval while the references are counted (no other thread runs)
SUPPORTED = ((3, 11), (3, 13))  # the CPython releases (lowest, highest) the counts and the clearing hold for


def unsupported(version: tuple[int, ...] = sys.version_info[:2], implementation: str = sys.implementation.name,
                free_threaded: bool = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))) -> str | None:
    """Why closed sessions cannot be taken apart on this interpreter (or the one described), or None."""
    if implementation != "cpython":
        return f"{implementation} is not CPython"
    if not SUPPORTED[0] <= tuple(version[:2]) <= SUPPORTED[1]:
        low, high = (".".join(map(str, v)) for v in SUPPORTED)
        return f"CPython {'.'.join(map(str, version[:2]))} is outside {low}-{high}"
    if free_threaded:
        return "a free-threaded CPython build"
    return None


def _clear_ref_function() -> Callable[[Any], None] | None:
    """CPython's `_PyWeakref_ClearRef` (what the collector calls on each weak reference to garbage), or None."""
    try:
        clear_ref = ctypes.pythonapi._PyWeakref_ClearRef
    except AttributeError:
        return None
    clear_ref.argtypes, clear_ref.restype = [ctypes.py_object], None
    return clear_ref


_CLEAR_REF = _clear_ref_function() if unsupported() is None else None
WHY_NOT = unsupported() or (None if _CLEAR_REF else "this CPython does not export _PyWeakref_ClearRef")


@dataclass(frozen=True)
class Reclaimed:
    walked: int  # objects walked from the session's roots
    freed: int  # of them, found unreachable from anything else and taken apart
    aborted: bool  # the walk passed its limit: nothing was taken apart
    ms: float  # time spent, all steps together (not counting the waits between them)
    longest_ms: float  # the longest step: how long the event loop was held at once


def reclaim(roots: list[Any], limit: int | None = None, shared: tuple[type, ...] = ()) -> Reclaimed:
    """Take apart whatever `roots` reach that nothing else refers to, in one go, unless that is more than `limit`
    objects (the `reclaim_walk_limit` setting: a block-trace page is about 16,000, a lesson page under twice
    that). `roots` is emptied (its references would otherwise count as references from outside); the caller
    must hold no other reference to them. Instances of `shared` types (objects every session uses) are not
    walked into: what they refer to counts as referred to from outside, which keeps the walk to the session's
    own objects."""
    timer = StepTimer()
    with timer:
        walk = Walk(roots, shared, limit)
        while not walk.done:
            walk.step(walk.limit + 1)
        return finish(walk, timer)


async def reclaim_in_steps(roots: list[Any], pause: Callable[[], Awaitable[None]], step_objects: int | None = None,
                           limit: int | None = None, shared: tuple[type, ...] = ()) -> Reclaimed:
    """reclaim(), with the walk cut into steps of `step_objects` (the `reclaim_step_objects` setting: 15-25 ms
    each) and `await pause()` between them (and before the last step), so other work runs in between; only the
    decision and the taking apart run in one go."""
    if step_objects is None:
        step_objects = settings().reclaim_step_objects
    timer = StepTimer()
    with timer:
        walk = Walk(roots, shared, limit)
        walk.step(step_objects)
    while not walk.done:
        await pause()
        with timer:
            walk.step(step_objects)
    await pause()
    with timer:
        return finish(walk, timer)


def finish(walk: Walk, timer: StepTimer) -> Reclaimed:
    """Decide and clear the weak references to the garbage (with the collector off and the interpreter's
    thread switching held off), then take the garbage apart. Nothing is, where WHY_NOT says why not."""
    walked, aborted = len(walk.order), walk.aborted
    collecting, interval = gc.isenabled(), sys.getswitchinterval()
    gc.disable()
    sys.setswitchinterval(HOLD_GIL_S)
    try:
        garbage = [] if WHY_NOT else walk.unreachable()
        callbacks = _clear_weakrefs(garbage)
    finally:
        sys.setswitchinterval(interval)
        if collecting:
            gc.enable()
    _call_back(callbacks)
    freed = len(garbage)
    _take_apart(garbage)
    return Reclaimed(walked, freed, aborted, *timer.so_far())


class StepTimer:
    """Times each `with` block: the total and the longest."""

    def __init__(self) -> None:
        self.total = self.longest = 0.0
        self._began = 0.0

    def __enter__(self) -> StepTimer:
        self._began = time.perf_counter()
        return self

    def __exit__(self, *_exc: object) -> None:
        took = time.perf_counter() - self._began
        self.total += took
        self.longest = max(self.longest, took)

    def so_far(self) -> tuple[float, float]:
        """(total, longest) in milliseconds, counting the block still running."""
        running = time.perf_counter() - self._began
        return 1000 * (self.total + running), 1000 * max(self.longest, running)


class Walk:
    """Every object the collector tracks that `roots` reach, not going into `not_walked` types, modules'
    globals or what NOT_WALKED names; resumable (`step`), as long as nothing is decided from it in between."""

    def __init__(self, roots: list[Any], not_walked: tuple[type, ...], limit: int | None = None) -> None:
        self.shared = {id(vars(m)) for m in list(sys.modules.values()) if isinstance(m, types.ModuleType)}
        self.not_walked = NOT_WALKED + not_walked
        self.limit = settings().reclaim_walk_limit if limit is None else limit  # past it, nothing is taken apart
        self.order: list[Any] = []  # every walked object, once: the one reference the counts allow for
        self.index: dict[int, int] = {}  # id -> position in order (ids are stable: order keeps each alive)
        self.stack = roots  # emptied as the walk goes (its references would count as from outside)

    @property
    def done(self) -> bool:
        return not self.stack

    @property
    def aborted(self) -> bool:
        return len(self.order) > self.limit

    def step(self, budget: int) -> None:
        """Walk on, at most `budget` more objects."""
        order, index, stack, shared, not_walked = self.order, self.index, self.stack, self.shared, self.not_walked
        stop = len(order) + budget
        while stack and len(order) < stop:
            obj = stack.pop()
            key = id(obj)
            if key in index or key in shared or isinstance(obj, not_walked) or not gc.is_tracked(obj):
                continue
            index[key] = len(order)
            order.append(obj)
            stack.extend(gc.get_referents(obj))
        obj = None  # noqa: F841 - the loop variable's reference would count as one from outside
        if self.aborted:
            stack.clear()

    def unreachable(self) -> list[Any]:
        """Those walked objects nothing outside the walk reaches, directly or through a walked object something
        outside does reach. In one go, from the references as they are now; the walk is spent after it."""
        order, index = self.order, self.index
        self.order, self.index, self.stack = [], {}, []
        if not order or len(order) > self.limit:
            return []
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
        return [obj for obj, live in zip(order, alive, strict=True) if not live]


def _clear_weakrefs(garbage: list[Any]) -> list[tuple[Callable[[Any], Any], weakref.ref]]:
    """Clear every weak reference to the garbage, as the collector does before it breaks any cycle; the
    callbacks due, of those references that are not garbage themselves (the collector's rule: a garbage
    reference's callback may see garbage), to be called once all are cleared."""
    doomed = {id(obj) for obj in garbage}
    due = []
    for obj in garbage:
        for ref in weakref.getweakrefs(obj):
            _CLEAR_REF(ref)
            callback = ref.__callback__
            if callback is not None and id(ref) not in doomed:
                due.append((callback, ref))
    obj = ref = callback = None  # noqa: F841
    return due


def _call_back(due: list[tuple[Callable[[Any], Any], weakref.ref]]) -> None:
    """Call the cleared references' callbacks (weak tables drop their entries); one that fails is logged, as
    the collector reports it, and the rest still run."""
    for callback, ref in due:
        try:
            callback(ref)
        except Exception:
            log.exception("a weak reference's callback failed while a closed session was taken apart")
    due.clear()


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
