"""What the server offers: explorables (and, later, lessons) with their objectives, in order."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["EXPLORABLES", "explorable"]


@dataclass(frozen=True)
class Entry:
    id: str
    title: str
    route: str
    summary: str
    objectives: tuple[str, ...]
    kind: str = "explorable"


EXPLORABLES: tuple[Entry, ...] = (
    Entry(
        id="transformer-block-trace",
        title="Pre-norm Transformer block trace",
        route="/explorables/transformer-block-trace",
        summary="Trace one token vector through RMSNorm, attention, the SwiGLU MLP and both residual additions.",
        objectives=(
            "Trace a pre-norm residual stream through attention and an MLP",
            "Tell RMSNorm apart from mean-centred normalisation",
            "Explain how SwiGLU gates an MLP update",
        ),
    ),
    Entry(
        id="block-floor",
        title="One floor, two word orders",
        route="/explorables/block-floor",
        summary="Step a word through the eight stages of one floor for a phrase and its reversal, "
                "and find where the two traces first differ.",
        objectives=(
            "Follow one word through norm, attention, MLP and both residual additions",
            "Find the first stage where word order matters, and explain why it is attention",
            "See why stacking the same floor lets corrections compose",
        ),
    ),
    Entry(
        id="decoder-block-lab",
        title="Decoder block lab",
        route="/explorables/decoder-block-lab",
        summary="Follow the [B, T, d] residual stream through a full decoder block: shapes, design choices, "
                "causal safety, and why pre-norm and residuals let depth grow.",
        objectives=(
            "Trace every tensor's shape and count a block's parameters",
            "Compare RMSNorm with LayerNorm and SwiGLU with GELU",
            "Test causal safety and see why pre-norm residual stacks train at depth",
        ),
    ),
    Entry(
        id="train-the-block",
        title="Train the block: race two floors",
        route="/explorables/train-the-block",
        summary="Two models learn the same small task from the same data and weights, differing in one design "
                "choice: predict which learns first, then watch both loss curves and the gradient at every floor.",
        objectives=(
            "Predict, then see, whether pre-norm or post-norm stacks learn at 12 or 24 floors",
            "See what replacing the stream instead of adding to it does to learning",
            "Read the gradient that reaches each floor while a model trains",
        ),
    ),
)


def explorable(entry_id: str) -> Entry:
    return next(e for e in EXPLORABLES if e.id == entry_id)
