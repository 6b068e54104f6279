"""app/server/session_reclaim.py: a closed session's cycles are found and taken apart, and nothing anything
else can still reach is touched. CPython's own collector is the reference it is checked against."""

from __future__ import annotations

import gc
import weakref
from collections import OrderedDict, deque

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from blocktrace.app.server.session_reclaim import reclaim, reclaim_in_steps
from blocktrace.app.settings import overridden


class Node:
    def __init__(self, name: str) -> None:
        self.name = name
        self.links: list = []


@pytest.fixture(autouse=True)
def frozen_heap():
    """As in the server: what exists before the test is frozen (out of the collector's sight)."""
    gc.collect()
    gc.freeze()
    yield
    gc.unfreeze()


def test_a_cycle_nothing_else_reaches_is_freed_even_frozen():
    """A closed page's objects, frozen while it was open, come back without a full collection."""
    a, b = Node("a"), Node("b")
    a.links.append(b)
    b.links.append(a)
    b.own = {"back": a, "more": [a, b]}
    gc.freeze()
    gone = weakref.ref(a), weakref.ref(b)
    roots = [a]
    del a, b
    done = reclaim(roots)
    assert roots == [] and not done.aborted
    assert done.walked >= 6 and done.freed == done.walked
    assert [ref() for ref in gone] == [None, None]


def test_what_something_outside_holds_is_left_whole_with_all_it_reaches():
    """A walked object with a referrer outside the walk is alive, and so is everything it reaches."""
    session, shared, kept = Node("session"), Node("shared"), Node("kept")
    session.links += [shared, session]
    shared.links.append(kept)
    kept.links.append(shared)
    outside = [shared]  # a live page, a cache, another student's session
    gone = weakref.ref(session)
    roots = [session]
    del session, shared, kept
    reclaim(roots)
    assert gone() is None
    assert outside[0].name == "shared" and outside[0].links[0].name == "kept"
    assert outside[0].links[0].links == [outside[0]]


def test_garbage_that_refers_to_a_live_object_frees_only_itself():
    """A closed page that pointed at shared state frees its own part; the shared state keeps its fields."""
    page = Node("page")
    settings_ = {"theme": "dark"}
    page.links += [page, settings_]
    roots = [page]
    del page
    assert reclaim(roots).freed >= 2
    assert settings_ == {"theme": "dark"}


def ring(size: int) -> tuple[list[Node], weakref.ref]:
    """A cycle of `size` nodes held only by the returned roots, and a weak reference to its first node."""
    chain = [Node(str(i)) for i in range(size)]
    for first, second in zip(chain, chain[1:], strict=False):
        first.links.append(second)
    chain[-1].links.append(chain[0])
    return [chain[0]], weakref.ref(chain[0])


def test_a_walk_past_its_limit_takes_nothing_apart():
    """A session that reaches too much (shared state) is left to the collector: nothing is cleared."""
    roots, gone = ring(50)
    done = reclaim(roots, limit=20)
    assert done.aborted and done.freed == 0
    assert gone() is not None and gone().links[0].name == "1"
    gc.unfreeze()
    gc.collect()
    assert gone() is None, "the collector still frees it"


def test_the_walk_limit_and_the_step_size_are_the_server_s_settings():
    """Given no numbers, a reclaim in steps walks `reclaim_step_objects` at a time and stops past
    `reclaim_walk_limit`, as the settings say."""
    import asyncio

    roots, gone = ring(50)
    pauses = []

    async def pause() -> None:
        pauses.append(1)

    with overridden(reclaim_walk_limit=20, reclaim_step_objects=5):
        done = asyncio.run(reclaim_in_steps(roots, pause))
    assert done.aborted and done.freed == 0 and gone() is not None
    assert len(pauses) >= 4, "steps of 5 objects, not one step of the default 10,000"


def test_containers_are_emptied_with_their_builtin_clear():
    """A container subclass that reacts to clear() (Bokeh's notify their owners) is emptied without it."""

    class Noisy(dict):
        def clear(self) -> None:
            raise AssertionError("the subclass's clear was called")

    holder = Node("holder")
    noisy = Noisy(me=holder)
    ordered = OrderedDict(me=holder)
    queue = deque([holder])
    holder.links += [noisy, ordered, queue, {holder}]
    gone = weakref.ref(holder), weakref.ref(ordered)
    roots = [holder]
    del holder, noisy, ordered, queue
    reclaim(roots)
    assert [ref() for ref in gone] == [None, None]


def test_a_weak_reference_s_complaint_while_garbage_is_freed_is_not_printed(capsys):
    """A callback that reads a field already emptied (as Panel's weak tables may) is garbage's own noise."""
    a = Node("a")
    a.links.append(a)

    def callback(_ref, owner=a) -> None:
        owner.name.upper()  # emptied by then: AttributeError, raised while freeing

    a.watch = weakref.ref(Node("never"), callback)
    a.friend = Node("friend")
    a.friend.watch = weakref.ref(a, callback)
    roots = [a]
    del a
    reclaim(roots)
    assert capsys.readouterr().err == ""


def build_graph(data, size: int) -> list[Node]:
    """Nodes linking one another through lists, dicts, tuples and bound methods, drawn by hypothesis."""
    nodes = [Node(str(i)) for i in range(size)]
    for node in nodes:
        for target in data.draw(st.lists(st.integers(0, size - 1), max_size=4)):
            way = data.draw(st.sampled_from(["list", "dict", "tuple", "method"]))
            if way == "list":
                node.links.append(nodes[target])
            elif way == "dict":
                node.__dict__.setdefault("table", {})[f"k{len(node.links)}-{target}"] = nodes[target]
                node.links.append(None)
            elif way == "tuple":
                node.links.append((nodes[target], "pair"))
            else:
                node.links.append(nodes[target].__init__)  # back to the target through __self__
    return nodes


def targets(node: Node) -> list[Node]:
    found = [getattr(item, "__self__", item) for item in node.links if item is not None]
    found = [item[0] if isinstance(item, tuple) else item for item in found]
    return found + list(getattr(node, "table", {}).values())


def reachable(starts: list[Node]) -> list[Node]:
    seen: dict[int, Node] = {}
    stack = list(starts)
    while stack:
        node = stack.pop()
        if id(node) not in seen:
            seen[id(node)] = node
            stack.extend(targets(node))
    return list(seen.values())


def shape(node: Node) -> tuple:
    """What a node holds, by the names of what it links to (holding no reference to them)."""
    return node.name, [t.name for t in targets(node)], len(node.links)


@settings(max_examples=60, deadline=None, database=None)
@given(st.data())
def test_it_frees_what_the_collector_would_and_leaves_the_rest_whole(data):
    """Random object graphs, some nodes held from outside: everything reachable from outside keeps its
    fields; everything the root reaches that nothing outside reaches is freed, as gc.collect() would."""
    size = data.draw(st.integers(2, 30))
    nodes = build_graph(data, size)
    root = nodes[data.draw(st.integers(0, size - 1))]
    walked = {id(n) for n in reachable([root])}
    # Held from outside: some of the root's own, and every node it does not reach (other sessions, caches).
    chosen = data.draw(st.sets(st.integers(0, size - 1), max_size=size // 2))
    outside = [n for i, n in enumerate(nodes) if i in chosen or id(n) not in walked]
    kept = {id(n) for n in reachable(outside)}
    doomed = [weakref.ref(n) for n in reachable([root]) if id(n) not in kept]
    before = [shape(n) for n in reachable(outside)]
    roots = [root]
    del nodes, root
    gc.freeze()
    reclaim(roots)
    assert [ref() for ref in doomed] == [None] * len(doomed)
    assert [shape(n) for n in reachable(outside)] == before


def test_in_steps_it_frees_the_same_and_lets_other_work_run_between_steps():
    """Cut into steps, with the event loop's other work in between (which may change what is walked), it
    frees what reclaim() would, and never what that other work still holds."""
    import asyncio

    def a_page(size: int) -> tuple[list[Node], list[weakref.ref]]:
        nodes = [Node(str(i)) for i in range(size)]
        for first, second in zip(nodes, nodes[1:] + nodes[:1], strict=True):
            first.links.append(second)
        return nodes, [weakref.ref(n) for n in nodes]

    page, refs = a_page(200)
    roots = [page[0]]
    del page
    kept = []
    pauses = []

    async def pause() -> None:
        pauses.append(1)
        if len(pauses) == 2:  # another session's work takes hold of a node already walked
            kept.append(refs[5]())
        await asyncio.sleep(0)

    done = asyncio.run(reclaim_in_steps(roots, pause, step_objects=50))
    assert len(pauses) >= 4 and done.longest_ms <= done.ms
    assert kept[0].name == "5" and kept[0].links[0].name == "6", "what another step took hold of is whole"
    alive = [r() for r in refs]
    assert all(n is not None for n in alive), "a ring held at one node is held whole"
    del alive
    kept.clear()
    page, refs = a_page(200)
    roots = [page[0]]
    del page
    done = asyncio.run(reclaim_in_steps(roots, pause, step_objects=50))
    assert done.freed >= 400 and [r() for r in refs] == [None] * 200


def test_weak_references_to_the_garbage_are_cleared_before_anything_is_emptied():
    """A weak reference or weak table never hands out a garbage object hollowed out: while its containers are
    being emptied, every weak reference to it already returns None and weak tables have dropped it."""
    seen: list[tuple] = []

    class Reporter:
        """Freed when the first container holding it is emptied: notes what the weak references give then."""

        def __del__(self) -> None:
            seen.append((ref_a(), ref_b(), len(table), list(dropped)))

    a, b = Node("a"), Node("b")
    a.links += [b, Reporter()]
    b.links.append(a)
    ref_a, ref_b = weakref.ref(a), weakref.ref(b)
    table = weakref.WeakSet([a, b])
    dropped: list[str] = []
    watcher = weakref.ref(a, lambda _ref: dropped.append("callback"))
    roots = [a]
    del a, b
    done = reclaim(roots)
    assert done.freed > 0
    assert seen == [(None, None, 0, ["callback"])], "a was still held (by the reclaim) but its references were clear"
    assert dropped == ["callback"] and watcher() is None, "each callback ran once"


def test_the_reclaim_stands_down_where_its_assumptions_do_not_hold():
    """The reference-count probe and the weak-reference clearing hold for CPython 3.11-3.13 with the GIL only:
    elsewhere unsupported() names why (and the server leaves closed pages to the full collection)."""
    from blocktrace.app.server.session_reclaim import unsupported

    assert unsupported(version=(3, 11), implementation="cpython", free_threaded=False) is None
    assert unsupported(version=(3, 13), implementation="cpython", free_threaded=False) is None
    assert "3.14" in unsupported(version=(3, 14), implementation="cpython", free_threaded=False)
    assert "3.10" in unsupported(version=(3, 10), implementation="cpython", free_threaded=False)
    assert "free-threaded" in unsupported(version=(3, 13), implementation="cpython", free_threaded=True)
    assert "pypy" in unsupported(version=(3, 11), implementation="pypy", free_threaded=False)
