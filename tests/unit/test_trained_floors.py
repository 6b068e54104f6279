"""A trained floor opened in the decoder lab is the trained model's floor: the lab's trace of it on the kept
input gives, stage by stage, the numbers the whole model computes at that floor."""

from __future__ import annotations

import numpy as np
import pytest

from blocktrace.explorables.components import trained_floors as tf
from blocktrace.explorables.components.shared_cache import SharedCache
from blocktrace.explorables.decoder_block_lab import describe
from blocktrace.explorables.decoder_block_lab.state import LabState, lab_shape
from blocktrace.explorables.engine import language_model as lm
from blocktrace.explorables.engine import tasks
from blocktrace.explorables.engine.training import DEFAULT_SETUPS, Run, TrainSettings

VARIANTS = [dict(placement="pre"), dict(placement="post"), dict(norm="layernorm"), dict(residual="replace")]


def _trained(changes: dict, floors: int = 3, steps: int = 5) -> Run:
    """A model of the race's shape after a few real Adam steps, so its weights are no longer the drawn ones."""
    task = tasks.make_task("copy")
    config = DEFAULT_SETUPS["copy"].config.with_(n_layers=floors, **changes)
    run = Run(config, task, TrainSettings(lr=0.01), data_seed=3)
    for _ in range(steps):
        run.step()
    return run


def _kept(run: Run, floor: int) -> tuple[str, np.ndarray]:
    sequences = run.held_out.tokens[2:6]
    cut = tf.cut_floor(run.config, run.params, floor, sequences, run.task.vocab, run.step_count)
    key = tf.keep(tf.TrainedFloor(cut, "the model", floor, run.config.n_layers, "/explorables/train-the-block"))
    return key, sequences


@pytest.mark.parametrize("changes", VARIANTS, ids=lambda c: "-".join(c.values()))
@pytest.mark.parametrize("floor", [0, 2])
def test_the_lab_runs_the_trained_floor_as_the_model_does(changes: dict, floor: int) -> None:
    run = _trained(changes)
    key, sequences = _kept(run, floor)
    config = run.config
    lab = LabState(run=key, B=4, T=8, placement=config.placement, residual=config.residual)
    assert lab.run_error == "" and lab.trained is not None
    assert (lab.d, lab.heads, lab.norm, lab.mlp) == (config.d_model, config.n_heads, config.norm, config.mlp)
    for b, sequence in enumerate(sequences):
        whole, _ = lm.trace_sequence(config, run.params, sequence, run.task.vocab)
        for stage in lab.trace:
            if stage.key.startswith("blocks.0."):
                expected = whole[f"blocks.{floor}." + stage.key.removeprefix("blocks.0.")][..., :8, :]
                if stage.key.endswith(("attn.scores", "attn.pattern")):
                    expected = whole[f"blocks.{floor}." + stage.key.removeprefix("blocks.0.")][:, :8, :8]
                np.testing.assert_allclose(stage.values[b], expected, rtol=1e-12, atol=1e-12, err_msg=stage.key)
    assert lab.words == [run.task.vocab[t] for t in sequences[0][:8]]
    found = {c.name: c for c in lab.invariants()}  # the norms' checks take the learned gain and bias off first
    assert all(c.ok for name, c in found.items() if name.startswith("Norm"))
    assert found["Attention rows sum to 1"].ok and found["Weights on future positions are exactly 0"].ok
    assert lab.verdict().badge == "PASS"  # lesson 4, step 9: the causal test passes on trained weights
    assert all(c.ok for c in found.values()) == ((config.placement, config.residual) == ("pre", "add"))


def test_the_weights_fix_the_shape_whatever_the_page_sends() -> None:
    run = _trained({"norm": "layernorm"})
    key, _ = _kept(run, 1)
    lab = LabState(run=key)
    lab.d, lab.norm, lab.mlp, lab.heads, lab.expansion = 64, "rmsnorm", "gelu", 1, 8
    assert (lab.d, lab.norm, lab.mlp, lab.heads, lab.expansion) == (16, "layernorm", "swiglu", 2, 4)
    lab.param.update(residual="replace", placement="post")  # what-ifs on trained weights stay open
    assert lab.trace.config.residual == "replace" and lab.trace.params is lab.trained.cut.params
    assert "which it was not trained as" in describe.trained_note(lab)["lines"][0]
    lab.reset()
    assert (lab.placement, lab.residual, lab.norm) == ("pre", "add", "layernorm")


def test_a_key_the_server_does_not_hold_says_so_and_the_lab_draws_its_own() -> None:
    lab = LabState(run="A" * 22, d=32)
    assert lab.trained is None and "no longer kept" in lab.run_error and lab.d == 32
    assert "no longer kept" in describe.trained_note(lab)["error"]
    assert lab.trace.params is not None and lab.words[0] == "the"
    assert tf.read_key("") == ""  # the lab's own weights
    for text in ("short", "<b>x</b>" + "A" * 14, "A" * 23):
        with pytest.raises(ValueError):
            tf.read_key(text)
        assert tf.find(text) is None


def test_kept_floors_are_read_only_and_the_oldest_go_first() -> None:
    run = _trained({}, floors=2, steps=1)
    key, _ = _kept(run, 0)
    floor = tf.find(key)
    assert all(not v.flags.writeable for v in (*floor.cut.params.values(), floor.cut.inputs))
    with pytest.raises(ValueError, match="no floor 3"):
        tf.cut_floor(run.config, run.params, 2, run.held_out.tokens[:1], run.task.vocab, 1)
    cache: SharedCache[int] = SharedCache(2)
    for k in "abc":
        cache.get(k, lambda k=k: ord(k))
    assert cache.peek("a") is None and cache.peek("b") == ord("b") and cache.peek("x") is None


def test_a_floor_the_lab_has_no_shape_for_is_refused() -> None:
    config = DEFAULT_SETUPS["copy"].config
    assert lab_shape(config) == dict(d=16, heads=2, expansion=4, norm="rmsnorm", mlp="swiglu")
    assert lab_shape(config.with_(mlp="relu")) is None and lab_shape(config.with_(d_model=12, n_heads=1)) is None
