"""The block trace names a prediction right or wrong only after the experiments it is about have been seen."""

from __future__ import annotations

import json

from blocktrace.explorables.transformer_block_trace.state import CORRECT_PREDICTION
from blocktrace.explorables.transformer_block_trace.view import TraceExplorable

RIGHT = "your prediction matches what you saw"
WRONG = "what you saw differs"


def live(explorable: TraceExplorable) -> str:
    """The line under the announcement, as the payload gives it to the browser."""
    return json.loads(explorable.drawing.meta)["verdict"][0]


def test_no_verdict_on_commit_only_once_both_experiments_were_seen() -> None:
    explorable = TraceExplorable(query={}, predict=True)
    state = explorable.state
    assert explorable.state.prediction.commit(CORRECT_PREDICTION) is None
    assert "Now test it" in live(explorable) and RIGHT not in live(explorable)
    state.zero_updates()  # adding, updates zero: one of the two runs
    assert state.tried == ["zero-add"] and RIGHT not in live(explorable)
    state.replace = True  # replacing, updates still zero: the other
    assert RIGHT in live(explorable) and "Now test it" not in live(explorable)


def test_settings_made_before_the_commit_do_not_count_as_the_experiment() -> None:
    explorable = TraceExplorable(query={"attention_scale": "0", "residual": "replace"}, predict=True)
    state = explorable.state
    state.mlp_scale = 0.0  # locked: set back at once
    assert state.tried == []
    assert state.prediction.commit("zero-both") is None
    state.zero_updates()  # the link's replace mode, now with both updates zero: seen after the commit
    assert state.tried == ["zero-replace"] and WRONG not in live(explorable)
    state.replace = False
    assert WRONG in live(explorable)


def test_the_run_that_counts_as_an_experiment_still_updates_the_trace() -> None:
    """Noting the experiment happens in the same update as the trace (a parameter set inside the control
    change's watchers left the table on the trace before the change)."""
    from blocktrace.explorables.transformer_block_trace.state import CONSTANT_INPUT

    explorable = TraceExplorable(query={}, predict=True)
    state = explorable.state
    assert state.prediction.commit(CORRECT_PREDICTION) is None
    state.input_text = CONSTANT_INPUT
    explorable.drawing.sent = json.dumps({"name": "action", "value": "zero", "n": 1})  # the browser's button
    assert state.tried == ["zero-add"]
    assert state.trace["blocks.0.resid_post"][0].tolist() == state.vector
    shown = json.loads(explorable.drawing.meta)
    at = shown["offsets"]["blocks.0.resid_post"]
    assert explorable.drawing.values[at:at + 4].tolist() == [2.0] * 4
