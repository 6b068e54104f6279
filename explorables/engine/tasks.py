"""Small synthetic tasks to train a tiny Transformer stack on, generated in NumPy from a seed.

Every task gives batches of token sequences with a target at each position and a mask of the positions
that are scored: the loss is the mean cross-entropy of targets[scored] (language_model.py). Symbols are
the tokens 0 … symbols - 1, shown as A, B, C, …; a separator, where a task has one, comes after them.

Batches come from streams seeded by (seed, step), so step s is the same batch whatever was drawn
before it (two models in a race see the same data), and the held-out set has a stream of its own.
"""

from __future__ import annotations

import inspect
import math
import string
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from blocktrace.explorables.engine.config import ConfigError

__all__ = [
    "MAX_SEQUENCES", "MAX_SEQ_LEN", "MAX_SYMBOLS", "TASKS", "Batch", "Task", "accuracy", "held_out", "make_task",
    "training_batch",
]

MAX_SYMBOLS = 26  # one letter each
MAX_SEQ_LEN = 64  # tasks stay short: a step's work grows with the square of the length
MAX_SEQUENCES = 4096  # sequences in one batch
MAX_SEED = 2**32 - 1  # seeds and steps are single words of the seed sequence, so streams never alias
SEP = "SEP"


@dataclass(frozen=True)
class Batch:
    """n token sequences, the target at each position, and which positions are scored."""

    tokens: np.ndarray  # [n, pos] int64, indices into the task's vocab
    targets: np.ndarray  # [n, pos] int64, meaningful only where scored (0 elsewhere)
    scored: np.ndarray  # [n, pos] bool, the positions the loss and the accuracy count


@dataclass(frozen=True)
class Task:
    """One task: what it is called, what solving it needs, its vocabulary and length, and its generator."""

    id: str  # one of TASKS
    title: str  # short, for a menu
    needs: str  # one plain sentence: what a model must learn to solve it
    vocab: tuple[str, ...]  # display name of each token
    seq_len: int  # positions in every sequence
    causal: bool  # True when a target also appears later in the input: train with the causal mask
    # Tokens a scored target can be, each equally likely over all scored positions together (in sort a single
    # position is skewed: the first output is more often a small symbol).
    answers: int
    options: tuple[tuple[str, int], ...]  # what make_task was given, defaults filled in

    @property
    def chance_loss(self) -> float:
        """ln(answers): the cross-entropy of a model that spreads its belief evenly over the possible answers."""
        return math.log(self.answers)

    @property
    def chance_accuracy(self) -> float:
        """1 / answers: the accuracy of guessing, or of always giving the same answer."""
        return 1.0 / self.answers

    def batch(self, rng: np.random.Generator, n: int) -> Batch:
        """n fresh sequences drawn from rng.

        # -> Batch of [n, pos]
        """
        _check("n", n, 1, MAX_SEQUENCES, "sequences in a batch")
        tokens, targets, scored = _DRAWS[self.id](rng, n, **dict(self.options))
        return Batch(tokens.astype(np.int64), targets.astype(np.int64), scored.astype(bool))


# Task makers: each checks its options and says what the task is; its generator is the _draw_* of the same id.

def _copy(symbols: int = 8, seq_len: int = 12, k: int = 2) -> Task:
    _check("symbols", symbols, 2, MAX_SYMBOLS)
    _check("seq_len", seq_len, 2, MAX_SEQ_LEN)
    _check("k", k, 1, seq_len - 1, "places back, less than seq_len")
    needs = f"Each answer is the token {k} places back: attention must learn to read by position."
    # The answer is in the past, so the model may also see the future without reading the answer.
    return Task("copy", f"Copy {k} back", needs, _letters(symbols), seq_len, False, symbols,
                (("symbols", symbols), ("seq_len", seq_len), ("k", k)))


def _reverse(symbols: int = 8, m: int = 4) -> Task:
    _check("symbols", symbols, 2, MAX_SYMBOLS)
    _check("m", m, 2, MAX_SEQ_LEN // 2, "symbols to reverse")
    needs = "After the separator the inputs come back last first: attention must find the mirror position."
    return Task("reverse", "Reverse", needs, _letters(symbols) + (SEP,), 2 * m, True, symbols,
                (("symbols", symbols), ("m", m)))


def _sort(symbols: int = 8, m: int = 4) -> Task:
    _check("symbols", symbols, 2, MAX_SYMBOLS)
    _check("m", m, 2, MAX_SEQ_LEN // 2, "symbols to sort")
    needs = "After the separator the inputs come back in order: attention must compare symbols, not positions."
    return Task("sort", "Sort", needs, _letters(symbols) + (SEP,), 2 * m, True, symbols,
                (("symbols", symbols), ("m", m)))


def _induction(symbols: int = 8, seq_len: int = 16, min_pattern: int = 3, max_pattern: int = 6) -> Task:
    _check("symbols", symbols, 2, MAX_SYMBOLS)
    _check("seq_len", seq_len, 3, MAX_SEQ_LEN)
    _check("max_pattern", max_pattern, 2, min(symbols, seq_len - 1), "at most symbols (a pattern uses each "
           "symbol once) and less than seq_len (so it repeats)")
    _check("min_pattern", min_pattern, 2, max_pattern, "at most max_pattern")
    needs = ("A pattern of unknown length repeats: an induction head (two floors) must find where this token "
             "was last and copy the token after it.")
    return Task("induction", "Continue the pattern", needs, _letters(symbols), seq_len, True, symbols,
                (("symbols", symbols), ("seq_len", seq_len), ("min_pattern", min_pattern),
                 ("max_pattern", max_pattern)))


def _pair_sum(symbols: int = 8, seq_len: int = 8) -> Task:
    _check("symbols", symbols, 2, MAX_SYMBOLS)
    _check("seq_len", seq_len, 2, MAX_SEQ_LEN)
    needs = ("Each answer is this symbol plus the one before it, counted round the alphabet: attention fetches "
             "the one before, and the MLP has to combine the two.")
    return Task("sum", "Add the last two", needs, _letters(symbols), seq_len, False, symbols,
                (("symbols", symbols), ("seq_len", seq_len)))


_MAKERS: dict[str, Callable[..., Task]] = {
    "copy": _copy, "reverse": _reverse, "sort": _sort, "induction": _induction, "sum": _pair_sum,
}
TASKS = tuple(_MAKERS)  # menu order


def make_task(task_id: str, **options: Any) -> Task:
    """The task of this id with these options (the rest at their defaults); ConfigError for a bad id or option."""
    if task_id not in _MAKERS:
        raise ConfigError(f"there is no task {task_id!r}; choose one of {', '.join(TASKS)}")
    allowed = inspect.signature(_MAKERS[task_id]).parameters
    for name in options:
        if name not in allowed:
            raise ConfigError(f"the {task_id} task has no option {name!r}; its options are {', '.join(allowed)}")
    return _MAKERS[task_id](**options)


# Generators: (rng, n, **options) -> tokens, targets, scored, each [n, pos].

Arrays = tuple[np.ndarray, np.ndarray, np.ndarray]


def _draw_copy(rng: np.random.Generator, n: int, symbols: int, seq_len: int, k: int) -> Arrays:
    """targets[t] = tokens[t - k], scored for t ≥ k."""
    tokens = rng.integers(0, symbols, size=(n, seq_len))
    targets = np.zeros_like(tokens)
    targets[:, k:] = tokens[:, :-k]
    return tokens, targets, np.broadcast_to(np.arange(seq_len) >= k, tokens.shape)


def _after_separator(inputs: np.ndarray, outputs: np.ndarray, symbols: int) -> Arrays:
    """tokens = [a1 … am, SEP, b1 … b(m-1)], targets = [· … ·, b1 … bm], scored from SEP on (teacher forcing).

    # [n, m], [n, m] -> [n, 2m] each
    """
    n, m = inputs.shape
    tokens = np.concatenate([inputs, np.full((n, 1), symbols), outputs[:, :-1]], axis=1)
    targets = np.concatenate([np.zeros_like(inputs), outputs], axis=1)
    return tokens, targets, np.broadcast_to(np.arange(2 * m) >= m, tokens.shape)


def _draw_reverse(rng: np.random.Generator, n: int, symbols: int, m: int) -> Arrays:
    """b = a reversed: b_j = a_(m+1-j)."""
    inputs = rng.integers(0, symbols, size=(n, m))
    return _after_separator(inputs, inputs[:, ::-1], symbols)


def _draw_sort(rng: np.random.Generator, n: int, symbols: int, m: int) -> Arrays:
    """b = a in ascending order (repeats kept)."""
    inputs = rng.integers(0, symbols, size=(n, m))
    return _after_separator(inputs, np.sort(inputs, axis=1), symbols)


def _draw_induction(rng: np.random.Generator, n: int, symbols: int, seq_len: int, min_pattern: int,
                    max_pattern: int) -> Arrays:
    """sequence[t] = pattern[t mod L], targets[t] = tokens[t + 1], scored for t ≥ L.

    The pattern has L distinct symbols, L drawn per sequence: with one fixed L the answer would be the
    token L - 1 places back, a copy by position that one floor can learn. Before position L every token
    is new, so its successor is unknown; from L on the token was seen before and the token after its
    last appearance is the answer.
    """
    lengths = rng.integers(min_pattern, max_pattern + 1, size=(n, 1))
    patterns = np.argsort(rng.random((n, symbols)), axis=1)  # a random order of the symbols per row
    t = np.arange(seq_len + 1)
    sequence = np.take_along_axis(patterns, t % lengths, axis=1)  # one longer, so the last position has a target
    return sequence[:, :-1], sequence[:, 1:], t[:-1] >= lengths


def _draw_sum(rng: np.random.Generator, n: int, symbols: int, seq_len: int) -> Arrays:
    """targets[t] = (tokens[t - 1] + tokens[t]) mod symbols, scored for t ≥ 1.

    No straight line from the two tokens leads to the answer (it wraps round), so the MLP does the work:
    with the MLP switched off (mlp_scale 0) a one-floor model stays well below what it reaches with it.
    """
    tokens = rng.integers(0, symbols, size=(n, seq_len))
    targets = np.zeros_like(tokens)
    targets[:, 1:] = (tokens[:, 1:] + tokens[:, :-1]) % symbols
    return tokens, targets, np.broadcast_to(np.arange(seq_len) >= 1, tokens.shape)


_DRAWS: dict[str, Callable[..., Arrays]] = {
    "copy": _draw_copy, "reverse": _draw_reverse, "sort": _draw_sort, "induction": _draw_induction,
    "sum": _draw_sum,
}


# Data streams

def training_batch(task: Task, seed: int, step: int, n: int) -> Batch:
    """The batch of training step `step`: drawn from the stream of (seed, step) alone, so it is the same
    whatever was drawn before it.

    # -> Batch of [n, pos]
    """
    _check("seed", seed, 0, MAX_SEED)
    _check("step", step, 0, MAX_SEED)
    return task.batch(np.random.default_rng([_tag("tasks.train"), seed, step]), n)


def held_out(task: Task, seed: int, n: int) -> Batch:
    """n sequences for evaluation, from a stream of their own: no training step draws from it.

    # -> Batch of [n, pos]
    """
    _check("seed", seed, 0, MAX_SEED)
    return task.batch(np.random.default_rng([_tag("tasks.held-out"), seed]), n)


def accuracy(predicted: np.ndarray, batch: Batch) -> float:
    """mean(predicted == targets) over the scored positions.

    # [n, pos], Batch of [n, pos] -> float
    """
    if predicted.shape != batch.targets.shape:
        raise ValueError(f"predictions have shape {predicted.shape}, the batch {batch.targets.shape}")
    if not batch.scored.any():
        raise ValueError("the batch scores no position")
    return float(np.mean(predicted[batch.scored] == batch.targets[batch.scored]))


# Private API

def _letters(symbols: int) -> tuple[str, ...]:
    return tuple(string.ascii_uppercase[:symbols])


def _tag(name: str) -> int:
    """A fixed first word for a stream's seed: streams with different tags never coincide."""
    return zlib.crc32(name.encode("utf-8"))


def _check(name: str, value: Any, low: int, high: int, meaning: str = "") -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{name} must be a whole number, got {value!r}")
    if not low <= value <= high:
        about = f" ({meaning})" if meaning else ""
        raise ConfigError(f"{name}{about} must be between {low} and {high}, got {value}")
