"""What the floor diagram shows of the block trace: its eight stages, their norms, the inspected one."""

from __future__ import annotations

from blocktrace.explorables.components.floor_model import FloorSpec, Shown, shown, spec_from
from blocktrace.explorables.components.numbers import norm, number, words_of_number
from blocktrace.explorables.components.shared_cache import SharedCache
from blocktrace.explorables.engine import Trace
from blocktrace.explorables.transformer_block_trace.state import ROW_KEYS, TraceState

__all__ = ["VIEWS", "diagram_view"]

MLP_NAMES = {"swiglu": "SwiGLU", "gelu": "GELU", "relu": "ReLU"}
NORM_NAMES = {"rmsnorm": "RMSNorm", "layernorm": "LayerNorm"}


def floor_spec(trace: Trace) -> FloorSpec:
    """The eight rows of the stage table as the floor they are: one pre-norm block, no mask, no positions."""
    c = trace.config
    stages = [(trace.stage(key).local_key, key, trace.stage(key).label) for key in ROW_KEYS]
    return spec_from(stages, placement=c.placement, residual=c.residual, mlp_title=f"MLP ({MLP_NAMES[c.mlp]})")


def caption(state: TraceState) -> str:
    c = state.trace.config
    mode = "each update replaces the stream (broken)" if c.residual == "replace" else "residuals added"
    head = f"One pre-norm block, {NORM_NAMES[c.norm]}, {mode}."
    if not state.prediction.unlocked:
        return f"{head} The norms appear here once you commit your prediction."
    return f"{head} Each card shows its stage's norm ‖·‖; select a stage to inspect it."


# One view per setting and gate state, shared by the sessions of a process as the renderings are (a Shown
# is never changed: the component copies what it sends).
VIEWS: SharedCache[Shown] = SharedCache(256)


def diagram_view(state: TraceState) -> Shown:
    """The diagram for the state as it is: the inspected stage selected; norms only once unlocked."""
    return VIEWS.get((state.settings(), state.prediction.unlocked), lambda: _view(state))


def _view(state: TraceState) -> Shown:
    trace = state.trace
    locked = not state.prediction.unlocked
    values, alerts = None, None
    if not locked:
        values = {}
        for key in ROW_KEYS:
            text = f"‖·‖ {number(norm(trace[key][0]))}"
            values[key] = (text, words_of_number(text))
        lost = state.lost_at()
        alerts = {lost: "input lost"} if lost else {}
    return shown(floor_spec(trace), state.inspect, values, locked, alerts, caption(state))
