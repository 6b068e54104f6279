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

    :::answer                      (Markdown that explains a result, folded until the student has
    after: prediction              committed what it explains: `prediction` or `claim` of an explorable,
    explorable: block-floor        or a `checkpoint` by its id; `title` names the folded part)
    title: The comparison, step by step
    :::
    Markdown …
    :::end
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
        return [b for b in self.blocks if isinstance(b, Directive) and (name is None or b.name == name)]

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
    blocks: list[str | Directive] = []
    markdown: list[str] = []
    i = end + 1
    while i < len(lines):
        line = lines[i]
        if line.startswith(":::") and line.strip() != ":::":
            name = line[3:].strip()
            if name not in DIRECTIVES:
                raise LessonError(f"{where}:{i + 1}: unknown directive {name!r}")
            try:
                close = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == ":::")
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
    return Lesson(
        id=str(front["id"]), title=str(front["title"]), order=int(front["order"]),
        objectives=list(front["objectives"]), prerequisites=list(front["prerequisites"] or []),
        explorables=list(front["explorables"]), stages=list(front["stages"]),
        summary=str(front.get("summary", "")), blocks=blocks, path=path,
    )


def _answer(lines: list[str], start: int, close: int, attrs: dict[str, Any], where: str) -> int:
    """Check an answer directive's attributes and take its Markdown (up to ANSWER_END) into attrs["text"];
    the index of its ANSWER_END line."""
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
    body = lines[close + 1:end]
    if any(line.startswith(":::") for line in body):
        raise LessonError(f"{where}:{start + 1}: an answer holds Markdown only, no directives")
    attrs["text"] = "\n".join(body)
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
