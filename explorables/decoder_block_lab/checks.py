"""The lesson's checks as pure functions of the numbers: invariants, the causal-safety verdict, the gate split.

Each check returns a status ("pass", "fail" or "n/a") and a sentence saying what was measured,
so a view never has to show a result by colour alone.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from blocktrace.explorables.components.numbers import number
from blocktrace.explorables.engine import ops
from blocktrace.explorables.engine.forward import Trace

__all__ = ["FAIL", "NOT_APPLICABLE", "PASS", "CausalVerdict", "Check", "causal_verdict", "change_per_position",
           "invariants", "swiglu_split"]

PASS = "pass"
FAIL = "fail"
NOT_APPLICABLE = "n/a"
ROW_SUM_TOL = 1e-9  # softmax rows sum to 1 up to rounding
NORM_TOL = 1e-3  # eps pulls the RMS of a row just below 1; more than this means something else is wrong
IDENTITY_TOL = 1e-12


@dataclass(frozen=True)
class Check:
    """One invariant: its name, whether it holds now, and the measured evidence."""

    name: str
    status: str  # PASS, FAIL or NOT_APPLICABLE
    detail: str

    @property
    def ok(self) -> bool:
        return self.status == PASS


def _has_nan(values: np.ndarray) -> bool:
    return bool(np.any(np.isnan(values)))


def check_row_sums(pattern: np.ndarray) -> Check:
    """Every row of attention weights sums to 1. # pattern [..., pos, key_pos]"""
    name = "Attention rows sum to 1"
    if _has_nan(pattern):
        return Check(name, FAIL, "NaN in the attention weights: the rows have no sum.")
    worst = float(np.max(np.abs(pattern.sum(axis=-1) - 1.0)))
    if worst <= ROW_SUM_TOL:
        return Check(name, PASS, f"every row sums to 1 (largest deviation {number(worst, 2, significant=True)}).")
    return Check(name, FAIL, f"a row's sum is off by {number(worst, significant=True)}.")


def check_future_zero(pattern: np.ndarray, causal: bool) -> Check:
    """Weights on later positions are exactly 0. # pattern [..., pos, key_pos]"""
    name = "Weights on future positions are exactly 0"
    n = pattern.shape[-1]
    if n < 2:
        return Check(name, NOT_APPLICABLE, "one position has no future.")
    future = pattern[..., ~ops.causal_mask(n)]
    if _has_nan(future):
        return Check(name, FAIL, "NaN in the attention weights: cannot show the future is ignored.")
    largest = float(np.max(future))
    if largest == 0.0:
        how = "the causal mask sets them to −∞ before the softmax" if causal else "they happen to be 0"
        return Check(name, PASS, f"all {future.size} future weights are exactly 0 ({how}).")
    why = "the causal mask is off, so each position also reads later ones" if not causal else "the mask leaks"
    return Check(name, FAIL, f"future weights reach {number(largest)}: {why}.")


def check_normalised(rows: np.ndarray, norm: str, label: str, inputs: tuple[np.ndarray, ...] = (),
                     gain: np.ndarray | None = None, bias: np.ndarray | None = None) -> Check:
    """RMSNorm: every row has RMS 1. LayerNorm: mean 0 and std 1. Both before the norm's gain and bias: a gain
    and bias other than 1 and 0 (trained ones) are taken off the rows first.

    `inputs` are the arrays the norm's input was made from, to say where a NaN came from.
    # rows [..., d_model], gain and bias [d_model]
    """
    learned = ""
    if (gain is not None and np.any(gain != 1.0)) or (bias is not None and np.any(bias != 0.0)):
        with np.errstate(all="ignore"):  # a gain of exactly 0 leaves nothing to check: NaN, said below
            rows = (rows - (0.0 if bias is None else bias)) / (1.0 if gain is None else gain)
        learned = " (its learned gain taken off)" if bias is None else " (its learned gain and bias taken off)"
    if _has_nan(rows):
        why = ("NaN reached this norm's input from an earlier step." if any(_has_nan(a) for a in inputs) else
               "NaN: a row of zeros was divided by √(0 + eps) with eps = 0.")
        return Check(f"{label}: rows normalised", FAIL, why)
    rms = np.sqrt(np.mean(rows * rows, axis=-1))
    if norm == "rmsnorm":
        name = f"{label}: every row has RMS 1"
        worst = float(np.max(np.abs(rms - 1.0)))
        status = PASS if worst <= NORM_TOL else FAIL
        return Check(name, status, f"row RMS from {number(rms.min(), 4)} to {number(rms.max(), 4)}{learned}.")
    name = f"{label}: every row has mean 0 and std 1"
    mean = np.mean(rows, axis=-1)
    std = np.std(rows, axis=-1)
    worst = max(float(np.max(np.abs(mean))), float(np.max(np.abs(std - 1.0))))
    status = PASS if worst <= NORM_TOL else FAIL
    return Check(name, status, f"row means within ±{number(np.max(np.abs(mean)), 2, significant=True)}, "
                               f"std from {number(std.min(), 4)} to {number(std.max(), 4)}{learned}.")


def _identity_reasons(placement: str, residual: str, which: str) -> list[str]:
    reasons = []
    if residual == "replace":
        reasons.append(f"residual = replace: the stream is thrown away and {which} is the update alone")
    if placement == "post":
        reasons.append(f"post-norm: the sum is normalised before it becomes {which}")
    return reasons


def check_identity(stream: np.ndarray, update: np.ndarray, result: np.ndarray, placement: str, residual: str,
                   names: tuple[str, str, str]) -> Check:
    """result == stream + update, exactly as the lesson's residual line says. # [..., pos, d_model] each"""
    before, add, after = names
    name = f"{after} == {before} + {add}"
    if _has_nan(result):
        return Check(name, FAIL, "NaN: the sum cannot be compared.")
    gap = float(np.max(np.abs(result - (stream + update))))
    if gap <= IDENTITY_TOL * max(1.0, float(np.max(np.abs(result)))):
        return Check(name, PASS, "the residual addition holds exactly (pre-norm, add).")
    reasons = _identity_reasons(placement, residual, after) or ["the block does not add its update"]
    return Check(name, FAIL, f"off by up to {number(gap, significant=True)}; " + "; ".join(reasons) + ".")


def check_stream_shape(trace: Trace) -> Check:
    """The block's output has the input's shape [B, T, d]."""
    name = "The residual stream keeps its shape"
    shape_in = trace["blocks.0.resid_pre"].shape
    shape_out = trace.output.shape
    status = PASS if shape_in == shape_out else FAIL
    return Check(name, status, f"input {list(shape_in)}, output {list(shape_out)}.")


def _gain_bias(trace: Trace, prefix: str) -> tuple[np.ndarray | None, np.ndarray | None]:
    return trace.params.get(prefix + "g"), trace.params.get(prefix + "b")


def invariants(trace: Trace) -> list[Check]:
    """What holds in this trace now: each check computed from the numbers of block 0."""
    c = trace.config
    p = "blocks.0."
    pattern = trace[p + "attn.pattern"]
    if c.placement == "pre":  # each norm reads the stream as it stands
        into_1, into_2 = (trace[p + "resid_pre"],), (trace[p + "resid_mid"],)
    else:  # each norm reads the stream and the update before they are combined
        into_1 = (trace[p + "resid_pre"], trace[p + "attn_out"])
        into_2 = (trace[p + "resid_mid"], trace[p + "mlp_out"])
    return [
        check_stream_shape(trace),
        check_row_sums(pattern),
        check_future_zero(pattern, c.causal),
        check_normalised(trace[p + "ln1.normalized"], c.norm, "Norm 1", into_1, *_gain_bias(trace, p + "ln1.")),
        check_normalised(trace[p + "ln2.normalized"], c.norm, "Norm 2", into_2, *_gain_bias(trace, p + "ln2.")),
        check_identity(trace[p + "resid_pre"], trace[p + "attn_out"], trace[p + "resid_mid"], c.placement,
                       c.residual, ("resid_pre", "attn_out", "resid_mid")),
        check_identity(trace[p + "resid_mid"], trace[p + "mlp_out"], trace[p + "resid_post"], c.placement,
                       c.residual, ("resid_mid", "mlp_out", "resid_post")),
    ]


# --- causal safety ---------------------------------------------------------------------------


@dataclass(frozen=True)
class CausalVerdict:
    """The lesson's causal assert, made visible: PASS, FAIL or nothing to test."""

    status: str  # PASS, FAIL or NOT_APPLICABLE
    badge: str  # the badge's words
    text: str  # what was measured
    leaked: tuple[int, ...]  # earlier positions whose output changed


def change_per_position(clean: np.ndarray, corrupted: np.ndarray) -> np.ndarray:
    """max over features of |corrupted − clean|, per position. # [pos, d_model] x2 -> [pos]"""
    return np.max(np.abs(corrupted - clean), axis=-1)


def causal_verdict(delta: np.ndarray, corrupt: int) -> CausalVerdict:
    """PASS when every position before `corrupt` has an output change of exactly 0.

    delta: |Δ output| per position, [pos] or [pos, d_model]. NaN counts as a failure: it cannot be shown to be 0.
    """
    per_pos = np.asarray(delta, dtype=float)
    if per_pos.ndim == 2:
        per_pos = np.max(per_pos, axis=-1) if per_pos.shape[-1] else np.zeros(per_pos.shape[0])
    if not 0 <= corrupt < per_pos.shape[0]:
        raise ValueError(f"corrupt position {corrupt} is outside 0 … {per_pos.shape[0] - 1}")
    if corrupt == 0:
        return CausalVerdict(NOT_APPLICABLE, "NOTHING TO TEST",
                             "No position comes before position 0; corrupt a later position to test the mask.", ())
    earlier = per_pos[:corrupt]
    leaked = tuple(int(i) for i in np.flatnonzero(~(earlier == 0.0)))  # NaN is not 0
    if not leaked:
        earlier_text = {1: "Position 0 is", 2: "Positions 0 and 1 are"}.get(corrupt, f"Positions 0 … {corrupt - 1} are")
        return CausalVerdict(PASS, "PASS",
                             f"{earlier_text} exactly unchanged: the future cannot reach them.", ())
    listed = ", ".join(str(i) for i in leaked)
    if np.any(np.isnan(earlier)):
        size = "NaN"
    else:
        size = f"up to {number(np.max(earlier), significant=True)}"
    return CausalVerdict(FAIL, "FAIL",
                         f"Position(s) {listed} changed ({size}) although they come before position {corrupt}: "
                         "the future leaks into earlier outputs.", leaked)


# --- the gate/value split ----------------------------------------------------------------------


@dataclass(frozen=True)
class SplitResult:
    """Shapes met on the way through SwiGLU, and the error that stopped it (empty when it ran)."""

    shapes: tuple[tuple[str, tuple[int, ...]], ...]
    error: str
    out: np.ndarray | None


def _shape(shape: tuple[int, ...]) -> str:
    return "[" + ", ".join(str(n) for n in shape) + "]"


def swiglu_split(x: np.ndarray, W_gate: np.ndarray, W_value: np.ndarray, W_down: np.ndarray,
                 wrong: bool = False) -> SplitResult:
    """SwiGLU from one combined projection: x_proj = x [W_gate | W_value], split in two, SiLU(gate) ⊙ val, W_down.

    The right split halves the feature axis (chunk(2, dim=-1)); the wrong one halves the position
    axis (chunk(2, dim=1)), the lesson's "chunk dimension incorrect" failure. Shapes are checked
    before each step, so a mismatch comes back as a sentence naming the shapes and the axis that
    does not fit, never as NumPy's own message.
    # [..., pos, d_model] -> [..., pos, d_model]
    """
    x_proj = x @ np.concatenate([W_gate, W_value], axis=-1)  # [..., pos, 2·d_mlp]
    shapes: list[tuple[str, tuple[int, ...]]] = [("x_proj", x_proj.shape)]
    if wrong:
        gate, value = np.array_split(x_proj, 2, axis=-2)  # halves the positions: the bug
    else:
        gate, value = np.split(x_proj, 2, axis=-1)
    shapes += [("gate", gate.shape), ("val", value.shape)]
    halved = (f" The split halved the positions ({x_proj.shape[-2]} into {gate.shape[-2]} and {value.shape[-2]}) "
              f"instead of the features ({x_proj.shape[-1]} into two halves of {x_proj.shape[-1] // 2}).")
    try:
        product = np.broadcast_shapes(gate.shape, value.shape)
    except ValueError:
        return SplitResult(tuple(shapes), (
            f"shape mismatch at SiLU(gate) ⊙ value: the gate is {_shape(gate.shape)} and the value "
            f"{_shape(value.shape)}, so their position axes ({gate.shape[-2]} and {value.shape[-2]}) do not "
            "match and the two cannot be multiplied entry by entry." + halved), None)
    hidden = ops.silu(gate) * value  # a value of one position is silently repeated (NumPy broadcasting)
    shapes.append(("x_swish", product))
    if hidden.shape[-1] != W_down.shape[0]:
        return SplitResult(tuple(shapes), (
            f"shape mismatch at the output projection: SiLU(gate) ⊙ value is {_shape(hidden.shape)}, whose last "
            f"axis (the features) has {hidden.shape[-1]} entries, but W_out is {_shape(W_down.shape)} and needs "
            f"{W_down.shape[0]}." + halved), None)
    out = hidden @ W_down
    shapes.append(("mlp_out", out.shape))
    return SplitResult(tuple(shapes), "", out)
