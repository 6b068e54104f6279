"""The stage catalogue: every intermediate's stable key, its axes, label and description.

Lessons, plot titles, tests, URL state and the JSON export all use these keys.
Labels may mention the configured norm or MLP, so they are built from the config.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from types import MappingProxyType

import numpy as np

from blocktrace.explorables.engine.config import BlockConfig

__all__ = ["BLOCK_KEYS", "Stage", "describe", "stage_texts"]

# The keys of one block, in forward order ("embed" and "pos_embed" come before the first block).
BLOCK_KEYS = (
    "resid_pre",
    "ln1.normalized",
    "attn.q",
    "attn.k",
    "attn.v",
    "attn.scores",
    "attn.pattern",
    "attn_out",
    "resid_mid",
    "ln2.normalized",
    "mlp.gate",
    "mlp.value",
    "mlp.hidden",
    "mlp_out",
    "resid_post",
)

# Axis names of each stage, without any leading batch axis.
AXES = {
    "embed": ("pos", "d_model"),
    "pos_embed": ("pos", "d_model"),
    "attn.q": ("n_heads", "pos", "d_head"),
    "attn.k": ("n_heads", "pos", "d_head"),
    "attn.v": ("n_heads", "pos", "d_head"),
    "attn.scores": ("n_heads", "pos", "key_pos"),
    "attn.pattern": ("n_heads", "pos", "key_pos"),
    "mlp.gate": ("pos", "d_mlp"),
    "mlp.value": ("pos", "d_mlp"),
    "mlp.hidden": ("pos", "d_mlp"),
}
STREAM_AXES = ("pos", "d_model")


@dataclass(frozen=True)
class Stage:
    """One intermediate of the forward pass."""

    key: str  # stable key, e.g. "blocks.0.attn_out"
    label: str  # the lessons' words, e.g. "Attention update"
    description: str  # one sentence on what the values are
    values: np.ndarray

    @property
    def local_key(self) -> str:
        """The key without its "blocks.{i}." prefix."""
        return self.key.split(".", 2)[2] if self.key.startswith("blocks.") else self.key

    @property
    def layer(self) -> int | None:
        return int(self.key.split(".")[1]) if self.key.startswith("blocks.") else None

    @property
    def axes(self) -> tuple[str, ...]:
        axes = AXES.get(self.local_key, STREAM_AXES)
        return ("batch", *axes) if self.values.ndim == len(axes) + 1 else axes


def describe(local_key: str, config: BlockConfig) -> tuple[str, str]:
    """(label, description) of a stage under this configuration."""
    return stage_texts(config)[local_key]


@lru_cache(maxsize=256)
def stage_texts(config: BlockConfig) -> Mapping[str, tuple[str, str]]:
    """(label, description) of every stage under this configuration, by local key.

    Cached (configs are frozen) and read-only: one look-up per trace instead of one per stage.
    """
    norm = "RMSNorm" if config.norm == "rmsnorm" else "LayerNorm"
    norm_does = "rescaled by its root mean square" if config.norm == "rmsnorm" else "mean-centred, then rescaled"
    post = config.placement == "post"
    replace = config.residual == "replace"
    add1 = "after attention replaced it (broken)" if replace else "after residual add 1"
    add2 = "after the MLP replaced it (broken)" if replace else "after residual add 2"
    mlp_name = {"swiglu": "SwiGLU", "gelu": "GELU", "relu": "ReLU"}[config.mlp]
    gated = config.mlp == "swiglu"
    attn_reads = "the rows of the incoming stream" if post else "the normalised rows"  # post-norm: no norm before
    table = {
        "embed": ("Input embedding", "Each token's vector before anything is added to it."),
        "pos_embed": ("Position vectors", "The vector stamped on each slot; added to the embedding."),
        "resid_pre": (
            "Input residual stream",
            "What enters the block: the token vector (plus its position vector, when positions are on).",
        ),
        "ln1.normalized": (
            f"{norm} 1" + (" (after residual add 1)" if post else " (before attention)"),
            f"Each row {norm_does}, then multiplied by the learned gain"
            + (" — in post-norm this is the stream itself." if post else "; attention reads this view."),
        ),
        "attn.q": ("Queries", f"What each position looks for: {attn_reads} times W_Q, split per head."),
        "attn.k": ("Keys", f"What each position offers to be found by: {attn_reads} times W_K, split per head."),
        "attn.v": ("Values", f"What each position hands over when read: {attn_reads} times W_V, split per head."),
        "attn.scores": (
            "Attention scores",
            "Query-key dot products divided by √d_head" + ("; the masked future is −∞." if config.causal else "."),
        ),
        "attn.pattern": (
            "Attention weights",
            "Softmax of each row of scores: how much each position reads from each other; rows sum to 1.",
        ),
        "attn_out": (
            "Attention update",
            "The weighted mix of values, projected by W_O and multiplied by the attention update scale.",
        ),
        "resid_mid": (
            "Residual stream " + add1,
            ("The attention update alone: the incoming stream is discarded." if replace
             else "The incoming stream plus the attention update")
            + (", then normalised (post-norm)." if post else ("" if replace else ".")),
        ),
        "ln2.normalized": (
            f"{norm} 2" + (" (after residual add 2)" if post else " (before MLP)"),
            f"The stream {norm_does} and multiplied by the gain"
            + (" — in post-norm this is the block's output." if post else "; the MLP reads this view."),
        ),
        "mlp.gate": (
            "Gate projection" if gated else "MLP pre-activation",
            "The normalised row times W_gate: how far each gate opens." if gated
            else "The normalised row times W_in plus b_in: what the non-linearity reads.",
        ),
        "mlp.value": ("Value projection", "The normalised row times W_value: what each gate lets through."),
        "mlp.hidden": (
            f"{mlp_name} hidden",
            "SiLU(gate) times value, unit by unit." if gated else f"{mlp_name} of the pre-activation, unit by unit.",
        ),
        "mlp_out": (
            "MLP update",
            "The hidden vector projected back to model width ("
            + ("W_down" if gated else "W_out, plus b_out")
            + "), times the MLP update scale.",
        ),
        "resid_post": (
            "Output " + add2,
            ("The MLP update alone: the stream that came in is discarded." if replace
             else "The stream after attention plus the MLP update")
            + (", then normalised (post-norm)." if post else ("" if replace else ": the block's output.")),
        ),
    }
    return MappingProxyType(table)
