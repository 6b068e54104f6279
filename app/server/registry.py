"""Explorables by id: where each one's class lives and which URL-state keys it reads."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module
from typing import Any

__all__ = ["COMMON_KEYS", "EXPLORABLE_SPECS", "ExplorableSpec"]


@dataclass(frozen=True)
class ExplorableSpec:
    id: str
    module: str  # package holding the explorable
    class_name: str  # its pn.viewable.Viewer class, called as Class(query=..., embed=..., predict=...)
    # Its prediction is about how a set-up's run comes out (a race): the state holds the set-up from the commit
    # until its `decided` (app/classroom/race.py stores both), and a teacher's push may set it before the commit.
    race: bool = False

    def load(self) -> type:
        return getattr(import_module(self.module), self.class_name)

    def title(self) -> str:
        return import_module(self.module + ".view").TITLE

    def question(self) -> str:
        """The question its prediction (or bet) asks."""
        return import_module(self.module + ".view").QUESTION

    def query_keys(self) -> dict[str, Any]:
        """The URL-state keys the explorable accepts, besides embed and predict."""
        return dict(import_module(self.module + ".state").QUERY_KEYS)

    def choices(self) -> dict[str, str]:
        """The answers of the explorable's prediction (or bet), key -> label."""
        return dict(import_module(self.module + ".state").PREDICTION_CHOICES)

    def route(self) -> str:
        return f"/explorables/{self.id}"


EXPLORABLE_SPECS: dict[str, ExplorableSpec] = {
    s.id: s
    for s in (
        ExplorableSpec("transformer-block-trace", "blocktrace.explorables.transformer_block_trace", "TraceExplorable"),
        ExplorableSpec("block-floor", "blocktrace.explorables.block_floor", "FloorExplorable"),
        ExplorableSpec("decoder-block-lab", "blocktrace.explorables.decoder_block_lab", "DecoderLabExplorable"),
        ExplorableSpec("train-the-block", "blocktrace.explorables.train_the_block", "RaceExplorable", race=True),
    )
}
COMMON_KEYS = ("embed", "predict")
