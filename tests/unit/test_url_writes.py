"""explorables/components/url_state.py: in a served page the address is written once per burst of changes,
`delay_ms` after the burst's last change, with the values the state has then."""

from __future__ import annotations

import dataclasses
import weakref
from types import SimpleNamespace

import param
import pytest
from bokeh.application import Application
from bokeh.document import Document
from bokeh.server.contexts import ApplicationContext, BokehServerContext, BokehSessionContext
from panel.io.state import set_curdoc, state

from blocktrace.explorables.components import url_state
from blocktrace.explorables.components.url_state import QueryKey, read_number, sync_to_url
from tests.clock import Clock

DELAY_MS = 500


class Knob(param.Parameterized):
    scale = param.Number(default=1.0)


@pytest.fixture
def served():
    """A served session's document (its timeouts are kept, not run), a state synced to its address, a clock."""
    clock = Clock()
    doc = Document()
    application = ApplicationContext(Application())
    context = BokehSessionContext("a-session", BokehServerContext(application), doc)
    context._request = SimpleNamespace(arguments={}, cookies={}, headers={})  # the page's request, as Bokeh keeps it
    doc._session_context = weakref.ref(context)  # as a Bokeh server session sets it
    knob = Knob()
    saved = url_state.WRITES
    url_state.WRITES = dataclasses.replace(saved, delay_ms=DELAY_MS, clock=clock)
    try:
        with set_curdoc(doc):
            sync_to_url(knob, {"scale": QueryKey("scale", read_number(0, 2))})
            yield doc, knob, clock, state.location
    finally:
        url_state.WRITES = saved
        state._locations.pop(doc, None)


def run_due(doc: Document, clock: Clock, after_ms: float) -> list[int]:
    """Move the clock on and run the timeouts waiting (each once); the delays they had asked for."""
    clock.now += after_ms / 1000
    waiting = list(doc.session_callbacks)
    for callback in waiting:
        doc.remove_timeout_callback(callback)
    with set_curdoc(doc):
        for callback in waiting:
            callback.callback()
    return [callback.timeout for callback in waiting]


def test_a_burst_of_changes_is_written_once_after_its_last_change(served):
    """Changes at 0, 400 and 800 ms: the timeout asked for at 0 runs at 500 and waits on (400 ms more), again at
    900, and the address is written at 1,300 ms, once, with the last value."""
    doc, knob, clock, location = served
    knob.scale = 0.5
    assert [c.timeout for c in doc.session_callbacks] == [DELAY_MS]
    clock.now += 0.4
    knob.scale = 0.25  # within the burst: no second timeout
    assert len(doc.session_callbacks) == 1
    assert run_due(doc, clock, 100) == [DELAY_MS]
    assert [c.timeout for c in doc.session_callbacks] == [400] and "scale" not in location.query_params
    clock.now += 0.3
    knob.scale = 0.75
    assert run_due(doc, clock, 100) == [400]
    assert [c.timeout for c in doc.session_callbacks] == [400] and "scale" not in location.query_params
    assert run_due(doc, clock, 400) == [400]
    assert location.query_params["scale"] == 0.75 and not doc.session_callbacks


def test_changes_further_apart_than_the_delay_are_each_written(served):
    doc, knob, clock, location = served
    for value in (0.5, 1.5):
        knob.scale = value
        run_due(doc, clock, DELAY_MS)
        assert location.query_params["scale"] == value and not doc.session_callbacks
