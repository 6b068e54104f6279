"""app/tuning/gc_pauses.py: frozen session memory stays out of the collector's walk; closed sessions' memory returns."""

from __future__ import annotations

import gc
import weakref

import pytest

from blocktrace.app.tuning import gc_pauses as gc_tuning
from blocktrace.app.tuning.gc_pauses import Reclaimer


class Cycle:
    def __init__(self) -> None:
        self.me = self


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def thawed():
    yield
    gc.unfreeze()


def test_a_frozen_cycle_survives_collection_until_reclaimed(thawed):
    obj = Cycle()
    ref = weakref.ref(obj)
    gc_tuning.freeze_young()
    del obj
    gc.collect()
    assert ref() is not None  # frozen: the collector no longer looks at it
    reclaimer = Reclaimer()
    for _ in range(gc_tuning.RECLAIM_AFTER_CLOSED):
        reclaimer.session_opened()
        reclaimer.session_closed()
    assert reclaimer.reclaim_if_due()
    assert ref() is None
    assert gc.get_freeze_count() > 0  # frozen again afterwards


def test_fresh_garbage_is_collected_before_freezing(thawed):
    obj = Cycle()
    ref = weakref.ref(obj)
    del obj
    gc_tuning.freeze_young()
    assert ref() is None


def test_reclaim_waits_for_enough_closed_sessions_or_for_time():
    clock = Clock()
    reclaimer = Reclaimer(clock=clock)
    for _ in range(100):
        reclaimer.session_opened()
    assert not reclaimer.due()  # nothing closed
    for _ in range(gc_tuning.RECLAIM_AFTER_CLOSED):
        reclaimer.session_closed()
    assert not reclaimer.due()  # 10 of 100: less than a quarter
    for _ in range(15):
        reclaimer.session_closed()
    assert reclaimer.due()  # 25 closed, 75 open: a quarter of what is still open


def test_one_closed_session_is_reclaimed_after_the_longest_wait(thawed):
    clock = Clock()
    reclaimer = Reclaimer(clock=clock)
    reclaimer.session_opened()
    reclaimer.session_opened()
    reclaimer.session_closed()
    clock.now = gc_tuning.RECLAIM_MAX_WAIT_S - 1
    assert not reclaimer.reclaim_if_due()
    clock.now = gc_tuning.RECLAIM_MAX_WAIT_S + 1
    assert reclaimer.reclaim_if_due()
    assert reclaimer.closed_since == 0 and not reclaimer.due()
    assert len(reclaimer.reclaims) == 1


class FakeSession:
    """Panel's onload and next-tick scheduling for one served page, run by hand in their order."""

    def __init__(self, monkeypatch):
        import panel as pn
        from bokeh.document import Document

        self.onload, self.ticks = [], []
        doc = Document()
        from types import SimpleNamespace

        context = SimpleNamespace(id="fake-session", request=SimpleNamespace(arguments={}, cookies={}, headers={}))
        doc._session_context = lambda: context  # a served page (Bokeh keeps a weak reference)
        monkeypatch.setattr(type(pn.state), "curdoc", property(lambda _self: doc))
        monkeypatch.setattr(pn.state, "onload", lambda callback, threaded=False: self.onload.append(callback))
        monkeypatch.setattr(pn.state, "execute", lambda callback, schedule="auto": self.ticks.append(callback))

    def load(self) -> None:
        for callback in self.onload:
            callback()
        while self.ticks:
            self.ticks.pop(0)()


def frozen(obj) -> bool:
    """Tracked by the collector but in none of its generations: moved out of its sight by gc.freeze()."""
    return gc.is_tracked(obj) and not any(any(o is obj for o in gc.get_objects(g)) for g in range(3))


def test_a_page_is_frozen_again_after_its_figures_are_drawn(monkeypatch, thawed):
    from bokeh.plotting import figure

    from blocktrace.explorables.components.figures import DrawnAfterLoad

    session = FakeSession(monkeypatch)
    monkeypatch.setattr(gc_tuning, "_installed", True)
    drawn = DrawnAfterLoad()
    made = []
    slot = drawn.place(lambda: made.append(Cycle()) or figure(), 100)
    gc_tuning.freeze_after_load()  # as shell() does, after the page's body was built
    session.load()
    assert slot.objects and made
    assert frozen(made[0])  # built by the page's onload work, then frozen with the rest


def test_nothing_is_frozen_outside_the_installed_server(monkeypatch, thawed):
    session = FakeSession(monkeypatch)
    monkeypatch.setattr(gc_tuning, "_installed", False)
    gc_tuning.freeze_after_load()
    assert session.onload == []
