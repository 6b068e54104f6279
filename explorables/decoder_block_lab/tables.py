"""The lab's tables as rows (drawn by the browser from payload.py) and, for the worksheet, as markup: pure
functions of the state; all text escaped in markup, set as text in the browser."""

from __future__ import annotations

from html import escape

import numpy as np

from blocktrace.explorables.components.html import table
from blocktrace.explorables.components.numbers import NO_RMS, NO_RMS_NOTE, number, stage_rms
from blocktrace.explorables.decoder_block_lab import checks
from blocktrace.explorables.decoder_block_lab.shapes import block_params, param_rows, shape_rows
from blocktrace.explorables.decoder_block_lab.state import LabState
from blocktrace.explorables.decoder_block_lab.worked import TOLERANCE_TEXT
from blocktrace.explorables.engine.forward import block_keys
from blocktrace.explorables.engine.ops import rms

__all__ = ["MARK", "MLP_NAMES", "NORM_NAMES", "VARIANT_NAMES", "Table", "causal_table", "depth_table", "html_of",
           "invariants_html", "norms_table", "param_table", "shape_table", "stage_table", "worked_detail",
           "worked_summary"]

N_SHOWN = 6  # components shown per row in the stage table
MARK = {checks.PASS: "✓ holds", checks.FAIL: "✗ fails", checks.NOT_APPLICABLE: "– not applicable"}
STATUS_CLASS = {checks.PASS: "dl-pass", checks.FAIL: "dl-fail", checks.NOT_APPLICABLE: "dl-na"}
NORM_NAMES = {"rmsnorm": "RMSNorm", "layernorm": "LayerNorm"}
MLP_NAMES = {"swiglu": "SwiGLU", "gelu": "GELU"}


# (caption, header, rows as components.html.table takes them, css class): drawn by the browser, or as markup
Table = tuple[str, list[str], list[tuple[str, list, dict]], str]


def wrap(html: str) -> str:
    return f'<div class="bt-table-wrap">{html}</div>'


def shape_text(shape: tuple[int, ...]) -> str:
    return "[" + ", ".join(str(n) for n in shape) + "]"


# --- 1. shapes --------------------------------------------------------------------------------

def shape_table(state: LabState) -> Table:
    """Every tensor's shape: in symbols, at these sizes, and as the engine actually produced it."""
    s, trace = state.sizes, state.trace
    body = []
    for row in shape_rows(s, state.mlp, state.placement):
        if row.key is None:  # the combined projection: the engine keeps gate and value apart
            g = trace["blocks.0.mlp.gate"].shape
            engine = (*g[:-1], 2 * g[-1])
        else:
            engine = trace["blocks.0." + row.key].shape
        same = "✓ same" if tuple(engine) == row.shape else "✗ differs"
        body.append((row.step, [row.tensor, row.symbols, shape_text(row.shape), shape_text(engine), same], {}))
    split = state.split
    if state.wrong_split and split is not None:
        for name, shape in split.shapes[1:]:
            body.append((f"Broken split: {name}", [name, "—", "—", shape_text(shape), "✗ wrong split"],
                         {"class": "lost"}))
        if split.error:
            body.append(("Broken split: error", ["", "", "", split.error, "✗ cannot run"], {"class": "lost"}))
    header = ["Step", "Tensor", "Shape", f"At B={s.B}, T={s.T}, d={s.d}, h={s.heads}", "This run", "Check"]
    caption = (f"Shape of every tensor through one {'pre' if state.placement == 'pre' else 'post'}-norm block "
               f"({MLP_NAMES[state.mlp]} MLP, expansion e = {s.expansion})")
    return caption, header, body, "dl-shapes"


def param_table(state: LabState) -> Table:
    """Parameters of one block under each choice, the ones in use marked, and the engine's own count."""
    d, e = state.d, state.expansion
    in_use = {"attention", state.norm, state.mlp}
    body = []
    for row in param_rows(d, e):
        used = row.option in in_use
        label = row.part + (f" — {NORM_NAMES.get(row.option) or MLP_NAMES.get(row.option)}"
                            if row.option != "attention" else "")
        opts = {"class": "current" if used else "", "note": "in use" if used else ""}
        body.append((label, [row.weights, row.formula, f"{row.count:,}"], opts))
    total = block_params(d, state.norm, state.mlp, e)
    engine = state.engine_param_count()
    check = "✓ matches" if engine == total else "✗ differs"
    body.append(("Whole block (2 norms + attention + MLP)", ["", "", f"{total:,}"], {"class": "current"}))
    body.append(("Counted in the engine's parameters", ["", check, f"{engine:,}"], {}))
    header = ["Part", "Learned tensors", "Formula", f"At d = {d}"]
    return f"Parameters of one block (d = {d}, e = {e})", header, body, "dl-params"


# --- 2. design choices ------------------------------------------------------------------------

def invariants_html(found: list[checks.Check]) -> str:
    """Each invariant as a line: a word and a symbol for its status (never colour alone), then the evidence."""
    items = []
    for c in found:
        items.append(f'<li class="{STATUS_CLASS[c.status]}"><span class="dl-mark">{MARK[c.status]}</span> '
                     f"<strong>{escape(c.name)}</strong>: {escape(c.detail)}</li>")
    n_pass = sum(c.ok for c in found)
    return (f'<div class="dl-invariants" role="status" aria-live="polite"><h3 class="bt-h3">Invariants now: '
            f"{n_pass} of {len(found)} hold</h3><ul>{''.join(items)}</ul></div>")


def _row_of(values: np.ndarray) -> np.ndarray:
    """Batch item 0, head 0 where there is one, last position: one row of numbers."""
    v = values[0]
    while v.ndim > 1:
        v = v[0] if v.ndim > 2 else v[-1]
    return v


def stage_table(state: LabState) -> Table:
    """Every stage of block 0: its shape, its RMS, and the first components of one row."""
    trace = state.trace
    body = []
    for local in block_keys(trace.config):
        stage = trace.stage("blocks.0." + local)
        row = _row_of(stage.values)
        shown = [float(v) for v in row[:N_SHOWN]] + [None] * (N_SHOWN - min(N_SHOWN, row.size))
        more = f"+{row.size - N_SHOWN} more" if row.size > N_SHOWN else ""
        opts = {"plain": (2,)}
        shown_rms = stage_rms(stage.values)
        if np.any(np.isnan(stage.values)):
            opts.update(note="NaN", **{"class": "lost"})
        elif shown_rms == NO_RMS:
            opts["aside"] = NO_RMS_NOTE
        if local == state.inspect:  # the stage picked in the floor diagram
            opts["current"] = True
            opts["class"] = (opts.get("class", "") + " current").strip()
        body.append((stage.label, [local, shape_text(stage.values.shape), shown_rms, *shown, more], opts))
    header = ["Stage", "Key", "Shape", "RMS", *[f"[{i}]" for i in range(N_SHOWN)], ""]
    last = state.T - 1
    caption = (f"Block stages in forward order: batch item 0, last position ({last}, “{state.words[last]}”); "
               "attention stages show head 0")
    return caption, header, body, "dl-stages"


# --- 3. norms side by side ----------------------------------------------------------------------

def norms_table(state: LabState) -> Table:
    rows = state.normalised()
    width = rows["input"].size
    body = []
    for name, v in rows.items():
        mean = float(np.mean(v))
        std = float(np.std(v))
        body.append((name, [*(float(x) for x in v), mean, rms(v), std], {"plain": (width + 1, width + 2)}))
    header = ["", *[f"x{i}" for i in range(width)], "mean", "RMS", "std"]
    eps = number(state.norm_eps, significant=True)
    return f"The vector and its two normalisations (unit gain, zero bias, eps = {eps})", header, body, "dl-norms"


# --- 5. causal safety ------------------------------------------------------------------------------

def causal_table(state: LabState) -> Table:
    per_pos = checks.change_per_position(state.trace.output[0], state.corrupted.output[0])
    body = []
    for i, change in enumerate(per_pos):
        if i < state.corrupt:
            rule = "must stay exactly 0"
            ok = "✓ exactly 0" if change == 0.0 else "✗ changed"
        elif i == state.corrupt:
            rule, ok = "the corrupted position", "changes (expected)"
        else:
            rule, ok = "may read the corruption", "changed" if change != 0.0 else "unchanged"
        opts = {"plain": (1,), "class": "lost" if ok == "✗ changed" else ""}
        body.append((f"{i} {state.words[i]}", [rule, float(change), ok], opts))
    header = ["Position", "Rule", "max |Δ output|", "Result"]
    return "Change in the block's output, position by position (batch item 0)", header, body, "dl-causal"


# --- 6. depth ----------------------------------------------------------------------------------------

VARIANT_NAMES = {
    ("pre", "add"): "pre-norm, add",
    ("post", "add"): "post-norm, add",
    ("pre", "replace"): "pre-norm, replace (broken)",
    ("post", "replace"): "post-norm, replace (broken)",
}


def depth_table(state: LabState) -> Table:
    body = []
    for variant, profile in state.depth.items():
        current = variant == (state.placement, state.residual)
        rms, grad = profile["resid_rms"], profile["grad_norm"]
        opts = {"plain": (0, 1, 2), "class": "current" if current else "", "note": "current" if current else ""}
        body.append((VARIANT_NAMES[variant], [float(rms[0]), float(rms[-1]), float(grad[0])], opts))
    header = ["Variant", "RMS entering block 1", "RMS of the output", "‖gradient‖ at block 1's input"]
    caption = (f"After {state.blocks} block{'s' if state.blocks > 1 else ''} (d = {state.depth_d}); the gradient "
               "at the output is 1 in every variant")
    return caption, header, body, "dl-depth"


# --- 7. worked example ----------------------------------------------------------------------------

def worked_summary(state: LabState) -> Table | None:
    """Every intermediate of the lesson's block beside the lesson's PyTorch run; None when the fixture is missing."""
    w = state.worked
    if w.error:
        return None
    body = []
    for r in w.rows:
        ok = "✓ within tolerance" if r.matches else "✗ too far"
        gap = number(r.max_diff, significant=True)
        body.append((f"{r.step} ({r.name})", [r.key, shape_text(r.reference.shape), gap, ok],
                     {"class": "current" if r.name == state.worked_name else ""}))
    verdict = "all match" if w.all_match else "some differ"
    header = ["Lesson step", "Stage name", "Shape", "max |lab − PyTorch|", "Every number within tolerance?"]
    return (f"The lesson's seed-42 block: every intermediate, this lab vs the lesson's PyTorch run "
            f"({verdict}; tolerance {TOLERANCE_TEXT})", header, body, "dl-worked")


def worked_detail(state: LabState) -> list[Table]:
    """The chosen intermediate in full: this lab's numbers, then the lesson's (none when the fixture is missing)."""
    w = state.worked
    if w.error:
        return []
    r = w.row(state.worked_name)
    engine, reference = np.atleast_2d(r.engine), np.atleast_2d(r.reference)
    header = ["Position", *[f"[{j}]" for j in range(engine.shape[1])]]
    ours = [(f"pos {i}", [float(v) for v in row], {}) for i, row in enumerate(engine)]
    theirs = [(f"pos {i}", [float(v) for v in row], {}) for i, row in enumerate(reference)]
    return [(f"{r.name}: this lab (float64)", header, ours, "dl-worked-detail"),
            (f"{r.name}: the lesson's PyTorch run (float32)", header, theirs, "dl-worked-detail")]


def html_of(found: Table) -> str:
    """A table as markup (the worksheet's copy of what the page draws)."""
    return wrap(table(*found))
