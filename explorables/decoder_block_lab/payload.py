"""What the browser draws of the decoder lab (decoder_lab.js): one payload per change, numbers and short strings.

meta (JSON): the controls' values, bounds and which are disabled, the messages beside fields, then per panel its
tables (cells as text, a number's place marked and read from `values`), verdicts, sentences and each chart's text
alternative, with offsets into `values` (float64): the stage table's numbers, the attention weights per head, the
norms' bars, the activation curves and dots, the causal test's |Δ output|, the depth curves.

The prediction's question is answered by the causal test, the invariants and the attention weights: while the
prediction is not committed none of them leaves the server (their places carry `held`, the line saying what will
appear), nor the break-it symptom of the mask. The shapes, norms, activations, depth and worked example do not
answer it and are drawn from the start, as before the port.

The results (every panel's part) depend only on the settings and the gate: they are shared by the sessions of a
process (SharedCache) as JSON text and a read-only array, and a session's own part (its controls, messages and
the number of its last change) is joined to that text.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable

import numpy as np

from blocktrace.explorables.components.drawn_view import json_text
from blocktrace.explorables.components.drawn_view.values import Values
from blocktrace.explorables.components.shared_cache import SharedCache
from blocktrace.explorables.decoder_block_lab import checks, describe, plots, tables
from blocktrace.explorables.decoder_block_lab.shapes import exercise_answer
from blocktrace.explorables.decoder_block_lab.state import DEPTH_MAX_D, VARIANTS, LabState
from blocktrace.explorables.decoder_block_lab.tables import VARIANT_NAMES

__all__ = ["BREAK_MIRRORS", "CAUSAL_HELD", "CHECKS_HELD", "HEADS_HELD", "RESULTS", "SHAPED", "payload", "results",
           "table_part"]

log = logging.getLogger(__name__)

CHECKS_HELD = ("The invariants and the attention weights appear here once you commit your prediction: they would "
               "give the answer away.")
HEADS_HELD = "The attention heatmaps, one per head, appear here once you commit your prediction."
CAUSAL_HELD = ("The result appears once your prediction is committed, so that it cannot give the answer away: a "
               "verdict, a table of the change per position and a map of |Δ output| per position and feature.")
# The Break-it switches that show and set one of the design choices: name -> (parameter, value when ticked, not).
BREAK_MIRRORS = {"break_residual": ("residual", "replace", "add"), "break_post": ("placement", "post", "pre"),
                 "break_mask": ("causal", False, True)}
SHAPED = ["d", "expansion", "norm", "mlp", "heads"]  # fixed by a trained floor's weights
STATUS = {checks.PASS: "pass", checks.FAIL: "fail", checks.NOT_APPLICABLE: "na"}
SYMBOL = {checks.PASS: "✓", checks.FAIL: "✗", checks.NOT_APPLICABLE: "–"}

Put = Callable[[object], int]
# The results as JSON text and numbers, per setting and gate, at most 32 MB of them (a setting at d = 512 sends
# forty thousand numbers, at d = 8 a few hundred).
RESULTS: SharedCache[tuple[str, np.ndarray]] = SharedCache(
    256, limit=32_000_000, weigh=lambda found: len(found[0]) + found[1].nbytes)


def table_part(found: tables.Table, put: Put) -> dict:
    """A table for draw.js: each row's words as they are, its numbers' places (`num`) read from values at `at`."""
    caption, header, body, css = found
    rows = []
    for label, cells, opts in body:
        words: list = []
        num, numbers = [], []
        for i, v in enumerate(cells):
            if isinstance(v, (int, float, np.floating)) and not isinstance(v, bool):
                num.append(i)
                numbers.append(float(v))
                words.append(None)
            else:
                words.append(v)
        row = {"label": label, "cells": words}
        if num:
            row.update(num=num, at=put(numbers))
        for key, name in (("plain", "plain"), ("note", "note"), ("aside", "aside"), ("class", "className"),
                          ("current", "current")):
            if opts.get(key):
                row[name] = list(opts[key]) if key == "plain" else opts[key]
        rows.append(row)
    return {"caption": caption, "header": list(header), "rows": rows, "cls": css}


def _heads(s: LabState, put: Put) -> list[dict]:
    return [{"title": f"Attention weights, head {h}", "pattern": put(plots.head_pattern(s, h)),
             "words": describe.head_sentences(s, h)} for h in range(s.heads)]


def _norms(s: LabState, put: Put) -> dict:
    rows = s.normalised()
    bars = put(np.stack([rows[name] for name in plots.NORM_SERIES]))  # NaN stays NaN: no bar, the table says NaN
    return {"table": table_part(tables.norms_table(s), put), "verdict": describe.norms_verdict(s),
            "series": list(plots.NORM_SERIES), "n": int(rows["input"].size), "bars": bars,
            "words": describe.norms_sentences(s)}


def _activations(s: LabState, put: Put) -> dict:
    curves, points = plots.activation_data(s)
    n, m = int(curves["x"].size), int(points["x"].size)
    return {"curves": put([curves[k] for k in ("x", "gelu", "silu", "sigmoid")]), "n": n,
            "points": put([points["x"], points["y"]]), "m": m, "names": list(plots.CURVES),
            "limit": float(curves["x"][-1]), "words": describe.activation_sentences(s)}


def _causal(s: LabState, put: Put) -> dict:
    verdict = s.verdict()
    delta = s.delta
    finite = delta[np.isfinite(delta)]
    return {"badge": [STATUS[verdict.status], f"{SYMBOL[verdict.status]} {verdict.badge}", verdict.text],
            "prediction": describe.prediction_line(s.prediction),
            "table": table_part(tables.causal_table(s), put),
            "delta": put(delta), "T": int(delta.shape[0]), "d": int(delta.shape[1]),
            "top": float(np.max(finite)) if finite.size else 0.0, "corrupt": s.corrupt,
            "words": describe.delta_sentences(s)}


def _depth(s: LabState, put: Put) -> dict:
    current = (s.placement, s.residual)
    lines = []
    for k, v in enumerate(VARIANTS):
        profile = s.depth[v]
        lines.append({"name": VARIANT_NAMES[v], "series": plots.DEPTH_SERIES[v], "dash": plots.DEPTH_DASH[v],
                      "current": v == current, "n": int(len(profile["depth"])),
                      "rms": put(profile["resid_rms"]), "grad": put(profile["grad_norm"]), "k": k})
    nan = any(np.any(np.isnan(p["grad_norm"])) for p in s.depth.values())
    return {"setup": describe.depth_setup(s), "wide": s.d > DEPTH_MAX_D, "status": describe.depth_status(s),
            "nan": ("Some values are NaN (eps = 0 on the all-zero row), so those lines have gaps or are missing."
                    if nan else ""),
            "blocks": s.blocks, "lines": lines, "table": table_part(tables.depth_table(s), put),
            "words": describe.depth_sentences(s)}


def _worked(s: LabState, put: Put) -> dict:
    summary = tables.worked_summary(s)
    if summary is None:
        return {"error": s.worked.error}
    return {"summary": table_part(summary, put), "detail": [table_part(t, put) for t in tables.worked_detail(s)]}


def results(s: LabState) -> tuple[str, np.ndarray]:
    """Every panel's part as JSON text (an object) and its numbers, shared by the sessions with these settings,
    this gate state and this prediction."""
    p = s.prediction
    key = (s.settings(), s.worked.digest, p.unlocked, p.committed and p.choice)
    return RESULTS.get(key, lambda: _results_text(s))


def _results_text(s: LabState) -> tuple[str, np.ndarray]:
    found, values = _results(s, s.prediction.unlocked)
    return json_text(found), values


def _results(s: LabState, unlocked: bool) -> tuple[dict, np.ndarray]:
    numbers = Values()
    put = numbers.put

    found = s.invariants() if unlocked else []
    out = {
        "shapes": table_part(tables.shape_table(s), put), "params": table_part(tables.param_table(s), put),
        "exercise": exercise_answer(s.d, s.expansion),
        "stages": table_part(tables.stage_table(s), put), "labels": plots.position_labels(s),
        "invariants": ({"head": f"Invariants now: {sum(c.ok for c in found)} of {len(found)} hold",
                        "items": [[STATUS[c.status], tables.MARK[c.status], c.name, c.detail] for c in found]}
                       if unlocked else None),
        "heads": _heads(s, put) if unlocked else None,
        "norms": _norms(s, put), "acts": _activations(s, put),
        "causal": _causal(s, put) if unlocked and s.delta is not None else None,
        "depth": _depth(s, put), "worked": _worked(s, put),
        "symptoms": describe.symptoms(s),
        "live": describe.announcement(s),
    }
    return out, numbers.array()


def payload(state: LabState, controls: dict, ack: int = 0, errors: dict[str, str] | None = None,
            building: bool = False) -> tuple[str, np.ndarray]:
    """(meta as JSON text, values) for this session now. `ack` is the number of the browser's last change
    answered; `errors` the messages beside fields (a value the server refused). `building`: the lab's traces are
    not computed yet (a served page computes them once its browser is connected), only the controls are sent."""
    s = state
    errors = dict(errors or {})
    if s.norm_error and "norm_text" not in errors:  # the server's own refusal (e.g. too long) said first
        errors["norm_text"] = (f"Could not use this vector: {s.norm_error}. The last good vector is still shown.")
    unlocked = s.prediction.unlocked
    controls = dict(controls)
    for name, (parameter, on, _) in BREAK_MIRRORS.items():
        controls[name] = getattr(s, parameter) == on
    controls["corrupt_value"] = _plain(s.corrupt_value)
    disabled = [*SHAPED] if s.trained is not None else []
    if not s.worked.rows:
        disabled.append("worked_name")
    own = {"controls": controls, "ack": ack, "locked": not unlocked, "errors": errors,
           "bounds": {"corrupt": [0, max(0, s.T - 1)]}, "disabled": disabled,
           "budget": f"{s.budget_error} The lab keeps the last sizes that fit." if s.budget_error else "",
           "trained": describe.trained_note(s), "held": [CHECKS_HELD, HEADS_HELD, CAUSAL_HELD]}
    if building or s.trace is None or not s.depth:
        return json_text({**own, "building": True}), np.zeros(0)
    text, values = results(s)
    return text[:-1] + ", " + json_text(own)[1:], values  # as json_text({**results, **own}): no key in both


def _plain(v: float) -> str:
    """A number as the field shows it: 999 rather than 999.0; e-notation where Python writes it."""
    v = float(v)
    return str(int(v)) if math.isfinite(v) and v == int(v) and abs(v) < 1e15 else repr(v)
