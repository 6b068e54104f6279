"""explorables/components/weak_callbacks.py: a callback left behind by a closed page keeps nothing of it."""

from __future__ import annotations

import gc
import weakref

from blocktrace.explorables.components.weak_callbacks import weakly


class View:
    def __init__(self) -> None:
        self.calls: list[int] = []

    def poll(self, value: int = 1) -> int:
        self.calls.append(value)
        return value


def test_a_bound_method_is_called_while_its_object_lives_and_not_kept_alive():
    view = View()
    callback = weakly(view.poll)
    assert callback(3) == 3 and view.calls == [3]
    gone = weakref.ref(view)
    del view
    gc.collect()
    assert gone() is None and callback(4) is None


def test_a_closure_lives_as_long_as_its_page_holds_it():
    view, calls = View(), []

    def poll() -> None:
        calls.append(0)

    view.held = poll  # as the page holds it
    callback = weakly(poll)
    del poll
    callback()
    assert calls == [0]
    gone = weakref.ref(view)
    del view
    gc.collect()
    assert gone() is None and callback() is None
    assert "poll" in callback.__name__


def test_a_poll_is_a_bokeh_periodic_callback_of_its_session_and_leaves_panels_busy_counter_alone():
    """periodically(): in a served session, one Bokeh periodic callback at the period asked, calling the poll
    weakly; Panel's process-wide busy counter is not touched when it runs; outside a session, nothing."""
    from bokeh.application import Application
    from bokeh.document import Document
    from bokeh.server.contexts import ApplicationContext, BokehServerContext, BokehSessionContext
    from panel.io.state import set_curdoc, state

    from blocktrace.explorables.components.weak_callbacks import periodically

    view = View()
    with set_curdoc(Document()):
        periodically(view.poll, 1234)  # no session (a page rendered outside the server): nothing scheduled
        assert not state.curdoc.session_callbacks

    doc = Document()
    application = ApplicationContext(Application())  # held here: the session's context refers to it weakly
    context = BokehSessionContext("a-session", BokehServerContext(application), doc)
    doc._session_context = weakref.ref(context)  # as a Bokeh server session sets it
    with set_curdoc(doc):
        periodically(view.poll, 1234)
    (callback,) = doc.session_callbacks
    assert callback.period == 1234
    busy_before = list(state._busy_counter)
    callback.callback()
    assert view.calls == [1] and state._busy_counter == busy_before
    gone = weakref.ref(view)
    del view
    gc.collect()
    assert gone() is None and callback.callback() is None
