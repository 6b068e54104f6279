"""The engine against PyTorch: the committed fixtures in tests/fixtures/reference.json.

The fixtures come from tests/fixtures/make_reference.py, which uses only torch's own building
blocks; these tests need no torch except the last, which checks the fixtures are still current.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from blocktrace.explorables.engine import BlockConfig, forward
from blocktrace.explorables.engine.params import param_names, param_shape
from tests.unit.torch_fixtures import assert_same_tree, load_builder, tolerances

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
REFERENCE = json.loads((FIXTURES / "reference.json").read_text(encoding="utf-8"))
CASES = {case["name"]: case for case in REFERENCE["cases"]}
LESSON = CASES["lesson-seed-42"]
BLOCK_CASES = [case for case in REFERENCE["cases"] if case["kind"] == "block"]

# The lesson ran in float32, so its values carry float32 rounding; the random cases are float64.
LESSON_TOL = {"rtol": 1e-5, "atol": 1e-5}
BLOCK_TOL = {"rtol": 1e-10, "atol": 1e-12}

# Lesson variable -> the engine stage it must equal (pattern, q, k, v carry a head axis).
LESSON_STAGES = {
    "X": "blocks.0.resid_pre",
    "X_norm": "blocks.0.ln1.normalized",
    "Q": "blocks.0.attn.q",
    "K": "blocks.0.attn.k",
    "V": "blocks.0.attn.v",
    "scores": "blocks.0.attn.scores",
    "attn_weights": "blocks.0.attn.pattern",
    "attn_out": "blocks.0.attn_out",
    "X1": "blocks.0.resid_mid",
    "X1_norm": "blocks.0.ln2.normalized",
    "gate": "blocks.0.mlp.gate",
    "val": "blocks.0.mlp.value",
    "x_swish": "blocks.0.mlp.hidden",
    "mlp_out": "blocks.0.mlp_out",
    "X2": "blocks.0.resid_post",
}


def _arrays(tree: dict[str, Any]) -> dict[str, np.ndarray]:
    return {name: np.asarray(values, dtype=float) for name, values in tree.items()}


def _first_mismatch(pairs: list[tuple[str, np.ndarray, np.ndarray]], rtol: float, atol: float) -> str | None:
    """A message naming the first stage (in forward order) where engine and torch differ, or None."""
    for name, ours, theirs in pairs:
        if ours.shape != theirs.shape:
            return f"{name}: engine shape {ours.shape}, torch shape {theirs.shape}"
        if not np.allclose(ours, theirs, rtol=rtol, atol=atol):
            diff = np.abs(ours - theirs)
            where = tuple(int(i) for i in np.unravel_index(np.argmax(diff), diff.shape))
            return (
                f"{name}: max |engine - torch| = {diff.max():.3g} at {where} "
                f"(engine {float(ours[where])!r}, torch {float(theirs[where])!r})"
            )
    return None


def lesson_engine_inputs(tensors: dict[str, np.ndarray]) -> tuple[BlockConfig, dict[str, np.ndarray]]:
    """The lesson's weights in the engine's terms: W_O = I, unit gains, SwiGLU split gate-first."""
    d = tensors["W_Q"].shape[0]
    d_mlp = tensors["W_mlp_out"].shape[0]
    config = BlockConfig(
        d_model=d, n_heads=1, d_mlp=d_mlp, n_layers=1, norm="rmsnorm", placement="pre", mlp="swiglu",
        residual="add", causal=False, positions=False, eps=1e-6,
    )
    params = {
        "blocks.0.ln1.g": np.ones(d),
        "blocks.0.ln2.g": np.ones(d),
        "blocks.0.attn.W_Q": tensors["W_Q"],
        "blocks.0.attn.W_K": tensors["W_K"],
        "blocks.0.attn.W_V": tensors["W_V"],
        "blocks.0.attn.W_O": np.eye(d),
        "blocks.0.mlp.W_gate": tensors["W_swiglu"][:, :d_mlp],
        "blocks.0.mlp.W_value": tensors["W_swiglu"][:, d_mlp:],
        "blocks.0.mlp.W_down": tensors["W_mlp_out"],
    }
    return config, params


def test_lesson_example_matches_torch() -> None:
    """The lesson's seed-42 worked example gives the same numbers in the engine as in the lesson's PyTorch."""
    tensors = _arrays(LESSON["tensors"])
    config, params = lesson_engine_inputs(tensors)
    trace = forward(config, params, tensors["X"][0])
    pairs = []
    for lesson_name, key in LESSON_STAGES.items():
        ours = trace[key]
        if key.split(".", 2)[2].startswith("attn."):  # drop the single head axis
            ours = ours[0]
        pairs.append((f"{lesson_name} / {key}", ours, tensors[lesson_name][0]))
    x_proj = np.concatenate([trace["blocks.0.mlp.gate"], trace["blocks.0.mlp.value"]], axis=-1)
    pairs.append(("x_proj / mlp.gate|mlp.value", x_proj, tensors["x_proj"][0]))
    assert (mismatch := _first_mismatch(pairs, **LESSON_TOL)) is None, mismatch


def test_fixtures_cover_every_variant() -> None:
    """The random fixtures keep exercising every norm, placement, MLP, residual mode, mask, head count and depth."""
    configs = [case["config"] for case in BLOCK_CASES]

    def seen(field: str) -> set[Any]:
        return {c[field] for c in configs}

    assert seen("norm") == {"rmsnorm", "layernorm"}
    assert seen("placement") == {"pre", "post"}
    assert seen("mlp") == {"swiglu", "gelu", "relu"}
    assert seen("residual") == {"add", "replace"}
    assert seen("causal") == {True, False}
    assert {1, 2, 4} <= seen("n_heads")
    assert {1, 2, 3} <= seen("n_layers")
    assert {1e-5, 1e-6} <= seen("eps")
    assert any(c["attention_scale"] != 1 for c in configs) and any(c["mlp_scale"] != 1 for c in configs)
    assert any(c["d_head"] * c["n_heads"] != c["d_model"] for c in configs)
    assert any(np.ndim(case["input"]) == 3 for case in BLOCK_CASES)
    assert all(not c["positions"] for c in configs)


@pytest.mark.parametrize("case", BLOCK_CASES, ids=[case["name"] for case in BLOCK_CASES])
def test_fixture_params_use_engine_names_and_shapes(case: dict[str, Any]) -> None:
    """Each fixture's parameters are exactly the engine's names and shapes, so no weight is silently ignored."""
    config = BlockConfig(**case["config"])
    params = _arrays(case["params"])
    assert sorted(params) == sorted(param_names(config))
    for name, values in params.items():
        assert values.shape == param_shape(name, config), name
    gains = [values for name, values in params.items() if name.endswith(".g")]
    assert not all(np.allclose(g, 1.0) for g in gains)


@pytest.mark.parametrize("case", BLOCK_CASES, ids=[case["name"] for case in BLOCK_CASES])
def test_random_block_matches_torch(case: dict[str, Any]) -> None:
    """Every recorded stage of a random stack equals PyTorch's value, for every engine variant."""
    config = BlockConfig(**case["config"])
    trace = forward(config, _arrays(case["params"]), np.asarray(case["input"], dtype=float))
    expected = _arrays(case["stages"])
    assert set(expected) <= set(trace.keys())
    pairs = [(key, trace[key], expected[key]) for key in trace.keys() if key in expected]
    assert (mismatch := _first_mismatch(pairs, **BLOCK_TOL)) is None, mismatch


def test_fixtures_match_live_torch() -> None:
    """The committed fixtures are still what make_reference.py builds with the installed PyTorch."""
    torch = pytest.importorskip("torch")
    live = load_builder("make_reference").build_reference()
    assert live["schema"] == REFERENCE["schema"]
    assert [c["name"] for c in live["cases"]] == [c["name"] for c in REFERENCE["cases"]]
    rtol, atol = tolerances(torch.__version__, REFERENCE["torch_version"])
    for live_case, stored_case in zip(live["cases"], REFERENCE["cases"], strict=True):
        assert_same_tree(live_case, stored_case, stored_case["name"], rtol, atol)
