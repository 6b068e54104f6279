"""Lessons: each parses and names only what exists, renders safely, and its page tracks the four checkpoints."""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import numpy as np
import panel as pn
import pytest

from blocktrace.app.classroom.store import StoredEvent
from blocktrace.app.lessons.check import lesson_problems
from blocktrace.app.lessons.loading import Lesson, load_lessons, parse_lesson
from blocktrace.app.lessons.markdown import render
from blocktrace.app.lessons.page import HELD_BY_TEACHER, WAITING, LessonView, explanation_counter
from blocktrace.app.server.pages import lesson_cards
from blocktrace.explorables.block_floor.state import FloorState
from blocktrace.explorables.components.drawn_view import DrawnView
from blocktrace.explorables.engine import ops, run_preset
from tests.answers import directive_texts, lesson_answers, normalised
from tests.lab_page import page_parts

ROOT = Path(__file__).resolve().parents[2]
LESSONS = load_lessons()
ORDER = ["transformer-block", "block-floor", "decoder-block", "train-the-block"]
STAGE_IN_TEXT = re.compile(r"`((?:blocks\.\d+\.)[a-z0-9_.]*[a-z0-9_]|embed|pos_embed)`")
FENCE = re.compile(r"^```[a-z]*\n(.*?)^```", flags=re.MULTILINE | re.DOTALL)
PHONE_COLUMNS = 32  # monospace characters that fit a 390 px wide screen without scrolling

# Controls each lesson names, by their visible labels (and select options), which its explorable must show.
CONTROLS = {
    "transformer-block": ["Attention update scale", "MLP update scale", "Replace instead of add residuals (broken)",
                          "Input vector", "Normalisation", "Zero updates", "Reset", "Constant 2, 2, 2, 2"],
    "block-floor": ["Position vectors", "Tracked word", "Reverse order", "Causal mask", "Stage", "Floors",
                    "This is the first divergence", "They never diverge", "Next stage ▶"],
    "decoder-block": ["Corrupt position", "Corrupt value", "Causal mask", "d (model width)", "Normalisation", "MLP",
                      "Placement", "Heads", "Constant 2, 2, 2, 2", "Zero vector", "eps", "Blocks",
                      "Missing residual (replace instead of add)",
                      "Wrong gate/value split (chunk along positions, not features)"],
    "train-the-block": ["Play", "Warm-up (both models)", "Learning rate (Adam)", "The one difference", "Task",
                        "Floors in each model", "Seed (weights and data)"],
}
OPTIONS = {
    "transformer-block": ["Mean-centred (LayerNorm)"],
    "block-floor": [],
    "decoder-block": ["LayerNorm", "GELU", "post-norm", "0 (no eps)"],
    "train-the-block": ["100 steps", "200 steps", "none", "0.003", "0.01", "Add or replace the stream",
                        "Continue the pattern", "How deep"],
}
# A state change that counts as an experiment, per explorable.
# The race's experiment is a race the server has decided (app/lessons/page.py), not a change of its set-up.
EXPERIMENT = {"transformer-block-trace": ("attention_scale", 0.0), "block-floor": ("stage", 4),
              "decoder-block-lab": ("causal", False), "train-the-block": ("decided", "a-first")}
BEFORE_PREDICTING = {"transformer-block-trace": ("norm", "layernorm"), "block-floor": ("floors", 2),
                     "decoder-block-lab": ("heads", 2), "train-the-block": ("floors", 6)}


# --- helpers ------------------------------------------------------------------------------------

def by_id(lesson_id: str) -> Lesson:
    return next(lesson for lesson in LESSONS if lesson.id == lesson_id)


def flat(text: str) -> str:
    """Whitespace collapsed, so phrases wrapped across lines still match."""
    return " ".join(text.split())


def markdown_of(lesson: Lesson) -> str:
    return "\n".join(lesson.markdown_parts())


def walk(obj: Any) -> Iterator[Any]:
    """Every object of a Panel tree, Viewers included (yielded before their own layout)."""
    yield obj
    if isinstance(obj, pn.viewable.Viewer):
        yield from walk(obj.__panel__())
        return
    for child in getattr(obj, "objects", None) or []:
        yield from walk(child)


def page_objects(view: LessonView) -> list[Any]:
    return [obj for part in view.parts for obj in walk(part)]


def widget_labels(explorable: Any) -> set[str]:
    """Visible labels of an explorable's widgets, plus the option labels of its selects."""
    labels: set[str] = set()
    for value in vars(explorable).values():
        if isinstance(value, pn.reactive.ReactiveHTML) and "label" in value.param:  # e.g. the race's Play button
            labels.add(value.label)
        if isinstance(value, DrawnView):  # controls drawn in the browser: their labels and options come in its spec
            for control in json.loads(value.spec)["controls"]:
                labels.add(control["label"])
                labels.update(str(option[0]) for option in control.get("options", []))
        if isinstance(value, pn.widgets.Widget):
            labels.add(getattr(value, "label", None) or value.name)
            options = getattr(value, "options", None)
            if isinstance(options, dict):
                labels.update(str(k) for k in options)
    return labels


def button(view: LessonView, label: str) -> pn.widgets.Button:
    return next(o for o in page_objects(view) if isinstance(o, pn.widgets.Button) and o.label == label)


def text_area(view: LessonView, label: str) -> pn.widgets.TextAreaInput:
    return next(o for o in page_objects(view) if isinstance(o, pn.widgets.TextAreaInput) and o.label == label)


class _Markup(HTMLParser):
    """Tags and attributes of an HTML string."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attrs += [(name, value or "") for name, value in attrs]


def unsafe_parts(html: str) -> list[str]:
    """Live script, event-handler attributes and javascript: URLs found in the markup."""
    markup = _Markup()
    markup.feed(html)
    found = [f"<{t}>" for t in markup.tags if t in ("script", "img", "iframe", "object", "embed", "svg", "style")]
    found += [f"{name}=" for name, _ in markup.attrs if name.lower().startswith("on")]
    found += [f"{name}={value}" for name, value in markup.attrs
              if name.lower() in ("href", "src") and value.strip().lower().startswith(("javascript:", "data:"))]
    return found


# --- the lesson files -----------------------------------------------------------------------------

def test_four_lessons_in_order():
    """The four lessons load in the issues' order with unique ids, orders and titles."""
    assert [lesson.id for lesson in LESSONS] == ORDER
    assert [lesson.order for lesson in LESSONS] == [1, 2, 3, 4]
    assert len({lesson.title for lesson in LESSONS}) == 4
    for lesson in LESSONS:
        assert lesson.path == ROOT / "lessons" / lesson.id / "lesson.md"
        assert lesson.objectives and all(isinstance(p, str) for p in lesson.prerequisites)


@pytest.mark.parametrize("lesson_id", ORDER)
def test_lesson_names_only_what_exists(lesson_id):
    """Every explorable, stage, state key, checkpoint and exercise a lesson names exists (lesson_problems is [])."""
    assert lesson_problems(by_id(lesson_id)) == []


@pytest.mark.parametrize("lesson_id", ORDER)
def test_front_matter_lists_exactly_what_the_lesson_uses(lesson_id):
    """The front matter's explorables are those placed, and its stages are the keys the text quotes."""
    lesson = by_id(lesson_id)
    placed = {d.attrs["id"] for d in lesson.directives("explorable")}
    placed |= {d.attrs["explorable"] for d in lesson.directives("predict")}
    assert set(lesson.explorables) == placed
    quoted = set(STAGE_IN_TEXT.findall(markdown_of(lesson)))
    assert quoted == set(lesson.stages)
    assert len(lesson.stages) == len(set(lesson.stages))


@pytest.mark.parametrize("lesson_id", ORDER)
def test_lesson_carries_the_whole_arc(lesson_id):
    """Predict before the explorable, steps, formulas, failure modes, recap, self-check, 1-3 checkpoints, exercise,
    explain."""
    lesson = by_id(lesson_id)
    names = [d.name for d in lesson.directives()]
    assert names.count("predict") == 1 and names.count("explorable") == 1
    assert names.index("predict") < names.index("explorable")
    assert 1 <= names.count("checkpoint") <= 3
    assert names.count("exercise") == 1 and names.count("explain") == 1
    text = markdown_of(lesson)
    for heading in ("Run the comparison", "Failure modes", "Recap", "Check yourself"):
        assert re.search(rf"^## (\d+\. )?{heading}$", text, flags=re.MULTILINE), heading
    assert re.search(r"^1\. ", text, flags=re.MULTILINE), "the guided steps are a numbered list"
    assert FENCE.search(text), "formulas are written in fenced blocks"
    exercise = lesson.directives("exercise")[0].attrs
    assert exercise["command"] == "blocktrace check"
    assert (ROOT / exercise["path"] / exercise["file"]).is_file()
    assert exercise["command"] in (ROOT / exercise["path"] / "README.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("lesson_id", ORDER)
def test_formulas_are_unicode_and_fit_a_phone(lesson_id):
    """Formulas need no math renderer (Unicode, no TeX) and no fenced line is wider than a phone screen."""
    for block in FENCE.findall(markdown_of(by_id(lesson_id))):
        assert "\\frac" not in block and "$" not in block and "sqrt(" not in block
        for line in block.splitlines():
            assert len(line) <= PHONE_COLUMNS, line


@pytest.mark.parametrize("lesson_id", ORDER)
def test_controls_a_lesson_names_exist(lesson_id):
    """Each control the guided steps name (in bold) is a visible label of the explorable, so a rename shows up."""
    lesson = by_id(lesson_id)
    text = flat(markdown_of(lesson))
    explorable_id = lesson.explorables[0]
    view = LessonView(lesson)
    labels = widget_labels(view.explorables[explorable_id])
    for label in CONTROLS[lesson_id]:
        assert f"**{label}**" in text, label
        assert label in labels, label
    for option in OPTIONS[lesson_id]:
        assert option in text and option in labels, option


@pytest.mark.parametrize("lesson_id", ORDER)
def test_lesson_prose_is_plain_markdown(lesson_id):
    """No raw HTML in the lesson (it would show as escaped text) and no unsafe markup in what renders."""
    for text in by_id(lesson_id).markdown_parts():
        html = render(text)
        assert "&lt;" not in html
        assert unsafe_parts(html) == []


# --- rendering is safe ------------------------------------------------------------------------------

HOSTILE = ("Hello <script>alert(1)</script> and <img src=x onerror=alert(2)> and "
           "[click](javascript:alert(3)) and [data](data:text/html;base64,PHNjcmlwdD4=) "
           '<a href="javascript:alert(4)">raw link</a>\n\n<div onclick="alert(5)">block</div>\n')


def test_markdown_render_is_safe():
    """Script tags, event handlers and javascript: links in Markdown come out as inert text."""
    html = render(HOSTILE)
    assert unsafe_parts(html) == []
    assert "&lt;script&gt;" in html
    assert "<a " not in html  # the javascript: and data: links stay plain text


def test_lesson_page_escapes_every_field():
    """Hostile text in prose, title, objectives, checkpoint, exercise and explain renders with nothing live."""
    bad = "<script>alert(1)</script><img src=x onerror=alert(2)>"
    text = f"""---
id: hostile
title: "{bad}"
order: 9
objectives: ["{bad}"]
prerequisites: []
explorables: [transformer-block-trace]
stages: []
---
{HOSTILE}
:::predict
explorable: transformer-block-trace
:::

:::explorable
id: transformer-block-trace
state: {{}}
:::

:::checkpoint
id: bad
question: "{bad}"
options:
  - {{text: "{bad}", correct: true, feedback: "{bad}"}}
  - {{text: "[x](javascript:alert(1))", correct: false, feedback: "no"}}
:::

:::exercise
id: bad
title: "{bad}"
about: "{bad}"
path: lessons/transformer-block/exercise
file: "{bad}"
command: "{bad}"
:::

:::explain
prompt: "{bad}"
:::
"""
    lesson = parse_lesson(text)
    view = LessonView(lesson)
    panes = [o for o in walk(view.__panel__()) if isinstance(o, pn.pane.HTML)]
    assert panes
    for pane in panes:
        assert unsafe_parts(str(pane.object)) == [], pane.object
    assert any("&lt;script&gt;" in str(p.object) for p in panes)


# --- the checker catches broken lessons ----------------------------------------------------------------

BROKEN = """---
id: broken
title: Broken
order: 99
objectives: [nothing]
prerequisites: []
explorables: [transformer-block-trace, block-floor, no-such-explorable]
stages: [blocks.0.resid_pre, blocks.0.attn.nope, blocks.9.resid_post]
---
Text.

:::predict
explorable: transformer-block-trace
:::

:::explorable
id: transformer-block-trace
state: {colour: red, attention_scale: "7", norm: batchnorm}
:::

:::explorable
id: block-floor
state:
  positions: on
:::

:::explorable
id: made-up-explorable
:::

:::checkpoint
id: two-right
question: Which?
options:
  - {text: A, correct: true, feedback: yes}
  - {text: B, correct: true, feedback: also yes}
:::

:::checkpoint
id: two-right
question: Again?
options:
  - {text: A, correct: true}
  - {text: B, correct: false, feedback: no}
:::

:::exercise
id: gone
title: Missing
path: lessons/no-such-lesson/exercise
file: x.py
:::

:::answer
after: prediction
explorable: block-floor
:::
Held until a bet this lesson never asks for.
:::end

:::answer
after: checkpoint
checkpoint: later
:::
Held until a checkpoint that does not come before it.
:::end
"""


def test_broken_lesson_yields_the_matching_problems():
    """Unknown explorable, state key, refused value, stage, double-correct checkpoint and missing folder are caught."""
    problems = "\n".join(lesson_problems(parse_lesson(BROKEN, Path("broken.md"))))
    expected = [
        "front matter names unknown explorable 'no-such-explorable'",
        "unknown stage 'blocks.0.attn.nope'",
        "'transformer-block-trace' has no state key 'colour'",
        "'transformer-block-trace' refuses attention_scale='7'",
        "'transformer-block-trace' refuses norm='batchnorm'",
        "'block-floor' refuses positions=True",  # YAML reads a bare `on` as true: quote it
        "unknown explorable 'made-up-explorable'",
        "checkpoint 'two-right' needs exactly one correct option",
        "checkpoint needs a unique id, got 'two-right'",
        "checkpoint 'two-right' has an option without feedback",
        "exercise folder 'lessons/no-such-lesson/exercise' does not exist",
        "exercise needs the command a student runs",
        "no explain directive",
        "answer opens after the prediction of 'block-floor', which the lesson does not ask for",
        "answer opens after checkpoint 'later', which does not come before it",
    ]
    for problem in expected:
        assert problem in problems, problem
    assert "unknown stage 'blocks.0.resid_pre'" not in problems
    assert "'blocks.9.resid_post'" in problems  # deeper than any explorable stacks


# --- the lesson page ------------------------------------------------------------------------------------

@pytest.mark.parametrize("lesson_id", ORDER)
def test_lesson_view_builds_without_a_server(lesson_id):
    """LessonView builds every part; the prediction gate appears once, where the predict directive puts it."""
    lesson = by_id(lesson_id)
    view = LessonView(lesson)
    layout = view.__panel__()
    assert isinstance(layout, pn.Column)
    assert len(view.parts) == len(lesson.blocks)
    assert "0 of 4 checkpoints done" in view.strip.object
    explorable = view.explorables[lesson.explorables[0]]
    gate = explorable.gate.__panel__()  # layouts hold a Viewer's panel, not the Viewer
    gates = [o for o in walk(layout) if o is gate]
    assert len(gates) == 1, "the explorable must hide its own gate when the lesson places it"


@pytest.mark.parametrize("lesson_id", ORDER)
def test_initial_state_reaches_the_explorable(lesson_id):
    """The explorable directive's state is applied without a refusal notice."""
    lesson = by_id(lesson_id)
    view = LessonView(lesson)
    explorable = view.explorables[lesson.explorables[0]]
    assert explorable.notices == []


@pytest.mark.parametrize("lesson_id", ORDER)
def test_progress_strip_flips_predict_experiment_implement_explain(lesson_id):
    """Commit the prediction, change a control, report the exercise, submit an explanation: four ticks, in order."""
    lesson = by_id(lesson_id)
    events: list[tuple[str, dict]] = []
    view = LessonView(lesson, on_event=lambda kind, payload: events.append((kind, payload)))
    eid = lesson.explorables[0]
    explorable = view.explorables[eid]
    progress = view.progress

    name, value = BEFORE_PREDICTING[eid]
    setattr(explorable.state, name, value)  # before predicting, a change is not an experiment
    assert not progress.experiment

    prediction = explorable.gate.prediction
    assert prediction.commit(next(iter(prediction.choices))) is None
    assert (progress.predict, progress.experiment) == (True, False)
    assert "1 of 4 checkpoints done" in view.strip.object

    name, value = EXPERIMENT[eid]
    setattr(explorable.state, name, value)
    assert progress.experiment and not progress.implement
    assert "2 of 4 checkpoints done" in view.strip.object

    assert not [b for b in walk(view) if isinstance(b, pn.widgets.Button) and "tests pass" in b.label.lower()], \
        "no self-report: the result comes from `blocktrace check`"
    exercise_id = lesson.directives("exercise")[0].attrs["id"]
    checked = {"id": exercise_id, "passed": True, "tests_passed": 12, "tests_total": 12, "failed": [],
               "numbers_match": True, "checked": True}
    view.resume([StoredEvent("exercise", None, checked)])  # what the page shows once the check arrives
    assert progress.implement and not progress.explain
    assert "3 of 4 checkpoints done" in view.strip.object

    text_area(view, "Your explanation").value = "Too short."
    button(view, "Submit explanation").clicks += 1
    assert not progress.explain
    text_area(view, "Your explanation").value = ("With zero updates the added block returns its input; replacing "
                                                 "erases it. A constant vector exposes mean-centring.")
    button(view, "Submit explanation").clicks += 1
    assert progress.explain
    assert "4 of 4 checkpoints done" in view.strip.object
    assert view.strip.object.count("✓") == 4

    assert "exercise" not in [kind for kind, _ in events]  # the page reports no result of its own


@pytest.mark.parametrize(("typed", "message"), [
    ("", "Your explanation is empty"),
    ("   \n  ", "Your explanation is empty"),
    ("Too short.", "yours has 10"),
    ("x" * 3000, "3,000 characters, 1,000 more than the 2,000 kept"),
])
def test_an_explanation_that_cannot_be_kept_is_refused_with_a_message_and_kept_in_the_box(typed, message):
    """An empty, too short or too long explanation gets a message next to the field and is not submitted; the
    text stays in the box (nothing is cut silently), and the counter under it says how long it is."""
    events: list[tuple[str, dict]] = []
    view = LessonView(by_id(ORDER[0]), on_event=lambda kind, payload: events.append((kind, payload)))
    box = text_area(view, "Your explanation")
    box.value = typed
    button(view, "Submit explanation").clicks += 1
    html = [o.object for o in page_objects(view) if isinstance(o, pn.pane.HTML)]
    shown = " ".join(text for text in html if "bt-field-error" in text)
    assert message in shown
    assert 'role="alert"' in shown
    assert not view.progress.explain and events == []
    assert box.value == typed
    assert f"{len(typed.strip()):,} / 2,000 characters" in next(text for text in html if "bt-counter" in text)


def test_the_explanation_counter_says_how_many_are_too_many():
    """The counter reads count / limit, and past the limit how many characters too many, in the error colour."""
    assert ">1,999 / 2,000 characters<" in explanation_counter(1999)
    assert "bt-muted" in explanation_counter(2000)
    assert "2,001 / 2,000 characters: 1 too many" in explanation_counter(2001)
    assert "bt-field-error" in explanation_counter(2001)


def test_index_lists_the_lessons_in_order():
    """The home page's lesson cards come in lesson order, each with its objectives and prerequisites."""
    html = lesson_cards()
    positions = [html.index(f'href="/lessons/{lesson_id}"') for lesson_id in ORDER]
    assert positions == sorted(positions)
    for lesson in LESSONS:
        assert lesson.objectives[0] in html.replace("&#x27;", "'")
        for prerequisite in lesson.prerequisites:
            assert prerequisite in html.replace("&#x27;", "'")


# --- figures the lessons quote ------------------------------------------------------------------------

def fmt(x: float) -> str:
    """Three decimals with a true minus sign, as the lessons print numbers."""
    return f"{x:.3f}".replace("-", "−")


def test_transformer_block_figures_match_the_engine():
    """The norms and SwiGLU units quoted in lesson 1 are what the single-token preset computes."""
    text = flat(markdown_of(by_id("transformer-block")))
    trace = run_preset("single-token")
    first, last = (float(np.linalg.norm(trace[k][0])) for k in ("blocks.0.resid_pre", "blocks.0.resid_post"))
    assert f"{fmt(first)} and {fmt(last)}" in text
    gate, value, hidden = (trace[f"blocks.0.mlp.{k}"][0] for k in ("gate", "value", "hidden"))
    assert f"gate of {fmt(gate[2])} and a value of {fmt(value[2])}" in text
    assert f"passes about {fmt(hidden[2])}" in text
    multiplier = float(ops.silu(np.asarray(gate[4])))
    assert multiplier > 1 and abs(hidden[4]) > abs(value[4])  # SiLU is no fraction: more than the value passes
    assert f"gate, {fmt(gate[4])}, and SiLU({fmt(gate[4])}) is about {fmt(multiplier)}" in text
    assert f"slightly more than its whole value: {fmt(value[4])} becomes {fmt(hidden[4])}" in text
    assert "most of its value" not in text
    assert trace["blocks.0.attn.pattern"].tolist() == [[[1.0]]]  # one token reads only itself
    v, w_o = trace["blocks.0.attn.v"][0, 0], trace.params["blocks.0.attn.W_O"]
    np.testing.assert_allclose(trace["blocks.0.attn_out"][0], v @ w_o, rtol=1e-12)
    assert "puts all of its weight, 1, on itself" in text
    constant = run_preset("single-token", vector=[2, 2, 2, 2])
    assert np.allclose(constant["blocks.0.ln1.normalized"], 1.0, atol=1e-6)
    big = run_preset("single-token", vector=[-30.0, 20.0, -10.0, 40.0])
    assert np.array_equal(np.sign(big["blocks.0.ln1.normalized"]), np.sign(big["blocks.0.resid_pre"]))
    assert "size and sign are lost" not in text and "its signs survive while the gains are positive" in text
    centred = run_preset("single-token", vector=[2, 2, 2, 2], norm="layernorm")
    assert np.allclose(centred["blocks.0.attn_out"], 0.0)
    assert np.allclose(centred["blocks.0.resid_post"], 2.0)


def vec(v: np.ndarray) -> str:
    return "[" + ", ".join(fmt(float(x)) for x in v) + "]"


def test_block_floor_figures_match_the_engine():
    """Orange's stages, the middle word's attention in both orders and every divergence lesson 2 claims."""
    text = flat(markdown_of(by_id("block-floor")))
    state = FloorState()  # the lesson's initial state: positions on, orange tracked
    t, orange = state.original, 2
    pre, attn, mid = (t[f"blocks.0.{k}"][orange] for k in ("resid_pre", "attn_out", "resid_mid"))
    assert f"{vec(pre)} + {vec(attn)} = {vec(mid)}" in text
    mlp, post = t["blocks.0.mlp_out"][orange], t["blocks.0.resid_post"][orange]
    assert f"{vec(mid)} + {vec(mlp)} = {vec(post)}" in text
    gate, w_out = t["blocks.0.mlp.gate"][orange], t.params["blocks.0.mlp.W_out"]
    feeding = np.flatnonzero(w_out[:, 0])  # the hidden units that feed the first output coordinate
    assert [int(i) + 1 for i in feeding] == [1, 3] and np.all(gate[feeding] < 0)
    assert "fed by hidden units 1 and 3" in text
    assert f"negative ({fmt(gate[0])} and {fmt(gate[2])})" in text
    assert mlp[0] == 0.0
    weights = t["blocks.0.attn.pattern"][0, orange]
    assert f"{fmt(weights[2])} of its weight on itself and only {fmt(weights[0])} and {fmt(weights[1])}" in text
    state.tracked = 1
    assert state.divergence() == 4
    mine, theirs = state.original["blocks.0.attn_out"][1], state.reversed_["blocks.0.attn_out"][1]
    assert f"{vec(mine)} in the original order and {vec(theirs)} in the reversed one" in text
    state.tracked = 0
    assert state.divergence() == 2  # the first word changes slot
    state.param.update(tracked=1, positions=False)
    assert state.divergence() is None
    state.causal = True
    assert state.divergence() == 4  # the mask alone breaks the symmetry


def test_block_floor_says_the_stream_grows_while_sublayer_inputs_stay_normalised():
    """Only the sublayer inputs are normalised: the stream's RMS grows floor after floor."""
    text = flat(markdown_of(by_id("block-floor")))
    assert "do not grow huge" not in text
    t = run_preset("eat-an-orange", n_layers=6)
    rms = [float(np.sqrt(np.mean(t[f"blocks.{i}.resid_pre"] ** 2))) for i in range(6)]
    rms.append(float(np.sqrt(np.mean(t.output ** 2))))
    assert all(np.diff(rms) > 0)
    assert f"RMS goes from {fmt(rms[0])} entering floor 1 to {fmt(rms[-1])} after floor 6" in text
    for i in range(6):
        assert np.allclose(np.sqrt(np.mean(t[f"blocks.{i}.ln1.normalized"] ** 2, axis=-1)), 1.0, atol=1e-5)
    assert "each layer has weights of its own" in text


# --- no answers before the student commits -----------------------------------------------------------


def answer_parts(view: LessonView) -> list[tuple[dict, Any]]:
    """(attributes, rendered part) of each answer directive of a lesson page."""
    return [(b.attrs, part) for b, part in zip(view.lesson.blocks, view.parts, strict=True)
            if not isinstance(b, str) and b.name == "answer"]


def document_text(view: LessonView) -> str:
    """Every word the page's parts put in its document now (panes' markup, widgets' labels and options), one
    string each, normalised as tests/answers.py reads what a server sent."""
    words: list[str] = []
    for obj in page_objects(view):
        if isinstance(obj, pn.pane.HTML):
            words.append(str(obj.object))
        elif isinstance(obj, pn.widgets.Widget):
            words += [str(getattr(obj, "label", None) or obj.name), *map(str, getattr(obj, "options", None) or [])]
    return "\n".join(normalised(w) for w in words)


def missing(answers: list[str], view: LessonView) -> list[str]:
    text = document_text(view)
    return [a[:60] for a in answers if a not in text]


def present(answers: list[str], view: LessonView) -> list[str]:
    text = document_text(view)
    return [a[:60] for a in answers if a in text]


@pytest.mark.parametrize("lesson_id", ORDER)
def test_held_parts_reach_the_page_only_once_the_commit_is_final(lesson_id):
    """Held means absent: until the prediction is final (in a classroom: stored) the page's document holds a note
    in place of every part the lesson holds, not their words or checkpoints. The store's answer (or a reload's
    restore, which settles the same way) opens them; a teacher's hold at the prediction step closes them again;
    a gate switched off (a teacher's link) opens them at once."""
    lesson = by_id(lesson_id)
    answers = lesson_answers(lesson)
    assert len(answers) > 10, "each lesson holds its comparison and what gives the result away"
    view = LessonView(lesson)
    gate = view.explorables[lesson.explorables[0]].gate.prediction
    gate.needs_store = True  # as in a classroom: final only once stored
    assert present(answers, view) == [] and WAITING["prediction"] in document_text(view)
    choice = next(iter(gate.choices))
    assert gate.commit(choice) is None and gate.saving
    assert present(answers, view) == [], "opened while still saving"
    gate.settle(choice, None)
    assert missing(answers, view) == [] and WAITING["prediction"] not in document_text(view)
    gate.held = True
    assert present(answers, view) == [] and HELD_BY_TEACHER in document_text(view)
    gate.held = False
    assert missing(answers, view) == []
    teacher = LessonView(lesson)
    teacher.explorables[lesson.explorables[0]].gate.prediction.skipped = True
    assert missing(answers, teacher) == []


def test_what_answers_the_claim_opens_only_after_a_claim():
    """The block floor's claim (where the middle word's traces first part) has answers of its own, the
    checkpoints among them: absent after the bet, present once a claim is made."""
    lesson = by_id("block-floor")
    answers = lesson_answers(lesson, after="claim")
    [checkpoint] = [d for d in lesson.directives("checkpoint") if d.attrs["id"] == "first-divergence"]
    assert directive_texts(checkpoint)[0] in answers  # its feedback would say where they part
    view = LessonView(lesson)
    state = view.explorables["block-floor"].state
    state.bet.commit(next(iter(state.bet.choices)))
    assert present(answers, view) == [] and WAITING["claim"] in document_text(view)
    state.claim(6)
    assert missing(answers, view) == []


def test_the_divergence_answer_opens_only_after_a_claim():
    view = LessonView(by_id("block-floor"))
    [(attrs, part)] = [(a, p) for a, p in answer_parts(view) if a.get("title") == "An answer"]
    assert "first divergence is at stage 4" in attrs["text"] and "stage 4" not in part.object
    state = view.explorables["block-floor"].state
    state.bet.commit(next(iter(state.bet.choices)))
    assert "stage 4" not in part.object  # the bet is not the claim
    state.claim(6)  # a wrong claim opens it too: the student has committed an answer
    assert "first divergence is at stage 4" in " ".join(part.object.split())
    state.tracked = 0  # the claim is cleared with a new tracked word; the answer stays open
    assert "first divergence is at stage 4" in " ".join(part.object.split())


@pytest.mark.parametrize(("directive", "problem"), [
    (":::answer\nafter: later\nexplorable: block-floor\n:::\ntext\n:::end", "opens after one of"),
    (":::answer\nafter: claim\n:::\ntext\n:::end", "names its explorable"),
    (":::answer\nafter: checkpoint\ncheckpoint: q1\n:::\ntext", "not closed with :::end"),
    (":::answer\nafter: prediction\nexplorable: x\n:::\n:::predict\nexplorable: x\n:::\n:::end", "not 'predict'"),
    (":::answer\nafter: prediction\nexplorable: x\n:::\n:::answer\nafter: claim\n:::\n:::end", "not 'answer'"),
])
def test_a_malformed_answer_is_refused_with_its_line(directive, problem):
    text = ("---\nid: x\ntitle: X\norder: 9\nobjectives: []\nprerequisites: []\nexplorables: []\nstages: []\n---\n"
            f"Intro\n{directive}\n")
    with pytest.raises(ValueError, match=problem):
        parse_lesson(text)


# --- every number a lesson quotes is one the engine computes (issue 18) -----------------------------------

QUOTED = re.compile(r"(?<![\d.])−?\d{1,3}\.\d{2,}(?![\d.])")  # 0.25, −0.143, 6.184; not arXiv ids


def engine_numbers(traces) -> set[str]:
    """Every value, row norm, row RMS and stream RMS the traces hold, and SiLU of every gate, at 3 decimals."""
    pool: set[float] = set()
    for trace in traces:
        for stage in trace:
            values = np.asarray(stage.values, dtype=float)
            pool.update(values.ravel().tolist())
            rows = values.reshape(-1, values.shape[-1])
            pool.update(np.linalg.norm(rows, axis=-1).tolist())
            pool.update(np.sqrt(np.mean(rows**2, axis=-1)).tolist())
            pool.add(float(np.sqrt(np.mean(values**2))))
            if stage.key.endswith("mlp.gate"):
                pool.update(ops.silu(values).ravel().tolist())
    return {fmt(x) for x in pool} | {fmt(x)[:-1].rstrip("0") for x in pool if fmt(x)[:-1].rstrip("0")[-1:] != "."}


def lesson_traces(lesson_id: str):
    if lesson_id == "transformer-block":
        yield run_preset("single-token")
        for changes in ({"attention_scale": 0.0}, {"attention_scale": 0.0, "mlp_scale": 0.0},
                        {"attention_scale": 0.0, "mlp_scale": 0.0, "residual": "replace"}):
            yield run_preset("single-token", **changes)
        yield run_preset("single-token", vector=[2, 2, 2, 2])
        yield run_preset("single-token", vector=[2, 2, 2, 2], norm="layernorm")
    elif lesson_id == "block-floor":
        for positions, causal, reverse in itertools.product((True, False), repeat=3):
            yield run_preset("eat-an-orange", positions=positions, causal=causal, reverse=reverse)
        yield run_preset("eat-an-orange", n_layers=6)


@pytest.mark.parametrize("lesson_id", ["transformer-block", "block-floor"])
def test_every_number_a_lesson_quotes_is_one_the_engine_computes(lesson_id):
    text = by_id(lesson_id).path.read_text(encoding="utf-8")
    quoted = set(QUOTED.findall(text))
    assert quoted, "the lesson quotes numbers"
    pool = engine_numbers(lesson_traces(lesson_id))
    assert sorted(quoted - pool) == []


# --- decoder-block wording (issue 18) ---


def test_decoder_block_page_keeps_numpy_text_and_early_gradients_off_the_page():
    """On the lesson page itself: a wrong split shows the lesson's words, never NumPy's, and no gradient figure is
    shown before the lab's depth panel explains it."""
    view = LessonView(by_id("decoder-block"))
    lab = view.explorables["decoder-block-lab"]
    assert lab.state.prediction.commit(next(iter(lab.state.prediction.choices))) is None
    lab.state.wrong_split = True
    parts = page_parts(lab)  # the lab's panels are drawn in the browser from its payload
    html = [o.object for o in page_objects(view) if isinstance(o, pn.pane.HTML) and isinstance(o.object, str)]
    page = " ".join(html + parts)
    assert "shape mismatch" in page
    for numpy_text in ("gufunc", "signature", "operand", "(n?,k)"):
        assert numpy_text not in page, numpy_text
    depth = parts.index("6. Depth")
    first_gradient = next(i for i, part in enumerate(parts) if "at block 1's input" in part)
    assert first_gradient > depth
