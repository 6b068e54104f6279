"""The optimisers against PyTorch (the committed tests/fixtures/optim_reference.json, built by
tests/fixtures/make_optim_reference.py from torch alone), and the identities the rules promise.

Only test_fixtures_match_live_torch needs torch: it checks the fixtures are still what the script builds.
"""

from __future__ import annotations

import copy
import json
import math
import re
from typing import Any

import numpy as np
import pytest

from blocktrace.explorables.engine.config import ConfigError
from blocktrace.explorables.engine.optim import SGD, Adam, clip_by_global_norm, warmup_lr
from blocktrace.explorables.engine.params import Params
from tests.unit.torch_fixtures import FIXTURES, assert_same_tree, load_builder, tolerances

REFERENCE = json.loads((FIXTURES / "optim_reference.json").read_text(encoding="utf-8"))
OPTIMIZER_CASES = REFERENCE["optimizer_cases"]
CLIP_CASES = REFERENCE["clip_cases"]
WARMUP_CASES = REFERENCE["warmup_cases"]
# float64, the same operations in the order of torch's single-tensor loops; torch's CPU kernels fuse some
# multiply-adds (add_ with alpha, lerp_), so the last bit may differ: at most 4.4e-16 after five steps
# (2e-14 relative, on entries near 0), far inside these.
TOL = {"rtol": 1e-12, "atol": 1e-14}


def _arrays(tree: dict[str, Any]) -> Params:
    return {name: np.asarray(values, dtype=float) for name, values in tree.items()}


def _read_only(params: Params) -> Params:
    """Copies that refuse writes, like the shared parameter caches of params.seeded_normal."""
    out = {}
    for name, value in params.items():
        out[name] = np.array(value, dtype=float)
        out[name].flags.writeable = False
    return out


def _optimizer(case: dict[str, Any]) -> Adam | SGD:
    settings = case["settings"]
    if case["optimizer"] == "adam":
        return Adam(betas=tuple(settings["betas"]), eps=settings["eps"], weight_decay=settings["weight_decay"])
    return SGD(momentum=settings["momentum"], weight_decay=settings["weight_decay"])


def _assert_params_close(ours: Params, theirs: dict[str, Any], where: str) -> None:
    assert sorted(ours) == sorted(theirs), where
    for name, values in theirs.items():
        np.testing.assert_allclose(ours[name], np.asarray(values, dtype=float), **TOL, err_msg=f"{where}: {name}")


@pytest.mark.parametrize("case", OPTIMIZER_CASES, ids=[case["name"] for case in OPTIMIZER_CASES])
def test_every_step_matches_torch(case: dict[str, Any]) -> None:
    """Warm-up lr, clipping and the optimiser step give torch's parameters after each of five steps."""
    opt = _optimizer(case)
    params = _read_only(_arrays(case["params"]))
    max_norm = case["max_norm"]
    for k, (step_grads, expected) in enumerate(zip(case["grads"], case["after"], strict=True)):
        lr = warmup_lr(case["base_lr"], k, case["warmup_steps"])
        assert lr == pytest.approx(case["lrs"][k], rel=1e-15), f"lr of step {k}"
        grads = _arrays(step_grads)
        if max_norm is not None:
            grads, total = clip_by_global_norm(grads, max_norm)
            assert total == pytest.approx(case["total_norms"][k], rel=1e-12), f"total norm of step {k}"
        params = opt.step(params, grads, lr)
        _assert_params_close(params, expected, f"{case['name']} after step {k}")


@pytest.mark.parametrize("case", OPTIMIZER_CASES, ids=[case["name"] for case in OPTIMIZER_CASES])
def test_final_state_matches_torch(case: dict[str, Any]) -> None:
    """After five steps the per-parameter state (Adam's m, v and step count; SGD's momentum buffer) is torch's."""
    opt = _optimizer(case)
    params = _arrays(case["params"])
    for k, step_grads in enumerate(case["grads"]):
        grads = _arrays(step_grads)
        if case["max_norm"] is not None:
            grads, _ = clip_by_global_norm(grads, case["max_norm"])
        params = opt.step(params, grads, warmup_lr(case["base_lr"], k, case["warmup_steps"]))
    state = opt.state_dict()
    assert sorted(state) == sorted(case["state"])
    for name, theirs in case["state"].items():
        assert sorted(state[name]) == sorted(theirs), name
        for key, values in theirs.items():
            np.testing.assert_allclose(state[name][key], values, **TOL, err_msg=f"{name}.{key}")


@pytest.mark.parametrize("case", CLIP_CASES, ids=[case["name"] for case in CLIP_CASES])
def test_clipping_matches_torch(case: dict[str, Any]) -> None:
    """clip_by_global_norm returns clip_grad_norm_'s total norm and leaves torch's gradients."""
    clipped, total = clip_by_global_norm(_arrays(case["grads"]), float(case["max_norm"]))
    assert total == pytest.approx(case["total_norm"], rel=1e-12, abs=0.0)
    _assert_params_close(clipped, case["clipped"], case["name"])


@pytest.mark.parametrize("case", WARMUP_CASES, ids=[case["name"] for case in WARMUP_CASES])
def test_warmup_matches_lambda_lr(case: dict[str, Any]) -> None:
    """warmup_lr(base, k, n) is, to the bit, the lr LambdaLR hands the optimiser at step k."""
    ours = [warmup_lr(case["base_lr"], k, case["warmup_steps"]) for k in range(len(case["lrs"]))]
    assert ours == case["lrs"]


def test_fixtures_cover_what_they_claim() -> None:
    """The fixtures keep clipping on some steps and not others, missing gradients, weight decay and momentum."""
    clipping = [c for c in OPTIMIZER_CASES if c["max_norm"] is not None]
    assert {c["optimizer"] for c in clipping} == {"adam", "sgd"}
    for case in clipping:
        clipped_steps = [total > case["max_norm"] for total in case["total_norms"]]
        assert any(clipped_steps) and not all(clipped_steps), case["name"]
    for optimizer in ("adam", "sgd"):
        cases = [c for c in OPTIMIZER_CASES if c["optimizer"] == optimizer]
        assert any(any(set(g) != set(c["params"]) for g in c["grads"]) for c in cases), optimizer
        assert {c["settings"]["weight_decay"] > 0 for c in cases} == {True, False}, optimizer
    assert {c["settings"]["momentum"] for c in OPTIMIZER_CASES if c["optimizer"] == "sgd"} == {0.0, 0.9}
    assert {c["total_norm"] > float(c["max_norm"]) for c in CLIP_CASES} == {True, False}
    assert any(c["warmup_steps"] > 1 for c in OPTIMIZER_CASES)


def test_fixtures_match_live_torch() -> None:
    """The committed fixtures are still what make_optim_reference.py builds with the installed PyTorch."""
    torch = pytest.importorskip("torch")
    live = load_builder("make_optim_reference").build_reference()
    rtol, atol = tolerances(torch.__version__, REFERENCE["torch_version"])
    assert live["schema"] == REFERENCE["schema"]
    for key in ("optimizer_cases", "clip_cases", "warmup_cases"):
        assert [c["name"] for c in live[key]] == [c["name"] for c in REFERENCE[key]], key
        for live_case, stored_case in zip(live[key], REFERENCE[key], strict=True):
            assert_same_tree(live_case, stored_case, stored_case["name"], rtol, atol)


# --- identities -------------------------------------------------------------------------------

def _model(seed: int = 0) -> tuple[Params, Params]:
    rng = np.random.default_rng(seed)
    params = {"W": rng.standard_normal((3, 4)), "g": rng.standard_normal(4)}
    grads = {"W": rng.standard_normal((3, 4)), "g": rng.standard_normal(4)}
    return params, grads


@pytest.mark.parametrize("make", [
    lambda: Adam(), lambda: Adam(weight_decay=0.1), lambda: SGD(), lambda: SGD(momentum=0.9, weight_decay=0.1),
], ids=["adam", "adam-wd", "sgd", "sgd-momentum-wd"])
def test_steps_never_write_into_their_inputs(make) -> None:
    """Read-only parameters and gradients step without error and keep their values over several steps."""
    params, grads = _model()
    params, grads = _read_only(params), _read_only(grads)
    before = ({k: v.copy() for k, v in params.items()}, {k: v.copy() for k, v in grads.items()})
    opt = make()
    new = params
    for _ in range(3):
        new = opt.step(new, grads, 0.1)
        assert all(new[name] is not params[name] and not np.shares_memory(new[name], grads[name]) for name in new)
    assert all(np.array_equal(params[k], before[0][k]) and np.array_equal(grads[k], before[1][k]) for k in params)
    assert not np.allclose(new["W"], params["W"])


def test_later_steps_write_into_neither_earlier_results_nor_saved_state() -> None:
    """A step's result and a state_dict taken after it stay as they were after the next step."""
    params, grads = _model()
    for opt in (Adam(), SGD(momentum=0.9)):
        first = opt.step(params, grads, 0.1)
        saved = opt.state_dict()
        kept, kept_state = copy.deepcopy(first), copy.deepcopy(saved)
        opt.step(first, grads, 0.1)
        assert all(np.array_equal(first[k], kept[k]) for k in first)
        for name, slot in saved.items():
            assert all(np.array_equal(value, kept_state[name][key]) for key, value in slot.items()), name


def test_clipping_never_writes_into_its_input() -> None:
    """clip_by_global_norm on read-only gradients returns new arrays and leaves the input as it was."""
    _, grads = _model()
    grads = _read_only(grads)
    before = {k: v.copy() for k, v in grads.items()}
    for max_norm in (0.1, 100.0, None):
        clipped, _ = clip_by_global_norm(grads, max_norm)
        assert all(not np.shares_memory(clipped[k], grads[k]) for k in grads)
    assert all(np.array_equal(grads[k], before[k]) for k in grads)


@pytest.mark.parametrize("opt", [SGD(), SGD(momentum=0.9)], ids=["plain", "momentum"])
def test_zero_gradient_leaves_sgd_parameters_unchanged(opt: SGD) -> None:
    """With no weight decay, a zero gradient moves no SGD parameter, however large the lr."""
    params, grads = _model()
    zeros = {k: np.zeros_like(v) for k, v in grads.items()}
    new = opt.step(params, zeros, 10.0)
    assert all(np.array_equal(new[k], params[k]) for k in params)


def test_sgd_without_momentum_is_the_gradient_step() -> None:
    """Plain SGD is θ − lr · g exactly, and weight decay adds wd · θ to g."""
    params, grads = _model()
    new = SGD().step(params, grads, 0.3)
    assert all(np.array_equal(new[k], params[k] - 0.3 * grads[k]) for k in params)
    decayed = SGD(weight_decay=0.5).step(params, grads, 0.3)
    assert all(np.allclose(decayed[k], params[k] - 0.3 * (grads[k] + 0.5 * params[k]), rtol=1e-15) for k in params)


def test_adam_first_step_moves_each_entry_by_lr_in_the_gradient_sign() -> None:
    """Bias correction makes Adam's first step lr · g / (|g| + ε): about lr against the gradient's sign."""
    params, grads = _model()
    grads["W"][0, 0] = 0.0
    lr = 0.01
    new = Adam().step(params, grads, lr)
    for name in params:
        moved = new[name] - params[name]
        np.testing.assert_allclose(moved, -lr * np.sign(grads[name]), rtol=1e-6, atol=0.0, err_msg=name)
    assert new["W"][0, 0] == params["W"][0, 0]


def test_adam_step_size_does_not_depend_on_the_gradient_scale() -> None:
    """Scaling every gradient by 1000 leaves Adam's steps (well above ε) as they were."""
    params, grads = _model()
    small, large = Adam(), Adam()
    a, b = params, params
    for _ in range(3):
        a = small.step(a, grads, 0.01)
        b = large.step(b, {k: 1000.0 * v for k, v in grads.items()}, 0.01)
    assert all(np.allclose(a[k], b[k], rtol=1e-6) for k in params)


def test_parameters_without_a_gradient_pass_through_and_keep_their_count() -> None:
    """A parameter missing from grads is returned unchanged and its Adam step count does not advance."""
    params, grads = _model()
    opt = Adam()
    new = opt.step(params, {"W": grads["W"]}, 0.1)
    assert new["g"] is params["g"]
    assert set(opt.state_dict()) == {"W"}
    new = opt.step(new, grads, 0.1)
    assert opt.state_dict()["W"]["step"] == 2 and opt.state_dict()["g"]["step"] == 1


def test_clipping_keeps_the_direction_and_sets_the_norm_to_max_norm() -> None:
    """Clipped gradients point the same way and their global norm is max_norm (less the 1e-6 of the rule)."""
    _, grads = _model()
    total = math.sqrt(sum(float(np.sum(g**2)) for g in grads.values()))
    clipped, reported = clip_by_global_norm(grads, 0.5)
    assert reported == pytest.approx(total, rel=1e-14)
    flat, flat_clipped = (np.concatenate([d[k].ravel() for k in sorted(d)]) for d in (grads, clipped))
    assert np.linalg.norm(flat_clipped) == pytest.approx(0.5, rel=1e-6)
    np.testing.assert_allclose(flat_clipped / np.linalg.norm(flat_clipped), flat / total, rtol=1e-12)
    unclipped, _ = clip_by_global_norm(grads, 2 * total)
    assert all(np.array_equal(unclipped[k], grads[k]) for k in grads)
    assert clip_by_global_norm({}, 1.0) == ({}, 0.0)


def test_reset_and_load_state_dict_restart_a_race() -> None:
    """After reset the optimiser repeats its first steps; load_state_dict resumes exactly where a copy left off."""
    params, grads = _model()
    for make in (Adam, lambda: SGD(momentum=0.9)):
        opt = make()
        first = opt.step(params, grads, 0.05)
        saved = opt.state_dict()
        second = opt.step(first, grads, 0.05)
        opt.reset()
        again = opt.step(params, grads, 0.05)
        assert all(np.array_equal(again[k], first[k]) for k in params)
        other = make()
        other.load_state_dict(saved)
        resumed = other.step(first, grads, 0.05)
        assert all(np.array_equal(resumed[k], second[k]) for k in params)


BAD_SETTINGS = [
    (lambda: Adam(betas=(0.9, 1.0)), "betas[1] must be in [0, 1)"),
    (lambda: Adam(betas=(-0.1, 0.9)), "betas[0] must be in [0, 1)"),
    (lambda: Adam(betas=(0.9,)), "betas must be a pair"),
    (lambda: Adam(eps=0.0), "eps must be a finite number > 0"),
    (lambda: Adam(eps=float("nan")), "eps must be"),
    (lambda: Adam(weight_decay=-1.0), "weight_decay must be"),
    (lambda: SGD(momentum=1.0), "momentum must be in [0, 1)"),
    (lambda: SGD(momentum=True), "momentum must be"),
    (lambda: SGD(weight_decay=float("inf")), "weight_decay must be"),
    (lambda: Adam().step({}, {}, -0.1), "lr must be a finite number >= 0"),
    (lambda: SGD().step({}, {}, float("inf")), "lr must be"),
    (lambda: SGD().step({}, {}, float("nan")), "lr must be"),
    (lambda: clip_by_global_norm({}, 0.0), "max_norm must be"),
    (lambda: clip_by_global_norm({}, -1.0), "max_norm must be"),
    (lambda: clip_by_global_norm({}, float("nan")), "max_norm must be"),
    (lambda: warmup_lr(0.1, -1, 3), "step must be a whole number"),
    (lambda: warmup_lr(0.1, 0, 2.5), "warmup_steps must be a whole number"),
    (lambda: warmup_lr(-0.1, 0, 3), "base_lr must be"),
]


@pytest.mark.parametrize(("build", "words"), BAD_SETTINGS, ids=[words for _, words in BAD_SETTINGS])
def test_bad_settings_raise_config_error(build, words: str) -> None:
    """Each out-of-range setting is refused with a ConfigError that names it and its allowed range."""
    with pytest.raises(ConfigError, match=re.escape(words)):
        build()


def test_mismatched_gradients_are_refused() -> None:
    """A gradient for an unknown name or of the wrong shape is a ValueError, not a silent broadcast."""
    params, grads = _model()
    with pytest.raises(ValueError, match="not a parameter"):
        SGD().step(params, {**grads, "extra": np.zeros(2)}, 0.1)
    with pytest.raises(ValueError, match="has shape"):
        Adam().step(params, {"g": np.zeros((1, 4))}, 0.1)
