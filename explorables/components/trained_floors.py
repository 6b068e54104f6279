"""One floor of a model trained in a race, kept so the decoder lab can open it (a "stored run").

The race page asks its worker for a floor as it stands: the floor's own weights, renamed as the only block of a
one-floor stack (`blocks.0.*`), and the stream that enters it on the first few held-out examples. Both are
exactly what the trained model computes there: the lab runs `forward` on them and gets that floor's stages. The
lab shows at most MAX_POSITIONS positions; the models are causal, so the first positions of a sequence do not
depend on the rest and cutting it short changes none of their numbers.

A kept floor is read-only and held by this process under an unguessable key (the link's `run=`), the most
recently opened KEPT_FLOORS of them; a link whose floor has gone (a restart, or many newer ones) says so.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass

import numpy as np

from blocktrace.explorables.components.shared_cache import SharedCache
from blocktrace.explorables.engine import language_model as lm
from blocktrace.explorables.engine.config import BlockConfig
from blocktrace.explorables.engine.params import Params

__all__ = ["KEPT_FLOORS", "MAX_EXAMPLES", "MAX_POSITIONS", "PER_PAGE", "FloorCut", "TrainedFloor", "cut_floor",
           "find", "keep", "read_key"]

MAX_EXAMPLES = 4  # the lab's largest batch
MAX_POSITIONS = 8  # the lab's longest sequence
KEPT_FLOORS = 512  # about 25 KB each for the races' 16-wide models: 13 MB at most
PER_PAGE = 32  # floors one race page may keep, so one page cannot push the class's links out
KEY = re.compile(r"[A-Za-z0-9_-]{22}")  # secrets.token_urlsafe(16)


@dataclass(frozen=True)
class FloorCut:
    """One floor of a trained model, cut out of it: what a race's worker sends back."""

    config: BlockConfig  # the model's block settings as a one-floor stack, positions already in the stream
    params: Params  # the floor's weights as blocks.0.*, read-only
    inputs: np.ndarray  # [examples, pos, d_model] the stream entering the floor, read-only
    tokens: tuple[tuple[str, ...], ...]  # [examples][pos] the examples' tokens
    steps: int  # training steps the model had taken


@dataclass(frozen=True)
class TrainedFloor:
    """A kept floor with what the lab says about it."""

    cut: FloorCut
    model: str  # the model's name in its race, e.g. "post-norm"
    floor: int  # which floor of the model (from 0)
    floors: int  # how many the model has
    race: str  # the race's address on this server, to go back to it


def cut_floor(config: BlockConfig, params: Params, floor: int, sequences: np.ndarray, vocab: tuple[str, ...],
              steps: int) -> FloorCut:
    """Floor `floor` of a trained language model and the stream entering it on `sequences`. # [examples, pos]"""
    if not 0 <= floor < config.n_layers:
        raise ValueError(f"the model has no floor {floor + 1}")
    prefix = f"blocks.{floor}."
    block = {"blocks.0." + name[len(prefix):]: np.array(value) for name, value in params.items()
             if name.startswith(prefix)}
    inputs, tokens = [], []
    for sequence in sequences[:MAX_EXAMPLES]:  # whole sequences in, first positions kept
        trace, _ = lm.trace_sequence(config, params, sequence, vocab)
        inputs.append(trace[prefix + "resid_pre"][:MAX_POSITIONS])
        tokens.append(tuple(vocab[t] for t in sequence[:MAX_POSITIONS]))
    stream = np.stack(inputs)
    for value in (*block.values(), stream):
        value.flags.writeable = False
    return FloorCut(config.with_(n_layers=1, positions=False), block, stream, tuple(tokens), steps)


_KEPT: SharedCache[TrainedFloor] = SharedCache(KEPT_FLOORS)


def keep(floor: TrainedFloor) -> str:
    """Hold `floor` for the lab; its key, for the link."""
    key = secrets.token_urlsafe(16)
    _KEPT.get(key, lambda: floor)
    return key


def find(key: str) -> TrainedFloor | None:
    """The floor kept under `key`, or None (never kept, or no longer)."""
    return _KEPT.peek(key) if KEY.fullmatch(key) else None


def read_key(text: str) -> str:
    """A link's `run=` value: the shape of a key or empty (drawn weights), else ValueError (then the link's other
    values still apply)."""
    if text and not KEY.fullmatch(text):
        raise ValueError(text)
    return text
