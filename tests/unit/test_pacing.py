"""The teacher's pacing: which steps a hold closes, what a pushed state may set, and the store's record of both."""

from __future__ import annotations

import pytest

from blocktrace.app.classroom.pacing import PushedView, closed_steps, read_pushed_state
from blocktrace.app.classroom.store import EventStore
from blocktrace.explorables.components.prediction import Prediction
from blocktrace.explorables.transformer_block_trace.state import TraceState

TRACE = "transformer-block-trace"


def test_a_hold_closes_every_later_step():
    assert closed_steps("predict") == {"experiment", "implement", "explain"}
    assert closed_steps("implement") == {"explain"}
    assert closed_steps(None) == set() and closed_steps("nonsense") == set()


def test_a_held_prediction_keeps_the_experiment_locked_even_once_committed():
    p = Prediction({"a": "A"})
    p.held = True
    assert p.commit("a") is None and p.committed and not p.unlocked
    p.held = False
    assert p.unlocked


def test_a_pushed_state_keeps_only_valid_keys_of_the_explorable():
    link = "http://10.0.0.5:5006/explorables/transformer-block-trace?attention_scale=0&residual=replace&embed=1"
    assert read_pushed_state(TRACE, link) == {"attention_scale": "0", "residual": "replace"}
    assert read_pushed_state(TRACE, "?norm=layernorm") == {"norm": "layernorm"}
    with pytest.raises(ValueError, match="attention_scale='9' is not a value"):
        read_pushed_state(TRACE, "attention_scale=9")
    with pytest.raises(ValueError, match="no control of this explorable"):
        read_pushed_state(TRACE, "embed=1&theme=dark")
    state = TraceState()
    assert PushedView(state, TRACE).show({"explorable": TRACE, "state": {"attention_scale": "0", "x": "1"}})
    assert state.attention_scale == 0.0
    assert not PushedView(state, "block-floor").show({"explorable": TRACE, "state": {"attention_scale": "1"}})


def test_stopping_a_push_gives_each_student_their_own_settings_back():
    state = TraceState(attention_scale=0.5, mlp_scale=2.0)
    screen = PushedView(state, TRACE)
    assert not screen.give_back(), "nothing was shown"
    assert not screen.show({"explorable": "block-floor", "state": {"stage": "2"}})
    assert screen.show({"explorable": TRACE, "state": {"attention_scale": "0", "residual": "replace"}})
    assert (state.attention_scale, state.replace) == (0.0, True)
    assert screen.show({"explorable": TRACE, "state": {"attention_scale": "1", "mlp_scale": "0"}})  # a second push
    state.replace = False  # the student moves one control themselves meanwhile
    assert screen.give_back()
    assert (state.attention_scale, state.mlp_scale) == (0.5, 2.0), "the values from before the first push"
    assert state.replace is False, "a control the student moved since stays where they put it"
    assert not screen.showing and not screen.give_back()


def test_the_store_keeps_each_lessons_pace_per_epoch(tmp_path):
    store = EventStore(f"sqlite:///{tmp_path / 'c.db'}")
    store.upgrade()
    assert store.pace("p3", "l") is None
    assert store.set_pace("p3", "l", hold="predict") == 1
    assert store.set_pace("p3", "l", pushed={"explorable": TRACE, "state": {"attention_scale": "0"}}) == 2
    pace = store.pace("p3", "l")
    assert (pace.hold, pace.pushed["state"], pace.version) == ("predict", {"attention_scale": "0"}, 2)
    store.set_pace("p3", "l", hold=None)
    assert store.pace("p3", "l").hold is None and store.pace("p3", "l").pushed is not None
    with pytest.raises(ValueError):
        store.set_pace("p3", "l", hold="everything")
    store.archive("p3")
    assert store.pace("p3", "l") is None  # a new epoch starts free
    store.close()
