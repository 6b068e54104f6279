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

from blocktrace.explorables.engine import ops, optim

EPS = 1e-6
RTOL, ATOL = 1e-6, 1e-9  # float32 work passes; a wrong formula does not


def _itself(result: Any) -> Any:
    return result


@dataclass(frozen=True)
class Case:
    function: str  # the name in the student's file
    args: tuple[Any, ...]
    expected: Callable[..., Any]  # the engine's answer for the same args
    read: Callable[[Any], Any] = _itself  # the numbers compared, from a result that is not an array (a dict, a pair)

    def answer(self) -> Any:
        return self.read(self.expected(*self.args))


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


def _grads_and_norm(result: Any) -> np.ndarray:
    """Clipped gradients (by name) and the norm before clipping, as one row: the names in order, then the norm."""
    grads, norm = result
    return np.concatenate([np.ravel(np.asarray(grads[name], dtype=float)) for name in sorted(grads)]
                          + [[float(norm)]])


def _adam_step(param, grad, m, v, t, lr):
    """The engine's Adam from the state (m, v) after t − 1 steps: (new θ, new m, new v)."""
    adam = optim.Adam()
    adam.load_state_dict({"w": {"step": t - 1, "exp_avg": m, "exp_avg_sq": v}})
    new = adam.step({"w": param}, {"w": grad}, lr)["w"]
    state = adam.state_dict()["w"]
    return new, state["exp_avg"], state["exp_avg_sq"]


def _training_cases(r: np.random.Generator) -> dict[str, Case]:
    warmup = int(r.integers(2, 300))
    rate_args = (float(r.uniform(1e-4, 3e-2)), int(r.integers(0, warmup)), warmup)  # a step inside the warm-up
    grads = {name: r.normal(size=shape) * 3 for name, shape in (("a", (4, 6)), ("b", (6,)), ("c", (3, 2, 2)))}
    param, grad, m = r.normal(size=(3, 5)), r.normal(size=(3, 5)), r.normal(size=(3, 5)) * 0.1
    v = r.uniform(0.0, 0.01, size=(3, 5))
    adam_args = (param, grad, m, v, int(r.integers(1, 60)), float(r.uniform(1e-4, 3e-2)))
    return {
        "warmup_lr": Case("warmup_lr", rate_args, optim.warmup_lr),
        "clip_by_global_norm": Case("clip_by_global_norm", (grads, float(r.uniform(0.5, 2.0))),
                                    optim.clip_by_global_norm, _grads_and_norm),
        "adam_step": Case("adam_step", adam_args, _adam_step),
    }


CHALLENGES: dict[str, Callable[[np.random.Generator], dict[str, Case]]] = {
    "lessons/transformer-block/exercise": _residual_cases,
    "lessons/decoder-block/exercise": _decoder_cases,
    "lessons/train-the-block/exercise": _training_cases,
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
