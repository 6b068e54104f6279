"""The decoder lab's shared caches save work per change and never change a number: what a session is shown for
its settings is what a process that never saw another setting computes for them."""

from __future__ import annotations

import numpy as np
import pytest

from blocktrace.explorables.components.shared_cache import SharedCache
from blocktrace.explorables.decoder_block_lab import diagram, payload, state
from blocktrace.explorables.decoder_block_lab.state import CORRECT_PREDICTION, LabState
from tests.unit.test_trained_floors import _kept, _trained

# One other value for every control the browser sets: each changes what the panels show.
OTHER = {"B": 2, "T": 6, "d": 16, "heads": 2, "expansion": 2, "norm": "layernorm", "mlp": "gelu", "placement": "post",
         "causal": False, "residual": "replace", "zero_eps": True, "wrong_split": True, "corrupt": 1,
         "corrupt_value": -3.5, "blocks": 5, "norm_text": "2, 2, 2, 2", "norm_eps": 0.1, "worked_name": "X1",
         "inspect": "attn.q"}


def clear_shared() -> None:
    for cache in (state.RUNS, state.CORRUPTIONS, state.DEPTHS, payload.RESULTS, diagram.VIEWS):
        cache.clear()


def lab(prediction: str | None = CORRECT_PREDICTION, **settings) -> LabState:
    s = LabState(**settings)
    if prediction is not None:
        assert s.prediction.commit(prediction) is None
    return s


def shown(s: LabState) -> tuple[str, np.ndarray, object]:
    """The results' text, their numbers and the diagram, as a session is sent them."""
    text, values = payload.results(s)
    return text, values, diagram.diagram_view(s)


def assert_same(got: tuple, expected: tuple) -> None:
    assert got[0] == expected[0]
    np.testing.assert_array_equal(got[1], expected[1])
    assert got[2] == expected[2]


@pytest.mark.parametrize("name", list(OTHER))
def test_a_setting_served_from_the_cache_is_what_a_fresh_process_computes(name: str) -> None:
    """Another session's results for other settings are never served: the caches' keys hold every control."""
    default = shown(lab())  # in the caches now
    s = lab()
    setattr(s, name, OTHER[name])
    got = shown(s)
    assert got[0] != default[0]
    fresh = lab()
    clear_shared()
    setattr(fresh, name, OTHER[name])
    assert_same(got, shown(fresh))


@pytest.mark.parametrize("prediction", [None, "slight"])
def test_the_gate_and_the_prediction_are_part_of_the_key(prediction: str | None) -> None:
    """A locked session gets no unlocked results, and a wrong prediction is told it is wrong."""
    right = shown(lab())
    got = shown(lab(prediction))
    assert got[0] != right[0]
    clear_shared()
    assert_same(got, shown(lab(prediction)))


def test_a_trained_floor_is_not_served_the_drawn_weights_results() -> None:
    """The same controls over a trained floor's weights are another setting."""
    key, _ = _kept(_trained({}), 0)
    drawn = shown(lab(d=16, heads=2))
    trained = lab(run=key)
    assert (trained.d, trained.heads) == (16, 2)
    got = shown(trained)
    assert got[0] != drawn[0]
    clear_shared()
    assert_same(got, shown(lab(run=key)))


def test_sessions_with_the_same_settings_share_one_computation_they_cannot_write() -> None:
    """The trace, its corrupted twin and the depth stacks are computed once per setting; every array read-only."""
    a, b = lab(T=5), lab(T=5)
    assert a.trace is b.trace and a.corrupted is b.corrupted and a.depth is b.depth and a.x is b.x
    for array in (a.x, a.delta, a.trace["blocks.0.resid_post"], a.corrupted.output,
                  a.depth[("pre", "add")]["grad_norm"]):
        with pytest.raises(ValueError):
            array[(0,) * array.ndim] = 1.0
    b.T = 6
    assert a.T == 5 and a.trace.output.shape[1] == 5 and b.trace.output.shape[1] == 6


def test_a_refused_size_keeps_the_shown_run() -> None:
    """Sizes over the budget go back to the last that fit: the run shown, its invariants included, stays."""
    s = lab(d=512)
    run, found = s.trace, s.invariants()
    s.param.update(B=4, T=8, expansion=8, mlp="gelu")
    assert s.trace is run and s.invariants() == found and s.budget_error


def test_a_weighed_cache_keeps_its_newest_entries_within_the_limit() -> None:
    """Weighed entries go oldest first until the rest fit; one entry heavier than the limit still stays."""
    cache: SharedCache[str] = SharedCache(10, limit=5, weigh=len)
    for text in ("aa", "bbb", "c"):
        cache.get(text, lambda text=text: text)
    assert cache.peek("aa") is None and cache.peek("bbb") == "bbb" and cache.weight == 4
    cache.get("x" * 9, lambda: "x" * 9)
    assert len(cache) == 1 and cache.weight == 9
    cache.clear()
    assert cache.weight == 0 and len(cache) == 0
    with pytest.raises(ValueError):
        SharedCache(10, limit=5)
