"""app/server/session_memory.py: live sessions stay out of the collector's walk; closed sessions' memory
comes back, but only once the class is quiet (or closed sessions pile up)."""

from __future__ import annotations

import gc
import weakref
from types import SimpleNamespace

import pytest

from blocktrace.app.server import session_memory
from blocktrace.app.server.session_memory import (
    FORCE_AFTER_CLOSED,
    MIN_GAP_SECONDS,
    QUIET_SECONDS,
    Reclaimer,
)


class Cycle:
    def __init__(self) -> None:
        self.me = self

    def changed(self, attr, old, new) -> None:
        pass


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


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
        reclaimer.session_closed()
    return reclaimer


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
    clock.now += QUIET_SECONDS
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
    """30 of 100 closed in a class still at work: nothing runs until no browser changed anything for QUIET_SECONDS."""
    clock = Clock()
    reclaimer = class_of(100, 30, clock)
    for _ in range(20):  # a change every 5 s, for 100 s
        reclaimer.browser_changed()
        clock.now += QUIET_SECONDS / 2
        assert reclaimer.due() is None
        assert not reclaimer.reclaim_if_due()
    clock.now += QUIET_SECONDS / 2
    assert reclaimer.due() == "quiet"


def test_nothing_to_reclaim_in_a_quiet_class_with_no_closed_session():
    """A quiet class whose sessions are all open has nothing to give back: no pause."""
    clock = Clock()
    reclaimer = class_of(100, 0, clock)
    clock.now += 10 * QUIET_SECONDS
    assert reclaimer.due() is None


def test_a_busy_class_reclaims_once_closed_sessions_pile_up():
    """Never quiet: the reclaim waits until as many sessions closed as are open (and FORCE_AFTER_CLOSED)."""
    clock = Clock()
    reclaimer = class_of(60, FORCE_AFTER_CLOSED, clock)
    reclaimer.browser_changed()
    assert reclaimer.due() is None  # 50 closed, 60 open
    for _ in range(10):
        reclaimer.session_closed()
    assert reclaimer.due() == "closed sessions piling up"  # 60 closed, 50 open
    small = class_of(5, FORCE_AFTER_CLOSED - 1, clock)
    small.browser_changed()
    assert small.due() is None  # far more closed than open, but fewer than FORCE_AFTER_CLOSED


def test_a_quiet_class_reclaims_at_most_once_per_gap(thawed):
    """Tabs closing one by one in a quiet class: one pause per MIN_GAP_SECONDS, not one per tab."""
    clock = Clock()
    reclaimer = class_of(50, 1, clock)
    clock.now += QUIET_SECONDS
    assert reclaimer.reclaim_if_due()
    reclaimer.session_closed()
    clock.now += MIN_GAP_SECONDS - 1
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
    clock = Clock()
    reclaimer = Reclaimer(clock=clock)
    monkeypatch.setattr(session_memory, "reclaimer", reclaimer)
    monkeypatch.setattr(session_memory, "start", lambda: None)  # no periodic checks on a loop that never runs
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
    from bokeh.document import Document
    from bokeh.models import Column, Slider

    reclaimer, clock = fresh_reclaimer
    doc = Document()
    view = Cycle()  # a page's view, in a cycle with its document as Panel's objects are
    view.doc, doc.view = doc, view
    slider = Slider(start=0, end=1, value=0)
    slider.on_change("value", view.changed)
    doc.add_root(Column(children=[slider]))
    session = Connection()
    doc.on_change_dispatch_to(session)
    reclaimer.session_opened()
    session_memory.freeze_young()
    ref = weakref.ref(doc)
    doc.destroy(session)  # Bokeh's discard of the session, with its gc.collect()
    reclaimer.session_closed()
    del doc, slider, view
    gc.collect(0)
    gc.collect(1)
    assert ref() is not None  # frozen: no collection sees it
    reclaimer.browser_changed()
    assert not reclaimer.reclaim_if_due()  # someone is still working
    clock.now += QUIET_SECONDS
    assert reclaimer.reclaim_if_due()
    assert ref() is None


def test_a_long_collection_is_logged_and_a_short_one_is_not(caplog):
    """The collection timer names a collection that held the server past LONG_COLLECTION_MS, and only that."""
    ticks = iter([0.0, 0.010, 1.0, 1.0 + session_memory.LONG_COLLECTION_MS / 1000 + 0.05])
    timer = session_memory.CollectionTimer(clock=lambda: next(ticks))
    with caplog.at_level("INFO", logger="blocktrace.gc"):
        timer("start", {"generation": 0})
        timer("stop", {"generation": 0})
        timer("start", {"generation": 2})
        timer("stop", {"generation": 2})
    assert [r.getMessage() for r in caplog.records] == ["a generation-2 collection paused the server 150 ms"]
    assert timer.longest_ms == pytest.approx(150.0)
