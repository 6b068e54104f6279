"""What each page answers before the student commits, read from the page's own data, and text normalised so
that the server's messages and a page's visible text can be searched for it (tests/app/test_lessons.py and
tests/browser/test_no_answer_before_the_commit.py)."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from typing import Any

from blocktrace.app.lessons.loading import Directive, Lesson
from blocktrace.app.lessons.markdown import render
from blocktrace.app.package_data import LESSONS_DIR
from blocktrace.app.server.registry import EXPLORABLE_SPECS

__all__ = ["directive_texts", "explorable_answers", "lesson_answers", "normalised", "sent_text"]

TAG = re.compile(r"<[^>]*>")
BLOCK = re.compile(r"</?(?:p|li|tr|h[1-6]|pre|ul|ol|table|thead|tbody|blockquote|section|div|caption)\b[^>]*>")
SHORTEST = 20  # characters: a shorter piece ("Recap", a cell such as "20 / 0") also appears where it answers nothing


def normalised(text: str) -> str:
    """Markup as the words a reader sees: entities resolved (a pane's markup arrives escaped once or twice over),
    tags and whitespace runs as single spaces."""
    for _ in range(3):
        text = html.unescape(text)
    return " ".join(TAG.sub(" ", text).split())


def pieces(markup: str) -> list[str]:
    """The words of each paragraph, list item, table row and heading of `markup`, the short ones left out."""
    return [p for p in (normalised(part) for part in BLOCK.split(markup)) if len(p) >= SHORTEST]


def directive_texts(directive: Directive) -> list[str]:
    """What a directive puts on the page in words: a checkpoint's question and options, a prompt, an exercise."""
    a = directive.attrs
    found = {"checkpoint": [a.get("question"), *(o.get("text") for o in a.get("options") or [])],
             "explain": [a.get("prompt")], "exercise": [a.get("title"), a.get("about")]}.get(directive.name, [])
    return [t for t in (normalised(str(x)) for x in found if x) if len(t) >= SHORTEST]


def lesson_answers(lesson: Lesson, after: str = "prediction") -> list[str]:
    """The words of every part the lesson holds until `after` (its answer directives): prose and directives."""
    found: list[str] = []
    for answer in lesson.directives("answer"):
        if answer.attrs["after"] != after:
            continue
        for block in answer.attrs["blocks"]:
            found += pieces(render(block)) if isinstance(block, str) else directive_texts(block)
    return found


def _race_answers(query: dict[str, str]) -> list[str]:
    """The race's verdict as its status line gives it, for the seed and set-up of the lesson's sweep that the
    page starts with (lessons/train-the-block/sweep.json): the race itself runs only after the commit."""
    from blocktrace.explorables.train_the_block.state import PREDICTION_CHOICES, outcome

    outcomes = json.loads((LESSONS_DIR / "train-the-block" / "sweep.json").read_text(encoding="utf-8"))["outcomes"]
    seed = query.get("seed", "0")
    reached = [outcomes[f"pre-vs-post-12/{side}"][seed]["reached"] for side in "ab"]
    return [f"Decided: {PREDICTION_CHOICES[outcome(*reached)]}"]


def _lab_answers(meta: dict[str, Any]) -> list[str]:
    """The words the drawn decoder lab's payload carries once the prediction is in, each as one string of it (the
    browser writes each as one text): the invariants' count and evidence, the causal test's verdict, its table's
    caption and its map's text alternative, each head's weights in words. The numbers travel as one binary
    buffer, with no attention weight or |Δ output| before the commit (tests/unit/test_lab_payload.py)."""
    inv, causal = meta["invariants"], meta["causal"]
    found = [inv["head"], *(detail for *_, detail in inv["items"])]
    found += [causal["badge"][2], causal["table"]["caption"], *causal["words"]]
    found += [s for head in meta["heads"] for s in head["words"]]
    return [t for t in (normalised(s) for s in found) if len(t) >= SHORTEST]


def explorable_answers(explorable_id: str, query: dict[str, str]) -> list[str]:
    """What the explorable shows once the prediction is in, for the page's `query`: built here with the gate
    off (as a teacher's link opens it), from the same panes the page fills."""
    if explorable_id == "train-the-block":
        return _race_answers(query)
    view = EXPLORABLE_SPECS[explorable_id].load()(query=query, embed=True, predict=False)
    if explorable_id == "transformer-block-trace":  # drawn in the browser: its words come in the payload
        return _drawn_answers(json.loads(view.drawing.meta))
    if explorable_id == "block-floor":
        return _floor_answers(json.loads(view.drawing.meta))
    if explorable_id == "decoder-block-lab":
        return _lab_answers(json.loads(view.drawing.meta))
    raise KeyError(explorable_id)


def _drawn_answers(meta: dict[str, Any]) -> list[str]:
    """The words a browser-drawn explorable's payload carries once unlocked: its announcement and each chart's
    text alternative (every stage's norm, the inspected stage's components, each SwiGLU unit's numbers). Its other
    numbers travel as one binary buffer, empty before the commit (tests/unit/test_trace_payload.py)."""
    sentences = [meta["announce"], *(s for words in meta["words"].values() for s in words)]
    return [t for t in (normalised(s) for s in sentences) if len(t) >= SHORTEST]


def _floor_answers(meta: dict[str, Any]) -> list[str]:
    """The words the drawn block floor's payload carries once the bet is in: each order's table caption, each
    chart's text alternative (the tracked word's vector at the stage, every attention weight), the weights' row
    sums and the sentence that settles the bet. The tables' numbers travel as one binary buffer, empty before the
    commit (tests/app/test_predict_gate.py, tests/app/test_locked_controls.py)."""
    found = [*(meta["settle"] or [])[:1]]
    for o in meta["orders"]:
        found += [o["caption"], *o["arrow_words"], *o["heat_words"], o["sums"]]
    return [t for t in (normalised(s) for s in found) if len(t) >= SHORTEST]


def _strings(obj: Any) -> Iterator[str]:
    if isinstance(obj, str):
        yield obj
        if obj.startswith("{"):  # JSON text inside a property (a drawn page's payload): its strings too
            try:
                inner = json.loads(obj)
            except ValueError:
                return
            yield from _strings(inner)
    elif isinstance(obj, dict):
        for value in obj.values():
            yield from _strings(value)
    elif isinstance(obj, list):
        for value in obj:
            yield from _strings(value)


def sent_text(messages: list[str | bytes]) -> str:
    """Every string in what the server sent (a page's HTML, websocket frames: Bokeh's JSON parts and its
    binary buffers), normalised and joined."""
    out = []
    for message in messages:
        text = message.decode("utf-8", "replace") if isinstance(message, bytes) else message
        try:
            out += [normalised(s) for s in _strings(json.loads(text))]
        except ValueError:
            out.append(normalised(text))
    return "\n".join(out)
