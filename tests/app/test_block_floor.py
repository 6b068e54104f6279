"""The block-floor explorable without a server: divergence, attention, verdicts, the bet, links and numbers."""

from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import pytest

from blocktrace.app.cli import main as cli
from blocktrace.explorables.block_floor import FloorExplorable, FloorState
from blocktrace.explorables.block_floor.divergence import verdict
from blocktrace.explorables.block_floor.view import phrase_html
from blocktrace.explorables.engine import run_preset

# The lesson's eight stages, written out here rather than taken from the code under test.
EIGHT = ["embed", "blocks.0.resid_pre", "blocks.0.ln1.normalized", "blocks.0.attn_out", "blocks.0.resid_mid",
         "blocks.0.ln2.normalized", "blocks.0.mlp_out", "blocks.0.resid_post"]


def first_split(words: list[str], index: int, positions: bool, causal: bool) -> int | None:
    """An independent answer: compare the word's rows in the two orders' traces, stage by stage."""
    forward = run_preset("eat-an-orange", tokens=words, positions=positions, causal=causal)
    backward = run_preset("eat-an-orange", tokens=words[::-1], positions=positions, causal=causal)
    for stage, key in enumerate(EIGHT, start=1):
        if np.max(np.abs(forward[key][index] - backward[key][len(words) - 1 - index])) > 1e-9:
            return stage
    return None


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("positions", [True, False])
@pytest.mark.parametrize("index", [0, 1, 2])
def test_first_divergence_matches_the_engine(index: int, positions: bool, causal: bool) -> None:
    """For every tracked word, positions on/off and mask on/off, the explorable's answer is the engine's."""
    state = FloorState(tracked=index, positions=positions, causal=causal)
    assert state.divergence() == first_split(["eat", "an", "orange"], index, positions, causal)


def test_the_lessons_answers() -> None:
    """Middle word with positions: attention (4); positions off, no mask: never; end words: + position vector (2)."""
    assert FloorState(tracked=1).divergence() == 4
    assert FloorState(tracked=1, positions=False).divergence() is None
    assert FloorState(tracked=0).divergence() == 2
    assert FloorState(tracked=2).divergence() == 2


@pytest.mark.parametrize("causal", [False, True])
def test_attention_rows_sum_to_one_and_the_mask_hides_the_future(causal: bool) -> None:
    """Each row of weights sums to 1 in both orders; with the mask on, every future weight is exactly 0."""
    state = FloorState(causal=causal, phrase="the cat sat on the mat")
    for _, trace, _ in state.traces():
        pattern = trace["blocks.0.attn.pattern"][0]
        assert np.allclose(pattern.sum(axis=1), 1.0)
        future = pattern[np.triu_indices(len(trace.tokens), k=1)]
        assert np.all(future == 0.0) if causal else np.all(future > 0.0)


def test_claims_are_judged_against_the_computed_stage() -> None:
    """Before the split is too early, after it too late, at it right on; "never" is right only when it is."""
    assert verdict(3, 4)[0] == "Too early"
    assert verdict(5, 4)[0] == "Too late"
    assert verdict(4, 4)[0] == "Right on"
    assert verdict(None, 4)[0] == "Too late"
    assert verdict(None, None)[0] == "Right on"
    assert verdict(2, None)[0] == "Too early"
    state = FloorState(tracked=1)
    assert state.claim(3)[0] == "Too early"
    assert state.claim(4)[0] == "Right on"
    assert "neighbours" in state.claim(4)[1]


def test_the_bet_is_final() -> None:
    """A committed bet cannot be changed, and the controls unlock only once it is committed."""
    view = FloorExplorable()
    assert all(w.disabled for w in view.controls)
    assert view.state.bet.commit("kept-added") is None
    assert not any(w.disabled for w in view.controls)
    assert view.state.bet.commit("replaced") is not None
    assert view.state.bet.choice == "kept-added"


def test_stage_eight_settles_the_bet_with_the_numbers() -> None:
    """At stage 8 the page states output = incoming stream + MLP correction, with this word's numbers."""
    view = FloorExplorable(predict=False)
    view.state.stage = 8
    trace, i = view.state.original, view.state.tracked
    expected = trace["blocks.0.resid_mid"][i] + trace["blocks.0.mlp_out"][i]
    assert np.allclose(expected, trace["blocks.0.resid_post"][i])
    assert f"{trace['blocks.0.resid_post'][i][1]:.3f}" in view.settle.object


@pytest.mark.parametrize(("positions", "causal", "floors"), [(True, False, 1), (False, True, 3)])
def test_numbers_equal_the_command_line(positions: bool, causal: bool, floors: int) -> None:
    """The explorable's trace is `blocktrace trace --preset eat-an-orange` with the same settings."""
    state = FloorState(positions=positions, causal=causal, floors=floors)
    args = ["trace", "--preset", "eat-an-orange", "--json", "--positions", "on" if positions else "off",
            "--causal", "on" if causal else "off", "--layers", str(floors)]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli(args) == 0
    stages = {s["key"]: np.array(s["values"], dtype=float) for s in json.loads(out.getvalue())["stages"]}
    for stage in state.original:
        if stage.local_key != "attn.scores":
            assert np.allclose(stage.values, stages[stage.key]), stage.key


def test_a_typed_phrase_is_text_and_a_bad_one_keeps_the_last_good() -> None:
    """HTML in a phrase is escaped where it is shown; an empty or over-long phrase is refused, the last kept."""
    view = FloorExplorable(predict=False)
    view.state.phrase = "<img src=x onerror=alert(1)> eats"
    assert "<img" not in phrase_html(view.state.original, 0)
    assert "&lt;img" in phrase_html(view.state.original, 0)
    good = list(view.state.words)
    view.state.phrase = "   "
    assert view.state.phrase_error and view.state.words == good
    view.state.phrase = " ".join(["w"] * 9)
    assert "at most 8" in view.state.phrase_error and view.state.words == good
    assert "Could not use this phrase" in view.phrase_error.object


def test_links_restore_state_and_refuse_bad_values() -> None:
    """Every URL key restores its control; values the explorable cannot use fall back with a notice."""
    view = FloorExplorable(query={"tokens": "a b c d", "positions": "off", "tracked": "2", "reverse": "off",
                                  "causal": "on", "stage": "5", "floors": "3"})
    s = view.state
    assert (s.words, s.positions, s.tracked, s.reverse, s.causal, s.stage, s.floors) == (
        ["a", "b", "c", "d"], False, 1, False, True, 5, 3)
    assert view.notices == []
    bad = FloorExplorable(query={"stage": "9", "floors": "zero", "positions": "maybe"})
    assert (bad.state.stage, bad.state.floors, bad.state.positions) == (1, 1, True)
    assert len(bad.notices) == 3
