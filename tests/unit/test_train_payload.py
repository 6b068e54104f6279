"""The race's payload (train_the_block/payload.py): the numbers it sends are the runner's records and looks, at the
offsets it names, and nothing of a race leaves the server before the commit."""

from __future__ import annotations

import json

import numpy as np
import pytest

from blocktrace.explorables.components.numbers import NO_RMS, stage_rms
from blocktrace.explorables.components.palette import chart_colours, luminance
from blocktrace.explorables.train_the_block import inside, plots, runner
from blocktrace.explorables.train_the_block.payload import PageFacts, look_note, payload, sides_sentence
from blocktrace.explorables.train_the_block.runner import EVALUATE_EVERY, LookAt
from blocktrace.explorables.train_the_block.state import SETUP_PARAMS, RaceState

RACE_ID = 10_001  # a race of this process's own table (runner._RACES), as a worker holds it


@pytest.fixture
def raced():
    """A race of two 2-floor models (add against replace) run 2 × 25 steps by the runner's own worker functions,
    in this process, recorded in its state, with the look after the last slice."""
    state = RaceState(task="copy", difference="residual", floors=2)
    runner._start(RACE_ID, state.spec)
    parts = [runner._advance(RACE_ID, EVALUATE_EVERY, 60.0, LookAt(3, 1, True)) for _ in range(2)]
    yield state, parts
    runner._drop(RACE_ID)


def _controls(state: RaceState) -> dict:
    return {name: getattr(state, name) for name in SETUP_PARAMS}


def _strict(text: str) -> dict:
    """meta as a browser's JSON.parse reads it: NaN or Infinity would not parse."""
    def refuse(name):
        raise ValueError(f"{name} in meta")
    return json.loads(text, parse_constant=refuse)


def _record(state: RaceState, parts) -> None:
    for part in parts:
        assert state.record(state.generation, part)


def test_nothing_of_a_race_is_sent_before_the_commit(raced) -> None:
    """Whatever the state holds, an uncommitted prediction gets the set-up, the question's status and no number,
    curve, look, verdict or step of the race."""
    state, parts = raced
    _record(state, parts)
    facts = PageFacts(look=parts[-1].look, floors=2, heads=2, choices={"head": 1, "table": "b"})
    text, values = payload(state, facts, _controls(state))
    m = _strict(text)
    assert values.size == 0 and m["curves"] is None and m["look"] is None
    assert m["status"] == {"text": "Commit your prediction to start the race.", "alert": False, "verdict": None}
    assert {"play", "step", "reset", "keep"} <= set(m["disabled"]) and not m["keep"]
    loss = f"{state.a.steps[-1].loss:.3f}"
    assert "Decided" not in text and "right at step" not in text and loss not in text


def test_the_curves_are_the_runners_records(raced) -> None:
    """Each model's loss at every step, its held-out readings (step, % right) and the gradient reaching each floor
    at its latest step sit at the offsets the payload names, as the runner recorded them."""
    state, parts = raced
    state.prediction.commit("a-first")
    _record(state, parts)
    text, values = payload(state, PageFacts(floors=2, heads=2), _controls(state))
    curves = _strict(text)["curves"]
    for side, recorded in zip(curves["sides"], (state.a, state.b), strict=True):
        assert side["n"] == len(recorded.steps) == 2 * EVALUATE_EVERY
        assert [r.step for r in recorded.steps] == list(range(side["n"]))  # step k + 1 at index k
        np.testing.assert_array_equal(values[side["loss"]:side["loss"] + side["n"]], [r.loss for r in recorded.steps])
        held = values[side["held"]:side["held"] + 2 * side["n_held"]].reshape(-1, 2)
        np.testing.assert_array_equal(held, [[step, 100 * acc] for step, _, acc in recorded.held_out])
    depth = plots.depth_data(state)
    n = curves["n_depth"]
    assert n == 3
    np.testing.assert_array_equal(values[curves["depth"]:curves["depth"] + 2 * n], [*depth["a"], *depth["b"]])
    assert curves["depth"] + 2 * n == values.size  # nothing else is sent


def test_the_look_is_the_runners_look(raced) -> None:
    """Both maps hold the chosen head's weights on the chosen floor, and the stage table the chosen model's RMS and
    first components at the example's last scored position, as the runner's look has them; the answers count what
    each model got right."""
    state, parts = raced
    state.prediction.commit("a-first")
    _record(state, parts)
    look = parts[-1].look
    facts = PageFacts(look=look, floors=2, heads=2, choices={"head": 1, "table": "b", "example": 3, "floor": 1},
                      picked="resid_mid")
    text, values = payload(state, facts, _controls(state))
    m = _strict(text)["look"]
    n = len(look.tokens)
    for shown, side in zip(m["maps"], (look.a, look.b), strict=True):
        np.testing.assert_array_equal(values[shown["at"]:shown["at"] + n * n].reshape(n, n), side.pattern[1])
        assert shown["title"].endswith(f"floor 2, head 2, step {2 * EVALUATE_EVERY}")
    position = int(np.flatnonzero(look.scored)[-1])
    rows = m["table"]["rows"]
    assert [r[1] for r in rows] == [stage.local_key for stage in look.b.stages]
    assert [r[1] for r in rows if r[6]] == ["resid_mid"]
    for row, stage in zip(rows, look.b.stages, strict=True):
        v = inside.stage_row(stage.values, position)
        shown_rms = stage_rms(v)
        assert row[7] == (shown_rms == NO_RMS)
        if shown_rms != NO_RMS:
            assert values[row[3]] == shown_rms
        k = row[4]
        np.testing.assert_array_equal(values[row[3] + 1:row[3] + 1 + k], v[:k])
    scored = np.flatnonzero(look.scored)
    right = int(np.sum(look.a.answers[scored] == look.targets[scored]))
    assert m["answers"][2][0] == f"A: add, {right} of {scored.size} right at step {2 * EVALUATE_EVERY}"
    assert m["span"] == [0, m["table"]["rows"][-1][3] + 1 + inside.N_SHOWN]  # the look's numbers come first
    assert m["note"] == look_note(False)
    dark = _strict(payload(state, PageFacts(look=look, floors=2, heads=2, dark=True), _controls(state))[0])["look"]
    assert dark["note"] == look_note(True)


@pytest.mark.parametrize(("dark", "more"), [(False, "darker"), (True, "brighter")])
def test_the_look_note_says_how_the_themes_maps_show_more_weight(dark: bool, more: str) -> None:
    """On white more weight is a darker blue; on the dark theme a brighter one (palette.SEQUENTIAL_DARK): the note
    says so in each theme, as its palette runs."""
    blues = chart_colours(dark).sequential
    assert (luminance(blues[-1]) < luminance(blues[0])) == (more == "darker")
    note = look_note(dark)
    assert f"a {more} cell is more weight" in note
    assert ("darker" in note) == (not dark) and ("brighter" in note) == dark


@pytest.mark.parametrize(("difference", "floors", "sentence"), [
    ("depth", 2, "Both are 2 floors and everything else is the same: the two models are identical. Choose more "
                 "floors to make B deeper."),
    ("depth", 24, "A is 2 floors; B is 24 floors. Everything else is the same."),
    ("placement", 2, "A is pre-norm; B is post-norm. Everything else is the same."),
])
def test_the_sides_are_named_once_when_they_are_the_same(difference: str, floors: int, sentence: str) -> None:
    """Racing depth with 2 floors in each model reads "Both are 2 floors", not "A is 2 floors; B is 2 floors", and
    says how to make B deeper; sides that differ are each named, in the payload too."""
    state = RaceState(task="copy", difference=difference, floors=floors)
    assert sides_sentence(state) == sentence
    assert _strict(payload(state, PageFacts(), _controls(state))[0])["sides"] == sentence


def test_the_verdict_follows_the_race_not_the_page() -> None:
    """A decided race says what happened and the prediction against it; Keep training shows only while it stands
    stopped at its verdict; a message takes the status's place."""
    state = RaceState(task="copy", difference="residual", floors=2)
    state.prediction.commit("b-first")
    state.a.held_out.append((100, 0.5, 0.95))
    state.b.held_out.append((100, 0.5, 0.95))
    m = _strict(payload(state, PageFacts(), _controls(state))[0])
    assert m["status"]["text"].startswith("Decided: Both reached 90 %") and m["status"]["verdict"][1] == "bad"
    assert m["keep"] and m["play"] == "Play"
    playing = _strict(payload(state, PageFacts(playing=True), _controls(state))[0])
    assert not playing["keep"] and playing["play"] == "Pause" and "Playing." in playing["status"]["text"]
    alert = _strict(payload(state, PageFacts(alert="The race's worker stopped."), _controls(state))[0])
    assert alert["status"] == {"text": "The race's worker stopped.", "alert": True, "verdict": None}
