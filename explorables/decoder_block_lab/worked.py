"""The lesson's seed-42 worked example: the committed PyTorch fixtures beside this engine's numbers.

The fixture is lesson_seed_42.json beside this module: the case "lesson-seed-42" of the PyTorch
reference (tests/fixtures/reference.json, where a test keeps the two equal). The lesson's weights
map onto the engine as the parity test does: W_gate = W_swiglu[:, :16], W_value = W_swiglu[:, 16:],
W_down = W_mlp_out, W_O = identity, unit gains, eps 1e-6, no mask.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np

from blocktrace.explorables.components.numbers import number
from blocktrace.explorables.engine import BlockConfig, Trace, forward

__all__ = ["ATOL", "FIXTURE", "RTOL", "TOLERANCE_TEXT", "WorkedExample", "WorkedRow", "load_tensors", "worked_example"]

FIXTURE = Path(__file__).resolve().with_name("lesson_seed_42.json")  # package data, installed with the module
CASE = "lesson-seed-42"
# The lesson ran in float32 (about 7 significant digits), the engine runs in float64. A number counts as
# matching when |engine − PyTorch| ≤ ATOL + RTOL · |PyTorch|, as np.allclose has it: relative, because the
# values reach about 52 and float32's rounding grows with them; ATOL for entries near 0 that float32 computed
# from much larger terms.
RTOL = 1e-5
ATOL = 1e-5
TOLERANCE_TEXT = (f"|lab − PyTorch| ≤ {number(ATOL, significant=True)} + {number(RTOL, significant=True)} "
                  "· |PyTorch|")

# Lesson variable -> (step in the lesson's words, engine stage). Attention stages carry a head axis.
STAGES = {
    "X": ("Input", "blocks.0.resid_pre"),
    "X_norm": ("After RMSNorm (attention)", "blocks.0.ln1.normalized"),
    "Q": ("Queries", "blocks.0.attn.q"),
    "K": ("Keys", "blocks.0.attn.k"),
    "V": ("Values", "blocks.0.attn.v"),
    "scores": ("Scores Q Kᵀ / √d", "blocks.0.attn.scores"),
    "attn_weights": ("Attention weights", "blocks.0.attn.pattern"),
    "attn_out": ("Attention output", "blocks.0.attn_out"),
    "X1": ("After residual 1", "blocks.0.resid_mid"),
    "X1_norm": ("After RMSNorm (MLP)", "blocks.0.ln2.normalized"),
    "x_proj": ("SwiGLU projection", "blocks.0.mlp.gate | blocks.0.mlp.value"),
    "gate": ("Gate half", "blocks.0.mlp.gate"),
    "val": ("Value half", "blocks.0.mlp.value"),
    "x_swish": ("After gate · value", "blocks.0.mlp.hidden"),
    "mlp_out": ("MLP output", "blocks.0.mlp_out"),
    "X2": ("Final output", "blocks.0.resid_post"),
}


@dataclass(frozen=True)
class WorkedRow:
    name: str  # the lesson's variable
    step: str
    key: str  # the engine's stage key(s)
    engine: np.ndarray  # without batch or head axis: [pos, ...]
    reference: np.ndarray

    @property
    def max_diff(self) -> float:
        if self.engine.shape != self.reference.shape:
            return float("inf")
        return float(np.max(np.abs(self.engine - self.reference)))

    @property
    def matches(self) -> bool:
        """Every number within ATOL + RTOL · |reference| of the reference (np.allclose); NaN never matches."""
        return self.engine.shape == self.reference.shape and bool(
            np.allclose(self.engine, self.reference, rtol=RTOL, atol=ATOL))


@dataclass
class WorkedExample:
    """Every intermediate of the lesson's example, ours and the fixture's; or why it could not be shown."""

    rows: list[WorkedRow] = field(default_factory=list)
    error: str = ""
    trace: Trace | None = None

    @property
    def all_match(self) -> bool:
        return bool(self.rows) and all(r.matches for r in self.rows)

    def row(self, name: str) -> WorkedRow:
        return next(r for r in self.rows if r.name == name)

    @cached_property
    def digest(self) -> bytes:
        """Everything the panel shows of it, digested: equal examples, equal digests (a shared cache's key)."""
        found = hashlib.blake2b(self.error.encode(), digest_size=16)
        for r in self.rows:
            found.update("\0".join((r.name, r.step, r.key, str(r.engine.shape), str(r.reference.shape), "")).encode())
            for values in (r.engine, r.reference):
                found.update(np.ascontiguousarray(values, dtype=float).tobytes())
        return found.digest()


def lesson_inputs(tensors: dict[str, np.ndarray]) -> tuple[BlockConfig, dict[str, np.ndarray]]:
    """The lesson's weights in the engine's terms: W_O = I, unit gains, SwiGLU split gate-first."""
    d = tensors["W_Q"].shape[0]
    d_mlp = tensors["W_mlp_out"].shape[0]
    config = BlockConfig(d_model=d, n_heads=1, d_mlp=d_mlp, n_layers=1, norm="rmsnorm", placement="pre",
                         mlp="swiglu", residual="add", causal=False, positions=False, eps=1e-6)
    params = {
        "blocks.0.ln1.g": np.ones(d),
        "blocks.0.ln2.g": np.ones(d),
        "blocks.0.attn.W_Q": tensors["W_Q"],
        "blocks.0.attn.W_K": tensors["W_K"],
        "blocks.0.attn.W_V": tensors["W_V"],
        "blocks.0.attn.W_O": np.eye(d),
        "blocks.0.mlp.W_gate": tensors["W_swiglu"][:, :d_mlp],
        "blocks.0.mlp.W_value": tensors["W_swiglu"][:, d_mlp:],
        "blocks.0.mlp.W_down": tensors["W_mlp_out"],
    }
    return config, params


def load_tensors(path: Path = FIXTURE) -> dict[str, np.ndarray]:
    """The lesson case's tensors; OSError or ValueError (incl. KeyError) when the file is missing or not as expected."""
    data = json.loads(path.read_text(encoding="utf-8"))
    case = next((c for c in data["cases"] if c.get("name") == CASE), None)
    if case is None:
        raise ValueError(f"the fixture file has no case named {CASE!r}")
    return {name: np.asarray(values, dtype=float) for name, values in case["tensors"].items()}


def worked_example(path: Path = FIXTURE) -> WorkedExample:
    """Run the engine on the lesson's inputs and pair every intermediate with the fixture's value."""
    try:
        tensors = load_tensors(path)
        config, params = lesson_inputs(tensors)
        trace = forward(config, params, tensors["X"][0], [f"pos {i}" for i in range(tensors["X"].shape[1])])
    except FileNotFoundError:
        return WorkedExample(error=f"The lesson's fixtures were not found ({path.name} is missing), so the "
                                   "worked example cannot be shown here.")
    except (OSError, ValueError, KeyError, TypeError, IndexError) as err:
        return WorkedExample(error=f"The lesson's fixtures could not be read: {err}")
    rows = []
    for name, (step, key) in STAGES.items():
        if name == "x_proj":
            ours = np.concatenate([trace["blocks.0.mlp.gate"], trace["blocks.0.mlp.value"]], axis=-1)
        else:
            ours = trace[key]
            if key.startswith("blocks.0.attn."):
                ours = ours[0]  # the single head
        rows.append(WorkedRow(name, step, key, ours, tensors[name][0]))
    return WorkedExample(rows=rows, trace=trace)
