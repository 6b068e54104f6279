"""A control's change from the browser, applied directly (app/tuning/control_events.py)."""

from __future__ import annotations

import logging

import panel as pn
import param
import pytest
from bokeh.document import Document
from panel.io.state import set_curdoc

from blocktrace.app.tuning.control_events import apply_directly


class Controls(param.Parameterized):
    scale = param.Number(1.0, bounds=(0.0, 3.0))
    replace = param.Boolean(False)
    norm = param.Selector(default="rmsnorm", objects=["rmsnorm", "layernorm"])
    text = param.String("1, 2")


@pytest.fixture
def page():
    state = Controls()
    widgets = {
        "slider": pn.widgets.FloatSlider.from_param(state.param.scale, step=0.05),
        "checkbox": pn.widgets.Checkbox.from_param(state.param.replace),
        "select": pn.widgets.Select.from_param(state.param.norm,
                                               options={"RMSNorm": "rmsnorm", "LayerNorm": "layernorm"}),
        "text": pn.widgets.TextInput.from_param(state.param.text),
    }
    doc = Document()
    root = pn.Column(*widgets.values()).get_root(doc)
    doc.add_root(root)
    for widget in widgets.values():
        apply_directly(widget)
    models = {name: w._models[root.ref["id"]][0] for name, w in widgets.items()}
    sent = []
    doc.on_change(lambda event: sent.append((event.model, getattr(event, "attr", None))))
    busy = []
    watcher = pn.state.param.watch(lambda event: busy.append(event.new), "_busy_counter")
    with set_curdoc(doc):
        yield state, widgets, models, sent, busy
    pn.state.param.unwatch(watcher)


def test_a_slider_value_reaches_the_state_without_busy_bookkeeping_or_an_echo(page):
    state, widgets, models, sent, busy = page
    models["slider"].value = 0.35  # what Bokeh does with the browser's patch, before Panel's event
    sent.clear()
    widgets["slider"]._process_events({"value": 0.35})
    assert widgets["slider"].value == 0.35 and state.scale == 0.35
    assert busy == []
    assert (models["slider"], "value") not in sent  # the browser's own value is not sent back to it


def test_properties_are_translated_as_panel_translates_them(page):
    state, widgets, models, sent, busy = page
    widgets["checkbox"]._process_events({"active": True})
    widgets["select"]._process_events({"value": "LayerNorm"})  # the browser sends the label
    widgets["text"]._process_events({"value_input": "3, 4", "value": "3, 4"})
    assert state.replace is True and state.norm == "layernorm" and state.text == "3, 4"
    assert widgets["text"].value_input == "3, 4"
    assert busy == []


def test_a_constant_parameter_goes_through_panels_own_path(page):
    state, widgets, models, sent, busy = page
    widgets["slider"]._process_events({"value_throttled": 0.4})  # constant on the widget: Panel unlocks it
    assert widgets["slider"].value_throttled == 0.4
    assert busy  # Panel's path, with its bookkeeping, did the work


def test_a_failing_watcher_still_lets_the_next_change_through(page):
    state, widgets, models, sent, busy = page

    def fail(_event):
        raise RuntimeError("boom")

    watcher = state.param.watch(fail, "scale")
    with pytest.raises(RuntimeError):
        widgets["slider"]._process_events({"value": 0.5})
    state.param.unwatch(watcher)
    assert widgets["slider"]._in_process__events == {}
    widgets["slider"]._process_events({"value": 0.6})
    assert state.scale == 0.6


@pytest.mark.parametrize("tuned", [True, False], ids=["tuned", "no-tuning"])
def test_a_failing_callback_is_logged_as_panel_logs_it(tuned, caplog):
    """A callback that raises leaves Panel's "Callback failed for object named ..." line, with the exception,
    on the tuned path as on stock Panel's."""
    state = Controls()
    slider = pn.widgets.FloatSlider.from_param(state.param.scale, step=0.05, name="Scale")
    doc = Document()
    doc.add_root(slider.get_root(doc))
    if tuned:
        apply_directly(slider)

    def fail(_event):
        raise RuntimeError("boom")

    state.param.watch(fail, "scale")
    panel_log = logging.getLogger("panel.reactive")  # Panel's loggers do not propagate to the root
    panel_log.addHandler(caplog.handler)
    try:
        with set_curdoc(doc), pytest.raises(RuntimeError):
            slider._process_events({"value": 0.5})
    finally:
        panel_log.removeHandler(caplog.handler)
    # one record, whether or not this Panel's logger also propagates to the root (where caplog listens as well)
    [record] = {id(r): r for r in caplog.records if r.name == "panel.reactive" and r.levelno == logging.ERROR}.values()
    assert record.getMessage().startswith("Callback failed for object named 'Scale' changing property")
    assert "0.5" in record.getMessage()
    assert isinstance(record.exc_info[1], RuntimeError) and str(record.exc_info[1]) == "boom"
