"""Inside the two models as they learn: one held-out sequence, each model's answer at every position, the
attention weights of one floor and head, and that floor's stages (drawn as a table by the browser: payload.py).
Pure functions of a runner.Look.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from blocktrace.explorables.components.floor_model import Shown, shown, spec_from
from blocktrace.explorables.components.heatmap import heatmap_sentences
from blocktrace.explorables.components.numbers import rms_card
from blocktrace.explorables.engine.config import BlockConfig
from blocktrace.explorables.engine.forward import block_keys
from blocktrace.explorables.engine.stages import stage_texts
from blocktrace.explorables.train_the_block.runner import SideLook

__all__ = ["N_SHOWN", "attention_sentences", "diagram_view", "pattern_of", "stage_row"]

MLP_NAMES = {"swiglu": "SwiGLU", "gelu": "GELU", "relu": "ReLU"}
WAITING = "values appear after the first step"

N_SHOWN = 6  # components shown per row of the stage table


def pattern_of(side: SideLook, head: int, n_pos: int) -> np.ndarray:
    """The head's attention weights [pos, pos]; zeros when the model has no such floor or head."""
    if side.pattern is None or not 0 <= head < side.pattern.shape[0]:
        return np.zeros((n_pos, n_pos))
    return side.pattern[head]


def stage_row(values: np.ndarray, position: int) -> np.ndarray:
    """A stage's values at one position, every head's together. # [..., pos, x] -> [...·x]"""
    return values[..., position, :].reshape(-1) if values.ndim >= 2 else values.reshape(-1)


def diagram_view(side: SideLook | None, name: str, config: BlockConfig, floor: int, position: int,
                 picked: str) -> Shown:
    """The floor diagram of this model's floor at one position: each stage's RMS on its card, `picked` (a local
    key) selected, as the stage table marks it. Before the first look (side None) the stages are named only."""
    texts = stage_texts(config)
    stages = [(key, f"blocks.{floor}.{key}", texts[key][0]) for key in block_keys(config)]
    spec = spec_from(stages, placement=config.placement, residual=config.residual, causal=config.causal,
                     mlp_title=f"MLP ({MLP_NAMES[config.mlp]})", end_label=f"floor {floor + 1}'s output")
    if side is None:
        return shown(spec, "", None, True, caption=f"{name}, floor {floor + 1}: {WAITING}.", locked_name=WAITING)
    values = {}
    for stage in side.stages:
        values[stage.key] = rms_card(stage_row(stage.values, position))
    caption = (f"{name}, floor {floor + 1} at step {side.steps}: each card shows its stage's RMS at position "
               f"{position + 1}, as the table below does; select a stage to mark it there.")
    return shown(spec, f"blocks.{floor}.{picked}", values, False, caption=caption)


def attention_sentences(side: SideLook, name: str, floor: int, head: int, tokens: Sequence[str]) -> list[str]:
    """The head's weights in words, for screen readers and as the heatmap's text alternative."""
    if side.pattern is None:
        return [f"{name} has no floor {floor + 1}."]
    lead = f"{name}, floor {floor + 1}, head {head + 1}, at step {side.steps}."
    return [lead, *heatmap_sentences(pattern_of(side, head, len(tokens)), tokens)]
