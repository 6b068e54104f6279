"""What students read says things in their words: no file paths, scripts, commands or test talk of ours."""

from __future__ import annotations

import re
from collections.abc import Iterator
from html import unescape
from typing import Any

import panel as pn
import pytest

from blocktrace.app.lessons.loading import load_lessons
from blocktrace.app.server.registry import EXPLORABLE_SPECS

# A developer's words: a source or data file, our scripts and commands, and talk of tests and fixtures. (The file
# a student edits in an exercise and `blocktrace check` are theirs: the exercise names them.)
DEVELOPER_WORDS = re.compile(
    r"[\w/-]+\.(?:py|json|ya?ml)\b|benchmarks/|blocktrace (?:trace|serve)\b|--[a-z][a-z-]+|\bfixtures?\b|\bpytest\b"
    r"|lesson's tests|\bsweep\.json\b|\bpanel \d+ runs\b",
    re.IGNORECASE)
NOT_PROSE = {"id", "explorable", "src", "after", "checkpoint", "file", "path", "state", "height", "correct"}
LESSONS = load_lessons()


def strings(value: Any) -> Iterator[str]:
    """Every string inside a directive's attributes, but for those naming files, ids and settings."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, inner in value.items():
            if key not in NOT_PROSE:
                yield from strings(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from strings(inner)


def lesson_text(lesson) -> str:
    prose = [b for b in lesson.blocks if isinstance(b, str)]
    said = [s for d in lesson.directives() for s in strings(d.attrs)]
    return "\n".join(prose + said)


def shown_text(obj: Any) -> Iterator[str]:
    """The words of a Panel tree: its panes' text (tags taken out) and its widgets' labels and descriptions."""
    if isinstance(obj, pn.viewable.Viewer):
        yield from shown_text(obj.__panel__())
        return
    if isinstance(obj, pn.pane.HTML) and isinstance(obj.object, str):
        yield unescape(re.sub(r"<[^>]+>", " ", obj.object))
    if isinstance(obj, pn.widgets.Widget):
        yield from (str(v) for v in (getattr(obj, "label", None), obj.name, getattr(obj, "description", None)) if v)
    for child in getattr(obj, "objects", None) or []:
        yield from shown_text(child)


def developer_words(text: str) -> list[str]:
    code_free = re.sub(r"```.*?```", " ", text, flags=re.DOTALL)  # a lesson's own code listings may use any words
    return sorted({m.group(0) for m in DEVELOPER_WORDS.finditer(code_free)})


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.id)
def test_a_lesson_speaks_to_students(lesson) -> None:
    """A lesson's prose, questions, feedback and exercise text name no file, script, command or test of ours."""
    assert developer_words(lesson_text(lesson)) == []


@pytest.mark.parametrize("explorable_id", sorted(EXPLORABLE_SPECS))
def test_an_explorable_speaks_to_students(explorable_id: str) -> None:
    """Everything an explorable shows with its gate open (intro, panels, notes, labels) names no file, script,
    command or test of ours."""
    explorable = EXPLORABLE_SPECS[explorable_id].load()(query={}, embed=False, predict=False)
    assert developer_words("\n".join(shown_text(explorable))) == []


def test_the_check_finds_what_it_is_for() -> None:
    """The words this test refuses are found where they stand."""
    found = developer_words("Run `blocktrace trace --preset decoder-lab`; see benchmarks/race_sweep.py and the "
                            "committed PyTorch fixtures in sweep.json.")
    assert found == ["--preset", "benchmarks/race_sweep.py", "blocktrace trace", "fixtures", "sweep.json"]
