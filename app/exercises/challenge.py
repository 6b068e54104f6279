"""The numbers that show an exercise really passes: inputs drawn from a nonce the server chose, answers it checks.

`blocktrace check` calls the student's functions on `cases(folder, nonce)` and sends the outputs; the server
draws the same cases and compares them with the engine's own results (`expected`). Only numbers travel: no
student code ever runs on the server. Pure NumPy, no server imports, so the check command stays light.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from blocktrace.explorables.engine import ops

EPS = 1e-6
RTOL, ATOL = 1e-6, 1e-9  # float32 work passes; a wrong formula does not


@dataclass(frozen=True)
class Case:
    function: str  # the name in the student's file
    args: tuple[Any, ...]
    expected: Callable[..., Any]  # the engine's answer for the same args

    def answer(self) -> Any:
        return self.expected(*self.args)


def half_update(n: np.ndarray) -> np.ndarray:
    """The stand-in sublayer both sides use for residual_sublayer: what attention or the MLP would return."""
    return 0.5 * n + 0.25


def _residual_cases(r: np.random.Generator) -> dict[str, Case]:
    x, gain = r.normal(size=(3, 4)) * 2, r.uniform(0.5, 1.5, size=4)
    return {
        "rms_norm": Case("rms_norm", (x, gain, EPS), ops.rms_norm),
        "residual_sublayer": Case("residual_sublayer", (x, half_update, gain, EPS),
                                  lambda x, t, g, eps: x + t(ops.rms_norm(x, g, eps))),
    }


def _split_swiglu(x, W, W_out):
    half = W.shape[1] // 2
    return ops.swiglu(x, W[:, :half], W[:, half:], W_out)["out"]


def _decoder_cases(r: np.random.Generator) -> dict[str, Case]:
    d = 8
    x = r.normal(size=(2, 3, d))
    W, W_out = r.normal(size=(d, 4 * d)) / math.sqrt(d), r.normal(size=(2 * d, d)) / math.sqrt(2 * d)
    W_in, b_in = r.normal(size=(d, 4 * d)) / math.sqrt(d), r.normal(size=4 * d) * 0.1
    W_down, b_out = r.normal(size=(4 * d, d)) / math.sqrt(4 * d), r.normal(size=d) * 0.1
    gain, bias = r.uniform(0.5, 1.5, size=d), r.normal(size=d) * 0.1
    count = int(r.integers(4, 1024))
    return {
        "rms_norm": Case("rms_norm", (x, gain, EPS), ops.rms_norm),
        "swiglu": Case("swiglu", (x, W, W_out), _split_swiglu),
        "swiglu_param_count": Case("swiglu_param_count", (count,), lambda d: 6 * d * d),
        "layer_norm": Case("layer_norm", (x, gain, bias, EPS), ops.layer_norm),
        "gelu_mlp": Case("gelu_mlp", (x, W_in, b_in, W_down, b_out),
                         lambda *a: ops.dense_mlp(*a, ops.gelu)["out"]),
    }


CHALLENGES: dict[str, Callable[[np.random.Generator], dict[str, Case]]] = {
    "lessons/transformer-block/exercise": _residual_cases,
    "lessons/decoder-block/exercise": _decoder_cases,
}


def cases(folder: str, nonce: str) -> dict[str, Case]:
    """The cases of the exercise in `folder` (its path in the lesson), drawn from `nonce` (hex)."""
    return CHALLENGES[folder](np.random.default_rng(int(nonce, 16)))


def as_numbers(value: Any) -> Any:
    """A function's output as JSON numbers (nested lists); None for something that is not numeric."""
    try:
        array = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        return None
    return array.tolist() if np.all(np.isfinite(array)) else None


def verify(folder: str, nonce: str, outputs: dict[str, Any]) -> dict[str, bool]:
    """Which of the exercise's functions gave the engine's answer for the nonce's inputs (a missing one: False)."""
    found = {}
    for name, case in cases(folder, nonce).items():
        got, want = outputs.get(name), np.asarray(case.answer(), dtype=float)
        try:
            got = np.asarray(got, dtype=float)
            found[name] = got.shape == want.shape and bool(np.allclose(got, want, rtol=RTOL, atol=ATOL))
        except (TypeError, ValueError):
            found[name] = False
    return found
