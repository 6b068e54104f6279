"""What the browser draws of the race (train_the_block.js): one payload per change or slice, numbers and short strings.

meta (JSON): the controls' values, the menus and buttons that follow the race (floors and heads on offer, what is
disabled, what Play says, whether Keep training shows), the task's note, the sides, the status line and verdict
(or a message in its place), the progress line, the race in words; once a step is taken the curves' offsets into
`values` (float64) and, once the models have been looked inside, the answers, both attention maps' offsets and
words, and the stage table's rows with their offsets.

`values`: each model's training loss per step (step k + 1 at index k, as the runner's records count them), each
model's held-out readings (step, % right), the gradient reaching each floor at the latest step, both heads'
weights and the stage table's RMS and first components. Before the commit nothing runs, and whatever the state
held, nothing of a race would be sent: `values` is empty and meta holds the set-up and the question's status only.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np

from blocktrace.explorables.components.drawn_view import json_text
from blocktrace.explorables.components.drawn_view.values import Values
from blocktrace.explorables.components.heatmap import token_factors
from blocktrace.explorables.components.numbers import NO_RMS, NO_RMS_NOTE, stage_rms
from blocktrace.explorables.components.palette import chart_colours, luminance
from blocktrace.explorables.engine import tasks as task_data
from blocktrace.explorables.train_the_block import inside, plots
from blocktrace.explorables.train_the_block.runner import EVALUATE_EVERY, Look
from blocktrace.explorables.train_the_block.state import (
    BUDGET,
    SETUP_PARAMS,
    TARGET,
    TARGET_TEXT,
    RaceState,
    outcome_sentence,
    verdict_sentence,
)

__all__ = ["EMPTY", "LOOK_FIRST", "NO_CURVES", "DrawnLook", "PageFacts", "disabled", "look_note", "names", "options",
           "payload", "sides_sentence", "status", "stopped_at_verdict"]

log = logging.getLogger(__name__)

EMPTY = np.zeros(0)
EMPTY.flags.writeable = False
NO_CURVES = ("Both loss curves, the held-out accuracy and the gradient reaching each floor are drawn here from "
             "the first step.")
LOOK_FIRST = "Take a step to look inside: the attention weights and stages of the models as they are now."


def look_note(dark: bool) -> str:
    """The note above the look inside, in the theme's words: the maps' blues grow darker with weight on the light
    theme and brighter on the dark one (palette.SEQUENTIAL_DARK)."""
    blues = chart_colours(dark).sequential
    more = "darker" if luminance(blues[-1]) < luminance(blues[0]) else "brighter"
    return (f"A held-out example: neither model ever trains on it. In the maps, a {more} cell is more weight (hover "
            "a cell for its value, or open the words under them); the maps, answers and table follow the models "
            f"every {EVALUATE_EVERY} steps.")


@dataclass(frozen=True)
class PageFacts:
    """What the page holds besides the state: whether it plays, the message shown in the status's place, the latest
    look inside and the choices of what to look at (checked by the view), the stage picked in the diagram."""

    playing: bool = False
    alert: str = ""
    look: Look | None = None
    choices: dict = field(default_factory=dict)  # speed, example, floor, head, table ("a" or "b")
    picked: str = "attn.pattern"
    error: str = ""  # the seed field's message
    floors: int = 1  # the deeper model's floors (the Floor menu)
    heads: int = 1
    dark: bool = False  # the session's theme (style.dark()): the maps' colours, and the words about them
    drawn: DrawnLook | None = None  # the page's look as last drawn: used again while it is what would be drawn


@dataclass
class DrawnLook:
    """A page's look inside, as the payload last drew it (its meta part and numbers), and what it was drawn from: a
    look changes every EVALUATE_EVERY steps, while a playing page sends an update every slice."""

    look: Look | None = None
    key: tuple = ()
    meta: dict | None = None
    values: np.ndarray = field(default_factory=lambda: EMPTY)


def names(state: RaceState) -> tuple[str, str]:
    """The sides as the legends and the tables name them: ("A: add", "B: replace")."""
    a, b = state.side_names()
    return f"A: {a}", f"B: {b}"


def sides_sentence(state: RaceState) -> str:
    """What A and B are, under the difference's menu: "A is pre-norm; B is post-norm. Everything else is the same."
    Racing depth with 2 floors in each model gives both sides the same name: said once, with the way to a race."""
    a, b = state.side_names()
    if a != b:
        return f"A is {a}; B is {b}. Everything else is the same."
    way = " Choose more floors to make B deeper." if state.difference == "depth" else ""
    return f"Both are {a} and everything else is the same: the two models are identical.{way}"


def stopped_at_verdict(state: RaceState, facts: PageFacts) -> bool:
    """The race stands stopped at its verdict: Keep training is offered."""
    s = state
    return s.prediction.unlocked and not facts.playing and not s.finished and s.result() is not None


def status(state: RaceState, facts: PageFacts) -> dict:
    """The status line (read out by screen readers when it changes, so never the step count) and the verdict against
    the prediction ([sentence, "ok" or "bad"], or None); a message in its place when there is one."""
    s = state
    if facts.alert:
        return {"text": facts.alert, "alert": True, "verdict": None}
    if not s.prediction.unlocked:
        return {"text": "Commit your prediction to start the race.", "alert": False, "verdict": None}
    steps = max(len(s.a.steps), len(s.b.steps))
    result = s.result()
    if s.finished:
        text = f"Both models have stopped (each stops after {BUDGET:,} steps, or when its numbers blow up)."
    elif facts.playing:
        text = "Playing."
    elif result is not None:
        text = f"The race stopped here: Keep training to watch both models go on, up to {BUDGET:,} steps."
    else:
        text = "Paused." if steps else "Ready: press Play, or One step."
    verdict = None
    if result is not None:  # what happened first, then what the race is doing
        happened = outcome_sentence(result, s.side_names(), (s.a.reached, s.b.reached),
                                    (not s.a.running, not s.b.running))
        text = f"Decided: {happened} {text}"
        if s.prediction.committed:
            right = s.prediction.choice == result
            verdict = [verdict_sentence(s.prediction.choice, result), "ok" if right else "bad"]
    return {"text": text, "alert": False, "verdict": verdict}


def disabled(state: RaceState) -> list[str]:
    """The controls a press or a change of which the server refuses now."""
    s = state
    off = [] if s.prediction.unlocked else ["play", "step", "reset", "keep"]
    if s.setup_held:
        off += list(SETUP_PARAMS)
    elif s.difference == "warmup":  # each side has its own warm-up then
        off.append("warmup")
    return off


def _curves(state: RaceState, put) -> dict | None:
    """Both loss curves, both held-out curves and the depth plot's rows (None before the first step)."""
    s = state
    if not (s.a.steps or s.b.steps):
        return None
    sides = []
    for side in (s.a, s.b):
        sides.append({"loss": put([r.loss for r in side.steps]), "n": len(side.steps),
                      "held": put([[step, 100 * acc] for step, _, acc in side.held_out]), "n_held": len(side.held_out)})
    depth = plots.depth_data(s)
    return {"sides": sides, "depth": put([depth["a"], depth["b"]]), "n_depth": len(depth["depth"]),
            "chance": task_data.make_task(s.task).chance_loss, "target": 100 * TARGET, "budget": BUDGET}


def _stage_rows(side, position: int, picked: str, put) -> list[list]:
    """[label, key, shape, offset, first components shown, "+n more", current, no RMS] per stage; at the offset the
    RMS (NaN when there is none) and N_SHOWN components (NaN past the row's end)."""
    rows = []
    for stage in side.stages:
        row = inside.stage_row(stage.values, position)
        shown = stage_rms(row)
        first = np.full(inside.N_SHOWN, np.nan)
        n = min(inside.N_SHOWN, row.size)
        first[:n] = row[:n]
        at = put([np.nan if shown == NO_RMS else shown, *first])
        shape = "[" + ", ".join(str(k) for k in stage.values.shape) + "]"
        more = f"+{row.size - inside.N_SHOWN} more" if row.size > inside.N_SHOWN else ""
        rows.append([stage.label, stage.local_key, shape, at, n, more, stage.local_key == picked, shown == NO_RMS])
    return rows


def _look(state: RaceState, facts: PageFacts, put) -> dict | None:
    """Both models on the held-out example: answers, the chosen head's maps and the chosen model's stage table."""
    look = facts.look
    if look is None:
        return None
    vocab = task_data.make_task(state.task).vocab
    tokens = [vocab[t] for t in look.tokens]
    side_names = names(state)
    head = facts.choices.get("head", 0)
    scored = np.flatnonzero(look.scored)
    answers = [["Input", [vocab[t] for t in look.tokens[scored]]],
               ["Right answer", [vocab[t] for t in look.targets[scored]]]]
    for name, side in zip(side_names, (look.a, look.b), strict=True):
        marks = [f"{vocab[side.answers[i]]} {'✓' if side.answers[i] == look.targets[i] else '✗'}" for i in scored]
        right = int(np.sum(side.answers[scored] == look.targets[scored]))
        answers.append([f"{name}, {right} of {scored.size} right at step {side.steps}", marks])
    maps = []
    for name, side in zip(side_names, (look.a, look.b), strict=True):
        there = side.pattern is not None
        maps.append({"title": (f"{name}: floor {look.floor + 1}, head {head + 1}, step {side.steps}" if there
                               else f"{name}: no floor {look.floor + 1}"),
                     "at": put(inside.pattern_of(side, head, len(tokens))),
                     "words": inside.attention_sentences(side, name, look.floor, head, tokens)})
    which = 1 if facts.choices.get("table") == "b" else 0
    side = (look.a, look.b)[which]
    position = int(scored[-1])
    table: dict = {"header": ["Stage", "Key", "Shape", "RMS", *[f"[{i}]" for i in range(inside.N_SHOWN)], ""],
                   "no_rms": NO_RMS_NOTE}
    if side.stages:
        table["caption"] = (f"{side_names[which]}, floor {look.floor + 1}, at step {side.steps}: every stage at "
                            f"position {position + 1} (“{tokens[position]}”); attention rows list every head's "
                            "weights")
        table["rows"] = _stage_rows(side, position, facts.picked, put)
    else:
        table["missing"] = f"{side_names[which]} has no floor {look.floor + 1}."
    return {"note": look_note(facts.dark), "positions": [f"position {i + 1}" for i in scored],
            "answers_caption": (f"The example's scored positions (the whole input is {' '.join(tokens)}): what each "
                                "model answers now"),
            "answers": answers, "factors": token_factors(tokens), "maps": maps, "table": table}


def _drawn_look(state: RaceState, facts: PageFacts, side_names: tuple[str, str]) -> tuple[dict | None, np.ndarray]:
    """The look's meta part (offsets from 0) and its numbers: drawn again only when the look, what the page looks at
    or the theme changed since `facts.drawn` (which is then updated), else the same objects as last time."""
    key = (state.task, side_names, facts.choices.get("head", 0), facts.choices.get("table"), facts.picked, facts.dark)
    drawn = facts.drawn
    if drawn is not None and drawn.meta is not None and drawn.look is facts.look and drawn.key == key:
        return drawn.meta, drawn.values
    numbers = Values()
    meta = _look(state, facts, numbers.put)
    if meta is not None:
        meta["span"] = [0, numbers.size]
    values = numbers.array()
    if drawn is not None:
        drawn.look, drawn.key, drawn.meta, drawn.values = facts.look, key, meta, values
    return meta, values


def options(facts: PageFacts) -> dict[str, list]:
    """The Floor and Head menus, which follow the race's models."""
    return {"floor": [[f"Floor {i + 1}", i] for i in range(facts.floors)],
            "head": [[f"Head {h + 1}", h] for h in range(facts.heads)]}


def payload(state: RaceState, facts: PageFacts, controls: dict, ack: int = 0) -> tuple[str, np.ndarray]:
    """(meta as JSON text, values) for this page now. `controls`: the set-up's values (the state's) and the page's
    choices; `ack`: the number of the browser's last change answered."""
    s = state
    task = task_data.make_task(s.task)
    unlocked = s.prediction.unlocked  # before: the view runs no race; and whatever the state held, none is sent
    steps = max(len(s.a.steps), len(s.b.steps)) if unlocked else 0
    numbers = Values()
    side_names = names(s)
    meta = {
        "controls": {**controls, **facts.choices}, "ack": ack, "error": facts.error, "error_field": "seed",
        "options": options(facts), "disabled": disabled(s), "play": "Pause" if facts.playing else "Play",
        "keep": stopped_at_verdict(s, facts), "names": list(side_names),
        "task": [f"{task.title}.", f"{task.needs} Guessing gives {100 * task.chance_accuracy:.1f} % (a loss of "
                                   f"{task.chance_loss:.2f})."],
        "sides": sides_sentence(s),
        "status": status(s, facts), "progress": f"Step {steps:,} of {BUDGET:,}." if steps else "",
        "words": plots.race_sentences(s, side_names) if unlocked else [f"{n}: not started." for n in side_names],
        "no_curves": NO_CURVES, "look_first": LOOK_FIRST,
        "target_text": TARGET_TEXT,
    }
    if not unlocked:
        return json_text({**meta, "look": None, "curves": None}), EMPTY
    # The look first: its offsets stay as they are while the curves grow, so the browser sees an unchanged look
    meta["look"], look_values = _drawn_look(s, facts, side_names)
    numbers.put(look_values)
    meta["curves"] = _curves(s, numbers.put)
    return json_text(meta), numbers.array()

