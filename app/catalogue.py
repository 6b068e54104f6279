"""What the server offers: explorables (and, later, lessons) with their objectives, in order."""

from __future__ import annotations

from dataclasses import dataclass


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
)


def explorable(entry_id: str) -> Entry:
    return next(e for e in EXPLORABLES if e.id == entry_id)
