"""The trace as data: the JSON export contract, a tidy CSV, and a readable text table."""

from __future__ import annotations

import csv
import io
import itertools
import json
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from blocktrace.explorables.engine.config import BlockConfig
from blocktrace.explorables.engine.forward import Trace
from blocktrace.explorables.engine.params import Params
from blocktrace.explorables.engine.stages import Stage

__all__ = ["CSV_COLUMNS", "model_to_dict", "to_csv", "to_dict", "to_json", "to_table"]

EXPORT_VERSION = 1
# Column names used in the CSV for each kind of axis.
_AXIS_COLUMNS = {"batch": "batch", "n_heads": "head", "pos": "pos", "key_pos": "key_pos"}


def _jsonable(values: np.ndarray) -> Any:
    """Nested lists; −∞ (masked scores) and NaN become null, since JSON has no such numbers."""
    if values.ndim == 0:
        v = float(values)
        return v if math.isfinite(v) else None
    return [_jsonable(v) for v in values]


def to_dict(trace: Trace) -> dict[str, Any]:
    """The export contract: tokens, config, params and stages in forward order.

    {"version", "tokens": [...], "config": {every BlockConfig field},
     "params": {name: nested list}, "stages": [{"key", "label", "description", "axes", "shape", "values"}]}
    Masked attention scores (−∞) and NaN are exported as null.
    """
    return {
        "version": EXPORT_VERSION,
        "tokens": list(trace.tokens),
        "config": trace.config.as_dict(),
        "params": {name: _jsonable(value) for name, value in trace.params.items()},
        "stages": [
            {
                "key": s.key,
                "label": s.label,
                "description": s.description,
                "axes": list(s.axes),
                "shape": list(s.values.shape),
                "values": _jsonable(s.values),
            }
            for s in trace
        ],
    }


def model_to_dict(config: BlockConfig, params: Params, vocab: Sequence[str]) -> dict[str, Any]:
    """A trained model of language_model.py: its config, the name of each token and every parameter.

    {"version", "config": {every BlockConfig field}, "vocab": [...], "params": {name: nested list}}
    """
    return {"version": EXPORT_VERSION, "config": config.as_dict(), "vocab": list(vocab),
            "params": {name: _jsonable(value) for name, value in params.items()}}


def to_json(trace: Trace, indent: int | None = 1) -> str:
    return json.dumps(to_dict(trace), indent=indent, ensure_ascii=False, allow_nan=False)


CSV_COLUMNS = ["key", "label", "batch", "head", "pos", "token", "key_pos", "component", "value"]


def to_csv(trace: Trace) -> str:
    """One row per number: stage key and label, its indices by axis name, and the value."""
    out = io.StringIO()
    writer = csv.DictWriter(out, CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for stage in trace:
        axes = stage.axes
        for index in itertools.product(*(range(n) for n in stage.values.shape)):
            row: dict[str, Any] = {"key": stage.key, "label": stage.label}
            for axis, i in zip(axes, index, strict=True):
                row[_AXIS_COLUMNS.get(axis, "component")] = i
            if "pos" in row:
                row["token"] = trace.tokens[row["pos"]]
            v = float(stage.values[index])
            row["value"] = repr(v) if math.isfinite(v) else ("-inf" if v == -math.inf else str(v))
            writer.writerow(row)
    return out.getvalue()


def _fmt(v: float) -> str:
    if not math.isfinite(v):
        return f"{v!s:>8}"
    return f"{0.0 if round(v, 3) == 0 else v:8.3f}"  # no "-0.000"


def _row_label(stage: Stage, trace: Trace, index: tuple[int, ...]) -> str:
    names = dict(zip(stage.axes, index, strict=False))
    parts = []
    if "batch" in names:
        parts.append(f"b{names['batch']}")
    if "n_heads" in names:
        parts.append(f"h{names['n_heads']}")
    if "pos" in names:
        parts.append(trace.tokens[names["pos"]])
    return " ".join(parts)


def to_table(trace: Trace, max_columns: int = 8, detail: bool = False) -> str:
    """A text table like the lessons' stage tables: one line per token per stage, 3 decimals.

    Rows of the residual stream end with their norm ‖·‖. Query/key/value/score stages are
    left out unless detail is true; attention weights are always shown.
    """
    lines = []
    skipped = {"attn.q", "attn.k", "attn.v", "attn.scores"}
    label_width = max(len(s.label) for s in trace) + 2
    for stage in trace:
        if stage.local_key in skipped and not detail:
            continue
        title = stage.label
        if stage.layer is not None and trace.config.n_layers > 1:
            title = f"Block {stage.layer + 1} · {title}"
        lines.append(f"{title}  [{stage.key}]")
        values = stage.values
        lead = values.shape[:-1]
        for index in itertools.product(*(range(n) for n in lead)):
            row = values[index]
            shown = " ".join(_fmt(float(v)) for v in row[:max_columns])
            more = f"  … (+{row.size - max_columns})" if row.size > max_columns else ""
            norm = ""
            if stage.axes[-1] in ("d_model",):
                norm = f"   ‖·‖ {float(np.linalg.norm(row)):.3f}"
            lines.append(f"  {_row_label(stage, trace, index):<{min(label_width, 14)}}{shown}{more}{norm}")
    return "\n".join(lines) + "\n"
