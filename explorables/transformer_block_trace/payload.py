"""The block trace as one compact payload for the browser: numbers and short strings, no HTML.

A payload is two parts, set together in one batch so one change is one message:

- `meta`: a short JSON text: the controls' values, the stage rows (key, label, short name, width), the
  announcement, where the input was lost, the verdict line, each chart's text alternative (describe.py); and the
  offsets of each block of numbers;
- `values`: every number the page draws, one float64 array (Bokeh sends a NumPy array as a binary buffer,
  not as a JSON list): the eight stage vectors one after another, the norms of this run, of the default
  block and of their difference, the SwiGLU parts.

The part that depends only on the settings is shared by the sessions of a process (SharedCache); the array is
read-only. While the prediction gate is locked the payload holds no value of the trace at all.
"""

from __future__ import annotations

import numpy as np

from blocktrace.explorables.components.drawn_view import json_text
from blocktrace.explorables.components.drawn_view.values import Values
from blocktrace.explorables.components.numbers import norm
from blocktrace.explorables.components.shared_cache import SharedCache
from blocktrace.explorables.engine import ops
from blocktrace.explorables.transformer_block_trace import describe
from blocktrace.explorables.transformer_block_trace.quantities import SHORT
from blocktrace.explorables.transformer_block_trace.state import CORRECT_PREDICTION, ROW_KEYS, TraceState

__all__ = ["EMPTY", "LOCKED_NOTE", "PAYLOADS", "payload", "trace_part"]

EMPTY = np.zeros(0)
LOCKED_NOTE = ("The trace appears here once you commit your prediction: the stage table, the norm at each stage, "
               "each stage's components and the SwiGLU gates. Predict first, then run the block.")
PAYLOADS: SharedCache[tuple[dict, np.ndarray]] = SharedCache(256)


def trace_part(state: TraceState) -> tuple[dict, np.ndarray]:
    """What the settings decide: (meta of the trace, its numbers), shared by the sessions with these settings."""
    return PAYLOADS.get(state.settings(), lambda: _trace_part(state))


def _trace_part(state: TraceState) -> tuple[dict, np.ndarray]:
    trace, base = state.trace, state.baseline
    numbers = Values()
    offsets: dict[str, int] = {}

    def put(name: str, array: np.ndarray) -> None:
        offsets[name] = numbers.put(array)

    rows = []
    for key in ROW_KEYS:
        vector = trace[key][0]
        rows.append([key, trace.stage(key).label, SHORT[key], int(vector.size)])
        put(key, vector)
    put("norm", [norm(trace[k][0]) for k in ROW_KEYS])
    put("norm_base", [norm(base[k][0]) for k in ROW_KEYS])
    put("norm_diff", [norm(trace[k][0] - base[k][0]) for k in ROW_KEYS])
    gate, value = trace["blocks.0.mlp.gate"][0], trace["blocks.0.mlp.value"][0]
    put("swiglu", np.stack([gate, ops.silu(gate), value, ops.silu(gate) * value]))
    values = numbers.array()
    meta = {
        "rows": rows, "offsets": offsets, "d_mlp": int(gate.size), "lost": state.lost_at(),
        "announce": describe.announcement(state),
        "words": {"norm": describe.norm_sentences(state), "comp": describe.component_sentences(state),
                  "swiglu": describe.swiglu_sentences(state)},
    }
    return meta, values


def payload(state: TraceState, controls: dict, ack: int = 0) -> tuple[str, np.ndarray]:
    """(meta as JSON text, values) for this session now: the trace's part once unlocked, its own part always.
    `ack` is the number of the browser's last change answered."""
    p = state.prediction
    error = (f"Could not use this vector: {state.input_error}. The last good vector is still traced."
             if state.input_error else "")
    own = {"controls": controls, "ack": ack, "locked": not p.unlocked, "error": error, "error_field": "input_text",
           "verdict": _verdict(state)}
    if not p.unlocked:
        return json_text({**own, "note": LOCKED_NOTE, "announce": "Commit your prediction to run the block."}), EMPTY
    meta, values = trace_part(state)
    return json_text({**meta, **own}), values


def _verdict(state: TraceState) -> list:
    """[text, kind] of the line under the announcement: kind "" (plain), "ok" or "bad"."""
    p = state.prediction
    if not p.committed:
        return ["", ""]
    said = p.choices[p.choice]
    if not state.judged:
        return [f"You predicted: {said} Now test it: press “Zero updates”, then tick “Replace instead of add "
                "residuals”, and compare the output with the input.", ""]
    right = p.choice == CORRECT_PREDICTION
    return [f"You predicted: {said} (" + ("your prediction matches what you saw" if right else
                                            "what you saw differs: read the output row of each run again") + ")",
            "ok" if right else "bad"]
