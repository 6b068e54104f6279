"""The lab's words: text alternatives, announcements and the page's short verdicts (the prediction's outcome,
the symptoms of what is broken), each built from the state and the numbers the panels show."""

from __future__ import annotations

import math

import numpy as np

from blocktrace.explorables.components.numbers import number
from blocktrace.explorables.components.prediction import PredictionGate
from blocktrace.explorables.decoder_block_lab import plots
from blocktrace.explorables.decoder_block_lab.state import CORRECT_PREDICTION, DEPTH_MAX_D, VARIANTS, LabState
from blocktrace.explorables.decoder_block_lab.tables import MLP_NAMES, NORM_NAMES, VARIANT_NAMES
from blocktrace.explorables.engine import ops

__all__ = ["NOTHING_BROKEN", "activation_sentences", "announcement", "delta_sentences", "depth_sentences",
           "depth_setup", "depth_status", "head_sentences", "norms_sentences", "norms_verdict", "prediction_line",
           "symptoms", "trained_note"]

PLACEMENT_NAMES = {"pre": "pre-norm", "post": "post-norm"}
SAME_DIGITS = 3  # the norms table shows three decimals: outputs closer than this read as the same


def _num(v: float, digits: int = 3) -> str:
    """The prose's numbers: significant figures, as it compares magnitudes far apart (0.0012 against 0.97)."""
    return number(v, digits, significant=True)


def angle_degrees(a: np.ndarray, b: np.ndarray) -> float:
    """The angle between two non-zero vectors, in degrees."""
    cos = float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))
    return math.degrees(math.acos(min(1.0, max(-1.0, cos))))


def head_sentences(state: LabState, head: int) -> list[str]:
    """Head h's weights row by row, with each row's sum (positions counted from 0)."""
    pattern = plots.head_pattern(state, head)
    words = state.words
    out = [f"Head {head} of {state.heads}, batch item 0."]
    for i, row in enumerate(pattern):
        parts = ", ".join(f"{j} {words[j]} {_num(float(row[j]))}" for j in range(len(words)))
        out.append(f"Position {i} ({words[i]}) reads: {parts}; the row sums to {_num(float(row.sum()), 4)}.")
    return out


def norms_sentences(state: LabState) -> list[str]:
    rows = state.normalised()
    out = []
    for name, v in rows.items():
        listed = ", ".join(number(x, signed=True) for x in v)
        out.append(f"{name}: {listed} (mean {_num(float(np.mean(v)))}, RMS {_num(ops.rms(v))}).")
    out.append(norms_verdict(state))
    return out


def norms_verdict(state: LabState) -> str:
    """What the two norms did to this vector, each claim decided from the numbers they returned."""
    rows = state.normalised()
    x, rms_out, ln_out = rows["input"], rows["RMSNorm"], rows["LayerNorm"]
    eps = float(state.norm_eps)
    constant = bool(np.all(x == x[0]))
    if np.any(np.isnan(rms_out)) or np.any(np.isnan(ln_out)):
        which = " and ".join(n for n, v in (("RMSNorm", rms_out), ("LayerNorm", ln_out)) if np.any(np.isnan(v)))
        why = "the vector is all zeros" if not np.any(x) else "LayerNorm centres a constant vector to all zeros"
        return (f"{which} returned NaN: {why}, so with eps = {_num(eps)} the divisor is √0 = 0, and 0 / 0 is not a "
                "number. A small eps keeps the division defined.")
    if not np.any(x):
        return "The zero vector stays zero under both norms while eps > 0: there is nothing to rescale."
    if constant:
        every = number(rms_out[0], signed=True)
        return (f"A constant vector: RMSNorm keeps it (every component becomes {every}), while "
                "LayerNorm subtracts the mean and is left with zeros: centring erases a vector with no differences "
                "in it.")
    rms = ops.rms(rms_out)
    first = f"RMSNorm only rescales: the output points the same way as the input, with RMS {number(rms)}."
    mean = float(np.mean(x))
    if np.array_equal(ln_out, rms_out):
        return (f"{first} The mean is already 0, so LayerNorm has nothing to subtract: it divides by the same "
                "number, and its output is exactly RMSNorm's.")
    if np.max(np.abs(ln_out - rms_out)) < 0.5 * 10.0 ** -SAME_DIGITS:
        return (f"{first} The mean is only {_num(mean, 2)}, so LayerNorm's centring hardly matters: its output "
                f"matches RMSNorm's to {SAME_DIGITS} decimals.")
    return (f"{first} LayerNorm first moves the mean ({_num(mean)}) to 0, so its output points in another "
            f"direction, {_num(angle_degrees(ln_out, x), 2)}° away from the input's.")


def activation_sentences(state: LabState) -> list[str]:
    g = plots.preactivations(state)
    name = "SwiGLU gate" if state.mlp == "swiglu" else "GELU input"
    curve = "SiLU" if state.mlp == "swiglu" else "GELU"
    out = ["Three curves from the left, where all are near 0, to the right: GELU and SiLU both approach the line "
           "y = x for large positive x and dip slightly below 0 for negative x; σ rises from 0 to 1."]
    if g.size == 0 or np.all(np.isnan(g)):
        out.append(f"This trace's {name} values are NaN, so no dots are drawn.")
        return out
    points = plots.activation_data(state)[1]
    shown, f = points["x"], points["y"]
    negative = int(np.sum(shown < 0))
    nearly_closed = int(np.sum(np.abs(f) < 0.05))
    out.append(f"{shown.size} dots: the {name} values of batch item 0, from {_num(float(shown.min()))} to "
               f"{_num(float(shown.max()))}, drawn on the {curve} curve. {negative} are negative; {nearly_closed} "
               "give an output within 0.05 of 0.")
    return out


def delta_sentences(state: LabState) -> list[str]:
    per_pos = np.max(state.delta, axis=-1)
    parts = "; ".join(f"position {i} ({state.words[i]}): largest change {_num(float(v))}"
                      for i, v in enumerate(per_pos))
    return [f"Position {state.corrupt} of batch item 0 was set to {_num(state.corrupt_value, 6)} in every feature. "
            f"{parts}.", state.verdict().text]


def depth_setup(state: LabState) -> str:
    """What the depth panel runs, and which of its settings follow the controls."""
    blocks = f"{state.blocks} block{'s' if state.blocks > 1 else ''}"
    if state.d > DEPTH_MAX_D:
        width = (f"d = {state.depth_d}, not your d = {state.d}: the panel stops at {DEPTH_MAX_D} so that 48 blocks "
                 "stay quick")
    else:
        width = f"d = {state.depth_d}, your d from panel 1 (the panel follows d up to {DEPTH_MAX_D})"
    heads = f"{state.heads} head{'s' if state.heads > 1 else ''}"
    eps = "; eps = 0 with the all-zero row at position 0" if state.zero_eps else ""
    own = (" Beside a trained floor, these stacks are drawn, not trained: their input is the lab's own words, and "
           "the trained model's floors are on the race page." if state.trained is not None else "")
    return (f"This run: {blocks} (the Blocks slider) at {width}. The input is the lab's own, B = {state.B} and "
            f"T = {state.T} as set in panel 1; {heads}, {NORM_NAMES[state.norm]}, {MLP_NAMES[state.mlp]} with "
            f"expansion {state.expansion} and the causal mask {'on' if state.causal else 'off'}, as set in panel 2"
            f"{eps}. Each block has its own seeded weights. The loss is L = Σ output ⊙ R for a fixed random R of "
            "norm 1, so every line starts from a gradient of 1 at the output. Placement and residual do not follow "
            f"the controls: all four arrangements are drawn, the current one thick.{own}")


def trained_note(state: LabState) -> dict | None:
    """What a trained floor is and where its input comes from ({"lines": [two paragraphs], "race": its link}); or
    why the link's floor is not shown ({"error": ...}); None with drawn weights."""
    if state.run_error:
        return {"error": state.run_error}
    floor = state.trained
    if floor is None:
        return None
    config = floor.cut.config
    trained = (f"{PLACEMENT_NAMES[config.placement]}, {config.residual}, causal mask "
               f"{'on' if config.causal else 'off'}")
    now = (f"{PLACEMENT_NAMES[state.placement]}, {state.residual}, causal mask {'on' if state.causal else 'off'}")
    changed = "" if now == trained else f" Panels 2 and 8 now run its weights as {now}, which it was not trained as."
    tokens = " ".join(floor.cut.tokens[0])
    first = state.param.T.bounds[1]
    exact = (f"Panels 1, 2, 5 and 8 show what the trained model computes there, exactly: its mask is causal, so the "
             f"first {first} positions do not depend on the rest." if config.causal else
             f"The trained model's mask is off, so on its first {first} positions alone this floor computes other "
             "numbers than it did in the race.")
    return {"lines": [f"floor {floor.floor + 1} of {floor.floors} of the race's model {floor.model}, after "
                      f"{floor.cut.steps:,} training steps (trained as {trained}).{changed}",
                      f"Batch item 0 is the stream that enters this floor on the held-out example {tokens} (items 1 "
                      f"to 3: the next examples). {exact} Its shape is fixed by its weights."],
            "race": floor.race}


def depth_sentences(state: LabState) -> list[str]:
    out = [f"{state.blocks} blocks at width {state.depth_d}, B = {state.B}, T = {state.T}, four variants; the thick "
           "line is the current choice."]
    for v in VARIANTS:
        p = state.depth[v]
        rms, grad = p["resid_rms"], p["grad_norm"]
        out.append(f"{VARIANT_NAMES[v]}: stream RMS {_num(float(rms[0]))} entering block 1 and "
                   f"{_num(float(rms[-1]))} at the output; gradient norm {_num(float(grad[-1]))} at the output and "
                   f"{_num(float(grad[0]))} at block 1's input.")
    return out


def depth_status(state: LabState) -> str:
    """The current arrangement's gradient at block 1, announced in the depth panel where it is explained."""
    variant = (state.placement, state.residual)
    grad = state.depth[variant]["grad_norm"]
    return (f"Current arrangement ({VARIANT_NAMES[variant]}, {state.blocks} blocks): the gradient norm is "
            f"{_num(float(grad[-1]))} at the output and {_num(float(grad[0]))} at block 1's input.")


def announcement(state: LabState) -> str:
    """One line for the live region after each change (the gradient is announced in the depth panel)."""
    shape = f"Output {list(state.trace.output.shape)}"
    if not state.prediction.unlocked:  # the invariants and the causal test answer the prediction: not before
        return f"{shape}."
    found = state.invariants()
    n_pass = sum(c.ok for c in found)
    return f"{shape}; {n_pass} of {len(found)} invariants hold; causal test {state.verdict().badge}."


# --- the page's short verdicts ----------------------------------------------------------------------

def prediction_line(p: PredictionGate) -> list[str] | None:
    """[what the student predicted, whether the lab bears it out, "ok" or "bad"]; None until a prediction is
    committed."""
    if not p.committed:
        return None
    right = p.choice == CORRECT_PREDICTION
    outcome = ("matches what the lab shows: with the mask on, earlier outputs are exactly unchanged"
               if right else "does not match: with the mask on, the earlier outputs do not change at all. "
                             "Norms and the MLP work on one position at a time; only attention mixes positions, "
                             "and the mask stops it reading ahead")
    return [f"You predicted: {p.choices[p.choice]}", f"({'✓' if right else '✗'} {outcome}.)",
            "ok" if right else "bad"]


NOTHING_BROKEN = ("Nothing is broken: every toggle above is off. Turn one on and look for its symptom in the panels "
                  "above.")


def symptoms(s: LabState) -> list[list[str]]:
    """Panel 8's symptoms: [toggle, where in the panels above it shows] per broken toggle (none: NOTHING_BROKEN)."""
    found = {c.name: c for c in s.invariants()}
    items = []
    if s.residual == "replace":
        c = found["resid_mid == resid_pre + attn_out"]
        items.append(["Missing residual", f"Invariants: {c.detail} Depth: the thick line is a replace line; "
                                          "the gradient no longer has a direct path to early blocks."])
    if s.placement == "post":
        items.append(["Norm after the addition", "Invariants: the residual identities fail, because the sum is "
                                                 "normalised before it is kept. Depth: the thick line is now a "
                                                 "post-norm one; every gradient crosses two norms per block."])
    if s.zero_eps:
        items.append(["eps = 0", zero_eps_symptom(s)])
    if s.wrong_split:
        if s.split is None:
            items.append(["Wrong split", "GELU has no gate/value split; choose MLP = SwiGLU to see this failure."])
        else:
            shapes = dict(s.split.shapes)
            items.append(["Wrong split", f"Shapes and invariants: the split gives a gate of "
                                         f"{list(shapes['gate'])} and a value of {list(shapes['val'])}, and the "
                                         f"MLP cannot finish: {s.split.error or 'no error'} The other panels "
                                         "keep showing the correct block."])
    if not s.causal:
        if s.prediction.unlocked:
            symptom = (f"Invariants: {found['Weights on future positions are exactly 0'].detail} "
                       f"Causal safety: {s.verdict().badge}.")
        else:  # what the mask does to the future weights answers the prediction's question
            symptom = "Invariants and causal safety: shown once your prediction is committed."
        items.append(["No causal mask", symptom])
    return items


def zero_eps_symptom(s: LabState) -> str:
    """Where eps = 0 on the all-zero row at position 0 gives NaN, read from the trace (batch item 0)."""
    rows = np.flatnonzero(np.any(np.isnan(s.trace.output[0]), axis=-1))
    if rows.size == s.T:
        return ("NaN fills the stage table, the heatmaps and the causal test: the first norm divides the zero "
                "row by √0 = 0, and attention carries the NaN to every position, since every position reads "
                "position 0.")
    if rows.size and s.placement == "post" and s.causal:
        listed = ", ".join(str(int(i)) for i in rows)
        return (f"NaN at position {listed} only: in post-norm the zero row first gets attention's update, and "
                "with the mask on position 0 reads only itself, whose value vector is zero. The sum is still "
                "zero, so the norm after the addition divides 0 by √0 = 0. Later positions add non-zero "
                "updates and stay finite.")
    if rows.size:
        return f"NaN at positions {', '.join(str(int(i)) for i in rows)} of the block's output."
    return ("No NaN in this configuration: in post-norm the zero row gets attention's update before any norm, "
            "and without the mask position 0 also reads the other positions, so the row is no longer zero. "
            "Tick Causal mask to see NaN at position 0, or switch Placement to pre-norm to see it everywhere.")
