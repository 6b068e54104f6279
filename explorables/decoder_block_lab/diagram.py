"""What the floor diagram shows of the decoder lab: block 0 as configured, every stage's RMS, failing checks.

Every stage the stage table lists is a node (attention's and the MLP's inner stages as chips inside their
sublayer). The inspected stage is selected; a stage where one of the invariants fails carries a tag, the
first of them in forward order "first failure".
"""

from __future__ import annotations

from blocktrace.explorables.components.floor_model import FloorSpec, Shown, shown, spec_from
from blocktrace.explorables.components.numbers import rms_card
from blocktrace.explorables.components.shared_cache import SharedCache
from blocktrace.explorables.decoder_block_lab import checks
from blocktrace.explorables.decoder_block_lab.state import LabState
from blocktrace.explorables.engine import Trace
from blocktrace.explorables.engine.forward import block_keys

__all__ = ["VIEWS", "diagram_view"]

PREFIX = "blocks.0."
MLP_NAMES = {"swiglu": "SwiGLU", "gelu": "GELU", "relu": "ReLU"}
NORM_NAMES = {"rmsnorm": "RMSNorm", "layernorm": "LayerNorm"}
FIRST_FAILURE, FAILS = "✗ first failure", "✗ fails"


def check_stage(name: str) -> str | None:
    """The stage (local key) an invariant is about, by its name (checks.invariants and LabState.invariants)."""
    if name.startswith("Norm 1"):
        return "ln1.normalized"
    if name.startswith("Norm 2"):
        return "ln2.normalized"
    if name.startswith("resid_mid =="):
        return "resid_mid"
    if name.startswith("resid_post ==") or name == "The residual stream keeps its shape":
        return "resid_post"
    if name in ("Attention rows sum to 1", "Weights on future positions are exactly 0"):
        return "attn.pattern"
    if name.startswith("SwiGLU split"):
        return "mlp.hidden"
    return None


def floor_spec(trace: Trace) -> FloorSpec:
    c = trace.config
    stages = [(local, PREFIX + local, trace.stage(PREFIX + local).label) for local in block_keys(c)]
    return spec_from(stages, placement=c.placement, residual=c.residual, causal=c.causal,
                     mlp_title=f"MLP ({MLP_NAMES[c.mlp]})", end_label="block output")


def caption(state: LabState) -> str:
    c = state.trace.config
    mode = "each update replaces the stream (broken)" if c.residual == "replace" else "residuals added"
    head = (f"Block 0 as configured: {c.placement}-norm, {NORM_NAMES[c.norm]}, {MLP_NAMES[c.mlp]}, {mode}, "
            f"causal mask {'on' if c.causal else 'off'}.")
    if not state.prediction.unlocked:
        return f"{head} Each stage's RMS appears here once you commit your prediction."
    return f"{head} Each card shows its stage's RMS, as the stage table does; select a stage to mark it there."


# One view per run, inspected stage and gate state, shared by the sessions of a process (a Shown is never changed:
# the component copies what it sends).
VIEWS: SharedCache[Shown] = SharedCache(256)


def diagram_view(state: LabState) -> Shown:
    """The diagram for the state as it is: the inspected stage selected; RMS and failing checks once unlocked."""
    return VIEWS.get((state.run_key(), state.inspect, state.prediction.unlocked), lambda: _view(state))


def _view(state: LabState) -> Shown:
    trace = state.trace
    spec = floor_spec(trace)
    locked = not state.prediction.unlocked
    values, alerts = None, None
    if not locked:
        failing: dict[str, list[str]] = {}
        for check in state.invariants():
            stage = check_stage(check.name)
            if check.status == checks.FAIL and stage is not None:
                failing.setdefault(PREFIX + stage, []).append(f"{check.name}: {check.detail}")
        values, alerts = {}, {}
        for s in spec.stages:
            text, said = rms_card(trace[s.key])
            if s.key in failing:
                said += ". Check fails: " + " ".join(failing[s.key])
                alerts[s.key] = FIRST_FAILURE if not alerts else FAILS
            values[s.key] = (text, said)
    return shown(spec, PREFIX + state.inspect, values, locked, alerts, caption(state))
