"""The training model's loss and every parameter gradient against PyTorch autograd: the committed fixtures in
tests/fixtures/training_reference.json (built by tests/fixtures/make_training_reference.py from torch alone).

Only the last test needs torch: it checks the fixtures are still what the script builds.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from blocktrace.explorables.engine import BlockConfig
from blocktrace.explorables.engine import language_model as lm
from tests.unit.torch_fixtures import FIXTURES, assert_same_tree, load_builder, tolerances

REFERENCE = json.loads((FIXTURES / "training_reference.json").read_text(encoding="utf-8"))
CASES = REFERENCE["cases"]
RTOL = 1e-9  # of the largest entry of each gradient: float64 sums in another order, through up to two blocks


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_loss_and_every_parameter_gradient_match_torch_autograd(case: dict[str, Any]) -> None:
    """The engine's cross-entropy and ∂loss/∂ every parameter equal autograd's, for every block variant."""
    config = BlockConfig(**case["config"])
    params = {name: np.asarray(values, dtype=float) for name, values in case["params"].items()}
    result = lm.loss_and_grads(config, params, np.asarray(case["tokens"]), np.asarray(case["targets"]),
                               np.asarray(case["scored"]))
    assert result.loss == pytest.approx(case["loss"], rel=1e-12)
    assert sorted(result.grads) == sorted(case["grads"]) == sorted(lm.model_param_names(config))
    for name, values in case["grads"].items():
        theirs = np.asarray(values, dtype=float)
        assert result.grads[name].shape == theirs.shape, name
        scale = np.max(np.abs(theirs))
        assert scale > 0, f"{name}: torch's gradient is all zero, so the case checks nothing"
        np.testing.assert_allclose(result.grads[name], theirs, rtol=0, atol=RTOL * scale, err_msg=name)


def test_fixtures_cover_every_variant() -> None:
    """Between them the cases take every norm, placement, MLP and residual, both masks and several heads."""
    configs = [case["config"] for case in CASES]
    for field, values in [("norm", {"rmsnorm", "layernorm"}), ("placement", {"pre", "post"}),
                          ("mlp", {"swiglu", "gelu", "relu"}), ("residual", {"add", "replace"}),
                          ("causal", {True, False}), ("n_heads", {1, 2, 4}), ("n_layers", {1, 2})]:
        assert {c[field] for c in configs} == values, field
    variants = {(c["norm"], c["placement"], c["mlp"], c["residual"]) for c in configs}
    assert len(variants) == 24


def test_fixtures_match_live_torch() -> None:
    """The committed fixtures are still what make_training_reference.py builds with the installed PyTorch."""
    torch = pytest.importorskip("torch")
    live = load_builder("make_training_reference").build_reference()
    rtol, atol = tolerances(torch.__version__, REFERENCE["torch_version"])
    assert [c["name"] for c in live["cases"]] == [c["name"] for c in CASES]
    for live_case, stored_case in zip(live["cases"], CASES, strict=True):
        assert_same_tree(live_case, stored_case, stored_case["name"], rtol, atol)
