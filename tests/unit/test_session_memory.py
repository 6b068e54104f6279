"""app/server/session_memory.py: live sessions stay out of the collector's walk; closed sessions' memory
comes back, but only once the class is quiet (or closed sessions pile up)."""

from __future__ import annotations

import asyncio
import gc
import weakref
from types import SimpleNamespace

import pytest

from blocktrace.app.server import session_memory
from blocktrace.app.server.session_memory import Reclaimer
from blocktrace.app.settings import overridden, settings
from tests.clock import Clock


class Cycle:
    def __init__(self) -> None:
        self.me = self

    def changed(self, attr, old, new) -> None:
        pass


@pytest.fixture
def thawed():
    """Whatever a test froze is thawed again, and the collector's thresholds are as they were."""
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


def class_of(open_n: int, closed_n: int, clock: Clock) -> Reclaimer:
    reclaimer = Reclaimer(clock=clock)
    for _ in range(open_n + closed_n):
        reclaimer.session_opened()
    for _ in range(closed_n):
        leave(reclaimer)
    return reclaimer


def leave(reclaimer: Reclaimer) -> None:
    """A session closes and its own step cannot free it: left for the full reclaim."""
    reclaimer.session_closed()
    reclaimer.left_behind()


def test_a_frozen_cycle_survives_collection_until_a_quiet_reclaim(thawed):
    """Frozen garbage is out of every collection's reach until the reclaimer thaws, collects and freezes again."""
    obj = Cycle()
    ref = weakref.ref(obj)
    session_memory.freeze_young()
    del obj
    gc.collect()
    assert ref() is not None  # frozen: the collector no longer looks at it
    clock = Clock()
    reclaimer = class_of(10, 1, clock)
    clock.now += settings().quiet_after
    assert reclaimer.reclaim_if_due()
    assert ref() is None
    assert gc.get_freeze_count() > 0  # the survivors are frozen again
    assert reclaimer.closed_since == 0 and [why for why, _ms in reclaimer.reclaims] == ["quiet"]


def test_fresh_garbage_is_collected_before_freezing(thawed):
    """freeze_young collects the young generations first, so recent garbage is not frozen with the page."""
    obj = Cycle()
    ref = weakref.ref(obj)
    del obj
    session_memory.freeze_young()
    assert ref() is None


def test_no_reclaim_while_any_browser_is_changing_something():
    """30 of 100 closed in a class still at work: nothing runs until no browser changed anything for `quiet_after`."""
    clock = Clock()
    reclaimer = class_of(100, 30, clock)
    for _ in range(20):  # a change every 5 s, for 100 s
        reclaimer.browser_changed()
        clock.now += settings().quiet_after / 2
        assert reclaimer.due() is None
        assert not reclaimer.reclaim_if_due()
    clock.now += settings().quiet_after / 2
    assert reclaimer.due() == "quiet"


def test_nothing_to_reclaim_in_a_quiet_class_with_no_closed_session():
    """A quiet class whose sessions are all open has nothing to give back: no pause."""
    clock = Clock()
    reclaimer = class_of(100, 0, clock)
    clock.now += 10 * settings().quiet_after
    assert reclaimer.due() is None


def test_a_busy_class_reclaims_once_closed_sessions_pile_up():
    """Never quiet: the reclaim waits until as many sessions closed as are open (and `reclaim_forced_after`)."""
    clock = Clock()
    with overridden(reclaim_forced_after=50, reclaim_forced_share=1.0):
        reclaimer = class_of(60, 50, clock)
        reclaimer.browser_changed()
        assert reclaimer.due() is None  # 50 closed, 60 open
        for _ in range(10):
            leave(reclaimer)
        assert reclaimer.due() == "closed sessions piling up"  # 60 closed, 50 open
        small = class_of(5, 49, clock)
        small.browser_changed()
        assert small.due() is None  # far more closed than open, but fewer than `reclaim_forced_after`
    with overridden(reclaim_forced_after=5, reclaim_forced_share=0.5):
        assert class_of(20, 10, clock).due() == "closed sessions piling up", "the settings are read when deciding"


def test_a_quiet_class_reclaims_at_most_once_per_gap(thawed):
    """Tabs closing one by one in a quiet class: one pause per `reclaim_gap`, not one per tab."""
    clock = Clock()
    reclaimer = class_of(50, 1, clock)
    clock.now += settings().quiet_after
    assert reclaimer.reclaim_if_due()
    leave(reclaimer)
    clock.now += settings().reclaim_gap - 1
    assert not reclaimer.reclaim_if_due()
    clock.now += 1
    assert reclaimer.reclaim_if_due()


class Connection:
    """Stands in for Bokeh's ServerSession: what Document.destroy() unsubscribes."""

    def _document_patched(self, event) -> None:
        pass


class ServedPage:
    """A Bokeh Document as a served session sees it, with Panel's onload and next-tick work run by hand."""

    def __init__(self, monkeypatch, served: bool = True):
        import panel as pn
        from bokeh.document import Document

        self.onload, self.ticks = [], []
        self.doc = doc = Document()
        context = SimpleNamespace(id="fake-session", server_context=object() if served else None,
                                  request=SimpleNamespace(arguments={}, cookies={}, headers={}) if served else None)
        doc._session_context = lambda: context  # Bokeh keeps a weak reference to a served session's context
        self.context = context
        monkeypatch.setattr(type(pn.state), "curdoc", property(lambda _self: doc))
        monkeypatch.setattr(pn.state, "onload", lambda callback, threaded=False: self.onload.append(callback))
        monkeypatch.setattr(pn.state, "execute", lambda callback, schedule="auto": self.ticks.append(callback))
        monkeypatch.setattr(doc, "add_next_tick_callback", lambda callback: self.ticks.append(callback))

    def load(self) -> None:
        for callback in self.onload:
            callback()
        while self.ticks:
            self.ticks.pop(0)()

    def close(self) -> None:
        for callback in list(self.doc.session_destroyed_callbacks):
            callback(self.context)


@pytest.fixture
def fresh_reclaimer(monkeypatch):
    from blocktrace.explorables.components import build_turns

    monkeypatch.setattr(build_turns, "PACER", build_turns.Pacer())  # a queue of this test's own event loop
    clock = Clock()
    reclaimer = Reclaimer(clock=clock)
    monkeypatch.setattr(session_memory, "reclaimer", reclaimer)
    monkeypatch.setattr(session_memory, "start", lambda _loop=None: None)  # no periodic checks: no loop runs
    return reclaimer, clock


def test_a_served_page_is_counted_and_its_close_is_seen(monkeypatch, fresh_reclaimer, thawed):
    """track_page counts a served session open, and closed when Bokeh destroys it."""
    reclaimer, _clock = fresh_reclaimer
    page = ServedPage(monkeypatch)
    session_memory.track_page()
    assert (reclaimer.open_sessions, reclaimer.closed_since) == (1, 0)
    page.close()
    assert (reclaimer.open_sessions, reclaimer.closed_since) == (0, 1)


def test_only_a_browsers_change_counts_as_activity(monkeypatch, fresh_reclaimer, thawed):
    """A change the browser sent (it has a setter) keeps the class busy; the server's own updates do not."""
    from bokeh.models import Slider

    reclaimer, clock = fresh_reclaimer
    page = ServedPage(monkeypatch)
    slider = Slider(start=0, end=1, value=0)
    page.doc.add_root(slider)
    session_memory.track_page()
    clock.now = 2000.0
    slider.value = 0.25  # the server's own update (a poll, a store answer)
    assert reclaimer.last_change == float("-inf")
    page.doc.apply_json_patch({"events": [{"kind": "ModelChanged", "model": {"id": slider.id}, "attr": "value",
                                           "new": 0.5}]}, setter=object())
    assert reclaimer.last_change == 2000.0


def test_a_page_is_frozen_again_after_its_figures_are_drawn(monkeypatch, fresh_reclaimer, thawed):
    """What a page's onload builds (its figures) is frozen too, not left for every full collection to walk."""
    from bokeh.plotting import figure

    from blocktrace.explorables.components.figures import DrawnAfterLoad

    page = ServedPage(monkeypatch)
    drawn = DrawnAfterLoad()
    made = []
    slot = drawn.place(lambda: made.append(Cycle()) or figure(), 100)
    session_memory.track_page()  # as shell() does, after the page's body was built
    page.load()
    assert slot.objects and made
    assert frozen(made[0])


def frozen(obj) -> bool:
    """Tracked by the collector but in none of its generations: moved out of its sight by gc.freeze()."""
    return gc.is_tracked(obj) and not any(any(o is obj for o in gc.get_objects(g)) for g in range(3))


def test_nothing_is_tracked_outside_a_served_session(monkeypatch, fresh_reclaimer, thawed):
    """Panel's start-up warm-up (no server, no request) is not a student: not counted, nothing scheduled."""
    reclaimer, _clock = fresh_reclaimer
    page = ServedPage(monkeypatch, served=False)
    session_memory.track_page()
    assert page.onload == [] and page.ticks == []
    assert reclaimer.open_sessions == 0 and not page.doc.session_destroyed_callbacks


def test_a_closed_sessions_document_comes_back_only_with_the_quiet_reclaim(fresh_reclaimer, thawed):
    """A session's Document, frozen as served and destroyed as Bokeh discards it: it survives Bokeh's own
    collection and young ones (frozen), and is freed by the reclaim once the class is quiet."""
    reclaimer, clock = fresh_reclaimer
    doc, view = a_page_document()
    session = Connection()
    doc.on_change_dispatch_to(session)
    reclaimer.session_opened()
    session_memory.freeze_young()
    ref = weakref.ref(doc)
    doc.destroy(session)  # Bokeh's discard of the session, with its gc.collect()
    leave(reclaimer)  # as if its own step could not free it
    del doc, view
    gc.collect(0)
    gc.collect(1)
    assert ref() is not None  # frozen: no collection sees it
    reclaimer.browser_changed()
    assert not reclaimer.reclaim_if_due()  # someone is still working
    clock.now += settings().quiet_after
    assert reclaimer.reclaim_if_due()
    assert ref() is None


def test_a_long_collection_is_logged_and_a_short_one_is_not(caplog):
    """The collection timer names a collection that held the server past `long_collection_ms`, and only that."""
    ticks = iter([0.0, 0.010, 1.0, 1.0 + settings().long_collection_ms / 1000 + 0.05])
    timer = session_memory.CollectionTimer(clock=lambda: next(ticks))
    with caplog.at_level("INFO", logger="blocktrace.app.server.session_memory"):
        timer("start", {"generation": 0})
        timer("stop", {"generation": 0})
        timer("start", {"generation": 2})
        timer("stop", {"generation": 2})
    assert [r.getMessage() for r in caplog.records] == ["a generation-2 collection paused the server 150 ms"]
    assert timer.longest_ms == pytest.approx(150.0)


def a_page_document():
    """A Document with a slider, and the page's outermost object (or view) in a cycle with it, as Panel's are."""
    from bokeh.document import Document
    from bokeh.models import Column, Slider

    doc = Document()
    body = Cycle()
    body.doc, doc.view = doc, body
    slider = Slider(start=0, end=1, value=0)
    slider.on_change("value", body.changed)
    doc.add_root(Column(children=[slider]))
    return doc, body


def a_closed_page() -> tuple[session_memory.OpenPage, weakref.ref, weakref.ref]:
    """A page (its outermost object and Document in cycles with its models and view), frozen as served, then
    destroyed as Bokeh discards it; only the OpenPage record (weakly) still knows it."""
    doc, body = a_page_document()
    page = session_memory.OpenPage(doc, body)
    session_memory.freeze_young()
    page.note()
    session = Connection()
    doc.on_change_dispatch_to(session)
    doc.destroy(session)
    page.closed()
    return page, weakref.ref(body), weakref.ref(doc)


def test_a_closed_page_is_taken_apart_in_its_turn_without_a_full_collection(fresh_reclaimer, thawed):
    """Its own step frees the frozen page and Document at once; the quiet-time reclaim has nothing left to do."""
    reclaimer, clock = fresh_reclaimer
    reclaimer.session_opened()
    page, body, doc = a_closed_page()
    reclaimer.session_closed()
    gc.collect()
    assert body() is not None and doc() is not None  # frozen: no collection sees them
    asyncio.run(session_memory.take_apart_in_turn(page))
    assert page.freed and body() is None and doc() is None
    assert reclaimer.closed_since == 0 and reclaimer.taken_apart[-1].freed > 100
    clock.now += 10 * settings().quiet_after
    assert not reclaimer.reclaim_if_due()


def test_a_closed_page_still_held_elsewhere_is_left_for_the_quiet_reclaim(fresh_reclaimer, thawed, caplog):
    """If something still refers to the page after every try, nothing of it is taken apart and the full
    reclaim stays due."""
    reclaimer, clock = fresh_reclaimer
    reclaimer.session_opened()
    page, body, _doc = a_closed_page()
    held = [body()]  # a lingering reference (a store call in flight)
    reclaimer.session_closed()
    with overridden(take_apart_retry=0), caplog.at_level("INFO", logger="blocktrace.app.server.session_memory"):
        asyncio.run(session_memory.take_apart_in_turn(page))
    assert held[0].doc.view is held[0], "untouched"
    assert caplog.text.count("still held elsewhere") == 1
    assert reclaimer.closed_since == 1
    clock.now += settings().quiet_after
    del held
    assert reclaimer.reclaim_if_due() and body() is None


def test_a_served_page_s_close_schedules_its_own_reclaim(monkeypatch, fresh_reclaimer, thawed):
    """Closing a served session (with the event loop running) takes its cycles apart in a build turn."""
    taken = []
    monkeypatch.setattr(session_memory, "take_apart_in_turn", lambda page: _noted(taken, page))
    page = ServedPage(monkeypatch)

    async def close() -> None:
        session_memory.track_page(Cycle())
        page.load()
        page.close()
        await asyncio.sleep(0)  # the task created on close runs on the loop's next round

    asyncio.run(close())
    assert len(taken) == 1 and taken[0].doc_ref() is page.doc and taken[0].doc is None


async def _noted(taken: list, page) -> None:
    taken.append(page)


def test_a_quiet_class_also_reclaims_what_freed_pages_leave_once_enough_closed():
    """Each page freed by its own step leaves its emptied Document: a quiet class sweeps those up once
    `housekeeping_after` pages were freed, and not before."""
    from blocktrace.app.server.session_reclaim import Reclaimed

    clock = Clock()
    reclaimer = class_of(50, 0, clock)
    with overridden(housekeeping_after=7, quiet_after=10.0, reclaim_gap=60.0):
        clock.now += 100.0
        for _ in range(7 - 1):
            reclaimer.session_closed()
            reclaimer.session_taken_apart(Reclaimed(100, 90, False, 1.0, 1.0))
        assert reclaimer.due() is None
        reclaimer.session_closed()
        reclaimer.session_taken_apart(Reclaimed(100, 90, False, 1.0, 1.0))
        assert reclaimer.due() == "quiet"
        reclaimer.browser_changed()
        assert reclaimer.due() is None, "never while students work"


def test_only_the_last_closed_pages_figures_are_kept():
    """The reclaimer keeps the own-step figures of the last `reclaim_figures_kept` closed pages, and counts all."""
    from blocktrace.app.server.session_reclaim import Reclaimed

    reclaimer = Reclaimer()
    with overridden(reclaim_figures_kept=3):
        for walked in range(10):
            reclaimer.session_taken_apart(Reclaimed(walked, 0, False, 1.0, 1.0))
    assert [outcome.walked for outcome in reclaimer.taken_apart] == [7, 8, 9]
    assert reclaimer.taken_apart_count == 10
    with overridden(reclaim_figures_kept=0):
        reclaimer.session_taken_apart(Reclaimed(10, 0, False, 1.0, 1.0))
    assert reclaimer.taken_apart == [] and reclaimer.taken_apart_count == 11, "none kept means none"


def test_a_freeze_waits_for_pages_next_tick_callbacks(monkeypatch, thawed):
    """While an open page has a next-tick callback waiting, the freeze waits (at most SETTLE_TRIES rounds)."""
    from bokeh.document import Document

    doc = Document()
    page = session_memory.OpenPage(doc)
    monkeypatch.setattr(session_memory, "_open_pages", {page})
    frozen_at = []
    monkeypatch.setattr(session_memory, "freeze_young", lambda: frozen_at.append(len(doc.session_callbacks)))

    async def scenario() -> None:
        waiting = doc.add_next_tick_callback(lambda: None)
        session_memory.freeze_soon()
        for _ in range(3):
            await asyncio.sleep(session_memory.SETTLE_S)
        assert frozen_at == []  # still waiting for the callback
        doc.remove_next_tick_callback(waiting)  # it has run
        while not frozen_at:
            await asyncio.sleep(session_memory.SETTLE_S)

    asyncio.run(asyncio.wait_for(scenario(), 10))
    assert frozen_at == [0]


def test_switched_off_a_closed_page_is_left_whole_for_the_quiet_reclaim(monkeypatch, fresh_reclaimer, thawed,
                                                                         caplog):
    """With BLOCKTRACE_SESSION_RECLAIM=0 nothing of a closed page is emptied: it is left, whole, for the
    quiet-time full collection, and the log says once why."""
    from blocktrace.app.settings import overridden

    monkeypatch.setattr(session_memory, "_stood_down", set())
    taken = []
    monkeypatch.setattr(session_memory, "take_apart_in_turn", lambda page: _noted(taken, page))
    reclaimer, clock = fresh_reclaimer
    page = ServedPage(monkeypatch)
    body = Cycle()
    body.table = {"doc": page.doc, "items": [body]}
    gone = weakref.ref(body)

    async def open_and_close(served: ServedPage, outermost: Cycle) -> None:
        session_memory.track_page(outermost)
        served.load()
        served.close()
        await asyncio.sleep(0)  # a task made on close would run on the loop's next round

    with overridden(session_reclaim=False), caplog.at_level("INFO", logger="blocktrace.app.server.session_memory"):
        asyncio.run(open_and_close(page, body))
    assert taken == [], "no step of its own was scheduled"
    assert body.me is body and body.table["items"] == [body], "nothing of the page was emptied"
    assert reclaimer.closed_since == 1 and reclaimer.taken_apart_count == 0
    assert caplog.text.count("switched off") == 1
    del body, page
    clock.now += settings().quiet_after
    assert reclaimer.reclaim_if_due() and gone() is None, "the quiet-time reclaim frees it"


def test_on_an_interpreter_the_reclaim_does_not_support_it_stands_down_with_one_log_line(monkeypatch, caplog):
    """On CPython 3.14 (or free-threaded, or not CPython) closed pages are not taken apart in their own steps,
    and one log line says why, however many pages close."""
    from blocktrace.app.server.session_reclaim import unsupported

    monkeypatch.setattr(session_memory, "_stood_down", set())
    newer = unsupported(version=(3, 14), implementation="cpython", free_threaded=False)
    with caplog.at_level("INFO", logger="blocktrace.app.server.session_memory"):
        assert not session_memory.own_steps(enabled=True, why_not=newer)
        assert not session_memory.own_steps(enabled=True, why_not=newer)
        assert session_memory.own_steps(enabled=True, why_not=None)
    assert [r.getMessage() for r in caplog.records] == [
        "closed pages are not taken apart in their own steps: CPython 3.14 is outside 3.11-3.13; the quiet-time "
        "full reclaim frees them"]
