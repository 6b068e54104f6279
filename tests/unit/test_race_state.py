"""The train-the-block state: the race a set-up describes, its address, slices recorded, and the verdict."""

from __future__ import annotations

import re

import pytest

from blocktrace.explorables.components.url_state import apply_query
from blocktrace.explorables.engine.training import StepRecord
from blocktrace.explorables.train_the_block.runner import Slice
from blocktrace.explorables.train_the_block.state import (
    BUDGET,
    DIFFERENCES,
    PREDICTION_CHOICES,
    QUERY_KEYS,
    TARGET,
    TOGETHER_STEPS,
    RaceState,
    outcome,
    outcome_sentence,
    verdict_sentence,
)


def _fields(config) -> dict:
    return config.as_dict()


@pytest.mark.parametrize("difference", list(DIFFERENCES))
def test_the_two_models_differ_in_exactly_the_chosen_choice(difference: str) -> None:
    """A's and B's set-ups differ only in the fields the difference names: everything else is shared."""
    spec = RaceState(difference=difference).spec
    a, b = _fields(spec.config_a), _fields(spec.config_b)
    changed = {k for k in a if a[k] != b[k]} | {k for k in spec.settings_a.__dict__
                                                  if spec.settings_a.__dict__[k] != spec.settings_b.__dict__[k]}
    expected = {"placement": {"placement"}, "residual": {"residual"}, "norm": {"norm"},
                "depth": {"n_layers"}, "lr": {"lr"}, "warmup": {"warmup"}}[difference]
    assert changed == expected


def test_the_set_up_reaches_both_models() -> None:
    """Task, floors, rate and seed go to both models; a depth race sets A to 2 floors and B to the floors chosen;
    a rate race gives B ten times A's rate."""
    state = RaceState(task="induction", floors=24, lr=0.003, seed=7, difference="depth")
    spec = state.spec
    assert spec.task.id == "induction" and spec.data_seed == 7
    assert (spec.config_a.n_layers, spec.config_b.n_layers) == (2, 24)
    assert spec.config_a.seed == spec.config_b.seed == 7
    state.difference = "lr"
    assert (state.spec.settings_a.lr, state.spec.settings_b.lr) == (0.003, pytest.approx(0.03))


def test_a_link_sets_the_race_and_bad_values_are_refused() -> None:
    """The address's keys set the race; a value out of range keeps the default and says so."""
    state = RaceState()
    notices = apply_query(state, QUERY_KEYS, {"task": "sort", "vs": "residual", "floors": "24", "lr": "0.003",
                                              "warmup": "200", "seed": "12"})
    assert notices == [] and (state.task, state.difference, state.floors, state.lr, state.warmup, state.seed) == (
        "sort", "residual", 24, 0.003, 200, 12)
    bad = RaceState()
    notices = apply_query(bad, QUERY_KEYS, {"task": "<b>x</b>", "floors": "5", "lr": "0.002", "seed": "-1", "vs": "1",
                                            "warmup": "150"})
    assert len(notices) == 6 and (bad.task, bad.floors, bad.lr, bad.seed, bad.difference, bad.warmup) == (
        "copy", 12, 0.01, 0, "placement", 0)


def test_the_shared_warm_up_reaches_both_models_unless_warm_up_is_the_difference() -> None:
    state = RaceState(warmup=200)
    assert (state.spec.settings_a.warmup, state.spec.settings_b.warmup) == (200, 200)
    state.difference = "warmup"
    assert (state.spec.settings_a.warmup, state.spec.settings_b.warmup) == (0, 100)


def _records(start: int, n: int) -> tuple[StepRecord, ...]:
    return tuple(StepRecord(i, 1.0, 1.0, 0.01, (1.0,)) for i in range(start, start + n))


def _slice(start: int, n: int, acc_a: float, acc_b: float, running: bool = True) -> Slice:
    at = start + n
    return Slice(_records(start, n), _records(start, n), ((at, 0.5, acc_a),), ((at, 0.5, acc_b),), running, running)


def test_slices_of_an_older_set_up_are_ignored() -> None:
    """A slice that arrives after the set-up changed is dropped: the new race starts from step 0."""
    state = RaceState()
    generation = state.generation
    assert state.record(generation, _slice(0, 25, 0.1, 0.1))
    state.floors = 6
    assert not state.record(generation, _slice(25, 25, 0.2, 0.2))
    assert state.a.steps == [] and state.generation == generation + 1


def test_the_verdict_comes_as_soon_as_it_is_decided() -> None:
    """A reaches the target first; the verdict waits until B has had TOGETHER_STEPS more steps to catch up."""
    state = RaceState()
    g = state.generation
    state.record(g, _slice(0, 100, TARGET, 0.5))
    assert state.a.reached == 100 and state.result() is None
    state.record(g, _slice(100, TOGETHER_STEPS, 0.95, 0.6))
    assert state.result() is None  # B is exactly TOGETHER_STEPS behind: it may still tie
    state.record(g, _slice(100 + TOGETHER_STEPS, 25, 0.95, 0.6))
    assert state.result() == "a-first"


def test_a_race_that_runs_out_of_steps_is_decided() -> None:
    """When neither side has reached the target by the budget, the verdict is 'neither'."""
    state = RaceState()
    for start in range(0, BUDGET, 100):
        state.record(state.generation, _slice(start, 100, 0.3, 0.4))
    assert state.finished and state.result() == "neither"


@pytest.mark.parametrize(("a", "b", "verdict"), [
    (None, None, "neither"), (100, None, "a-first"), (None, 100, "b-first"), (100, 100 + TOGETHER_STEPS, "together"),
    (100, 101 + TOGETHER_STEPS, "a-first"), (101 + TOGETHER_STEPS, 100, "b-first"),
])
def test_outcome(a, b, verdict: str) -> None:
    """Which prediction a pair of reaching steps bears out."""
    assert outcome(a, b) == verdict


def test_the_set_up_a_prediction_was_made_for_is_held_until_its_race_is_decided() -> None:
    """After the commit a changed set-up (a crafted message as much as a click) is set back and the race keeps
    its steps; once the race is decided the set-up is free again, and changing it starts a new race."""
    state = RaceState(task="sort")
    assert not state.setup_held
    state.prediction.commit("a-first")
    assert state.setup_held and state.predicted_setup["task"] == "sort"
    g = state.generation
    state.record(g, _slice(0, 100, TARGET, 0.5))
    state.param.update(task="copy", floors=2)
    assert (state.task, state.floors, state.generation, len(state.a.steps)) == ("sort", 12, g, 100)
    state.record(g, _slice(100, TOGETHER_STEPS + 25, 0.95, 0.6))
    assert state.decided == "a-first" and not state.setup_held
    state.task = "copy"
    assert state.task == "copy" and state.generation == g + 1 and state.a.steps == []
    assert state.decided == "a-first"  # the verdict of the predicted race stays


def test_each_side_is_named_with_its_numbers() -> None:
    """A and B are named as the race has them: the depths and rates chosen, not placeholders."""
    assert RaceState(difference="depth", floors=24).side_names() == ("2 floors", "24 floors")
    assert RaceState(difference="lr", lr=0.003).side_names() == ("rate 0.003", "rate 0.03")
    assert RaceState(difference="placement").side_names() == ("pre-norm", "post-norm")


# Every way a race can be decided: (reached A, reached B), (A stopped, B stopped)
DECIDED = {
    "neither": [((None, None), (True, True))],
    "together": [((275, 300), (False, False)), ((300, 275), (True, True))],
    "a-first": [((275, 400), (False, False)), ((275, None), (False, False)), ((275, None), (False, True))],
    "b-first": [((400, 275), (False, False)), ((None, 275), (False, False)), ((None, 275), (True, False))],
}
DANGLING = {"a", "an", "the", "and", "or", "but", "of", "to", "at", "by", "in", "with", "within", "from", "as"}


@pytest.mark.parametrize("result", list(DECIDED))
@pytest.mark.parametrize("predicted", list(PREDICTION_CHOICES))
def test_every_verdict_reads_as_whole_sentences(predicted: str, result: str) -> None:
    """For every prediction against every way a race is decided, and every pair of side names, what happened and
    the verdict are whole sentences: no doubled punctuation ("first. (not ..."), no clause ending on a dangling
    word, no placeholder, and percentages written "90 %", as the rest of the page writes them."""
    for reached, stopped in DECIDED[result]:
        assert outcome(*reached) == result
        for difference in DIFFERENCES:
            names = RaceState(difference=difference).side_names()
            happened = outcome_sentence(result, names, reached, stopped)
            verdict = verdict_sentence(predicted, result)
            text = f"Decided: {happened} {verdict}"
            assert not re.search(r"[.,;:!?]\s*[.,;:!?()]", text), text
            assert happened.endswith(".") and verdict.endswith(".") and happened[0].isupper()
            assert not any(word in text for word in ("None", "{", "}", "  ")), text
            assert not re.search(r"\d%", text) and "90 %" in happened, text
            clause_ends = re.findall(r"(\w+)\s*[.;:,](?:\s|$)", text)
            assert not DANGLING & {word.lower() for word in clause_ends}, text
            assert all(f"{side} ({name})" in happened for side, name in zip("AB", names, strict=True)) or (
                result == "neither"), text
            assert verdict.startswith("Your prediction was right." if predicted == result
                                      else "Your prediction was not what happened.")
            assert verdict.endswith(PREDICTION_CHOICES[predicted])
