"""Lessons are data: a Markdown file with front matter and directives that place live parts.

    ---
    id: transformer-block          (front matter, YAML)
    title: …
    order: 1
    objectives: [...]
    prerequisites: [...]
    explorables: [transformer-block-trace]
    stages: [blocks.0.resid_pre, …]
    ---
    Markdown …
    :::explorable                  (a directive: a YAML mapping between ":::name" and ":::")
    id: transformer-block-trace
    state: {attention_scale: "0"}
    height: 780
    :::

Directives: explorable (id, state, height), predict (explorable), checkpoint (id, question, options
[{text, correct, feedback}]), exercise (id, title, path, command), explain (prompt), and answer:

    :::answer                      (a part held on the server until the student has committed what it
    after: prediction              answers: `prediction` or `claim` of an explorable, or a `checkpoint` by
    explorable: block-floor        its id. Until then the page holds a note in its place, not the part.
    title: The comparison, step by step      `title`, optional, names the part and is shown in both states)
    :::
    Markdown, and checkpoint, exercise or explain directives …
    :::end

Whatever states or depends on a result the student is asked to predict goes inside an answer: the
explanation of a result, a table of counts, a checkpoint whose question or feedback gives it away.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from blocktrace.app.package_data import LESSONS_DIR

__all__ = ["Directive", "Lesson", "lesson_for_explorable", "load_lessons", "parse_lesson"]

DIRECTIVES = ("explorable", "predict", "checkpoint", "exercise", "explain", "answer")
ANSWER_AFTER = ("prediction", "claim", "checkpoint")  # what opens an answer
ANSWER_END = ":::end"
IN_ANSWER = ("checkpoint", "exercise", "explain")  # the directives an answer may hold
FRONT_FIELDS = ("id", "title", "order", "objectives", "prerequisites", "explorables", "stages")


class LessonError(ValueError):
    """A lesson file that cannot be read, with the file and line."""


@dataclass(frozen=True)
class Directive:
    name: str
    attrs: dict[str, Any]
    line: int


@dataclass(frozen=True)
class Lesson:
    id: str
    title: str
    order: int
    objectives: list[str]
    prerequisites: list[str]
    explorables: list[str]
    stages: list[str]
    summary: str
    blocks: list[str | Directive] = field(default_factory=list)  # Markdown text or a directive
    path: Path | None = None

    @property
    def route(self) -> str:
        return f"/lessons/{self.id}"

    def directives(self, name: str | None = None) -> list[Directive]:
        """The lesson's directives in order, those inside an answer included (after their answer)."""
        found = []
        for b in self.blocks:
            if isinstance(b, Directive):
                found += [b, *(d for d in b.attrs.get("blocks", []) if isinstance(d, Directive))]
        return [d for d in found if name is None or d.name == name]

    def markdown_parts(self) -> list[str]:
        """Every piece of the lesson's Markdown, in order: the prose and each answer's text."""
        return [b if isinstance(b, str) else b.attrs["text"] for b in self.blocks
                if isinstance(b, str) or b.name == "answer"]


def parse_lesson(text: str, path: Path | None = None) -> Lesson:
    where = str(path) if path else "lesson"
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        raise LessonError(f"{where}: a lesson starts with front matter between --- lines")
    try:
        end = lines.index("---", 1)
    except ValueError:
        raise LessonError(f"{where}: front matter is not closed with ---") from None
    front = yaml.safe_load("\n".join(lines[1:end])) or {}
    missing = [f for f in FRONT_FIELDS if f not in front]
    if missing:
        raise LessonError(f"{where}: front matter lacks {', '.join(missing)}")
    return Lesson(
        id=str(front["id"]), title=str(front["title"]), order=int(front["order"]),
        objectives=list(front["objectives"]), prerequisites=list(front["prerequisites"] or []),
        explorables=list(front["explorables"]), stages=list(front["stages"]),
        summary=str(front.get("summary", "")), blocks=_blocks(lines, end + 1, len(lines), where), path=path,
    )


def _blocks(lines: list[str], start: int, stop: int, where: str, answer: int | None = None) -> list[str | Directive]:
    """Markdown text and directives of lines[start:stop]; `answer` is the line of the answer they are inside."""
    blocks: list[str | Directive] = []
    markdown: list[str] = []
    i = start
    while i < stop:
        line = lines[i]
        if line.startswith(":::") and line.strip() != ":::":
            name = line[3:].strip()
            if name not in DIRECTIVES:
                raise LessonError(f"{where}:{i + 1}: unknown directive {name!r}")
            if answer is not None and name not in IN_ANSWER:
                raise LessonError(f"{where}:{answer + 1}: an answer holds Markdown and {', '.join(IN_ANSWER)} "
                                  f"directives, not {name!r} (line {i + 1})")
            try:
                close = next(j for j in range(i + 1, stop) if lines[j].strip() == ":::")
            except StopIteration:
                raise LessonError(f"{where}:{i + 1}: directive {name!r} is not closed with :::") from None
            attrs = yaml.safe_load("\n".join(lines[i + 1:close])) or {}
            if not isinstance(attrs, dict):
                raise LessonError(f"{where}:{i + 1}: directive {name!r} needs key: value lines")
            if markdown:
                blocks.append("\n".join(markdown))
                markdown = []
            if name == "answer":
                close = _answer(lines, i, close, attrs, where)
            blocks.append(Directive(name, attrs, i + 1))
            i = close + 1
            continue
        markdown.append(line)
        i += 1
    if markdown:
        blocks.append("\n".join(markdown))
    return blocks


def _answer(lines: list[str], start: int, close: int, attrs: dict[str, Any], where: str) -> int:
    """Check an answer directive's attributes and read what it holds (up to ANSWER_END) into attrs["blocks"],
    its Markdown alone into attrs["text"]; the index of its ANSWER_END line."""
    after = attrs.get("after")
    if after not in ANSWER_AFTER:
        raise LessonError(f"{where}:{start + 1}: an answer opens after one of {', '.join(ANSWER_AFTER)}, "
                          f"not {after!r}")
    needs = "checkpoint" if after == "checkpoint" else "explorable"
    if not attrs.get(needs):
        raise LessonError(f"{where}:{start + 1}: an answer after a {after} names its {needs}")
    try:
        end = next(j for j in range(close + 1, len(lines)) if lines[j].strip() == ANSWER_END)
    except StopIteration:
        raise LessonError(f"{where}:{start + 1}: answer is not closed with {ANSWER_END}") from None
    # Blank lines between the directives it holds are no part of it.
    attrs["blocks"] = [b for b in _blocks(lines, close + 1, end, where, answer=start) if not isinstance(b, str)
                       or b.strip()]
    attrs["text"] = "\n\n".join(b for b in attrs["blocks"] if isinstance(b, str))
    return end


@cache
def load_lessons(directory: Path = LESSONS_DIR) -> tuple[Lesson, ...]:
    """Every lessons/<id>/lesson.md, in lesson order; an installation without them is an error, not an empty list."""
    paths = sorted(directory.glob("*/lesson.md"))
    if not paths:
        raise FileNotFoundError(f"no lessons in {directory}: the installation is missing blocktrace's lessons/ folder")
    lessons = [parse_lesson(p.read_text(encoding="utf-8"), p) for p in paths]
    return tuple(sorted(lessons, key=lambda lesson: lesson.order))


def lesson(lesson_id: str) -> Lesson:
    return next(x for x in load_lessons() if x.id == lesson_id)


def lesson_for_explorable(explorable_id: str) -> str | None:
    """The first lesson (in order) that uses an explorable: where its standalone page's events belong."""
    return next((x.id for x in load_lessons() if explorable_id in x.explorables), None)
