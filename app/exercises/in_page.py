"""The exercise done in the page, for a device without Python: each function's body rebuilt from lines offered (the
right ones and some wrong on purpose), chosen and put in order, and checked here on the server.

An exercise folder may hold in_page.yaml (package.IN_PAGE_FILE):

    intro: What to do, for the student.
    parts:
      - function: rms_norm          # a function of the starter file: the student rebuilds its body
        lines:                      # the body, in one right order
          - key: rms
            code: rms = np.sqrt(np.mean(x**2, axis=-1, keepdims=True) + eps)
          - key: out
            code: return gain * x / rms
            after: [rms]            # lines this one must come below (any order that keeps them is right)
        wrong:                      # lines offered that are wrong on purpose
          - code: rms = np.sqrt(np.mean(x**2) + eps)
            instead_of: rms         # the right line it stands in for
            hint: Each row gets its own root mean square.

The page offers a part's lines sorted by their text (the order offered says nothing of the answer) and one place
per line of the body. Only the server reads this file: the download and the package students install leave it
out, and the page gets the lines' text, never which are right. tests/unit/test_in_page_exercises.py puts the
lines into the starter and runs the exercise's own tests: the right lines pass in every order this file allows,
and fail with each wrong line and in every other order.
"""

from __future__ import annotations

import ast
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import yaml

from blocktrace.app.exercises.package import IN_PAGE_FILE
from blocktrace.app.package_data import ROOT

__all__ = ["InPage", "Line", "Part", "PartVerdict", "Verdict", "Wrong", "check", "load_in_page", "result_payload",
           "with_bodies"]

log = logging.getLogger(__name__)

EMPTY_PLACE = "Put a line in every place."
TWICE = "The same line is in two places. Each line goes in once."


@dataclass(frozen=True)
class Line:
    key: str
    code: str
    after: tuple[str, ...] = ()  # keys of the lines this one must come below


@dataclass(frozen=True)
class Wrong:
    code: str
    instead_of: str  # the key of the right line it stands in for
    hint: str  # shown when it is chosen


@dataclass(frozen=True)
class Part:
    function: str
    head: str  # the function's `def` line and docstring, as the starter file has them
    lines: tuple[Line, ...]
    wrong: tuple[Wrong, ...]

    @property
    def offered(self) -> tuple[str, ...]:
        """Every line the page offers for this part, sorted by its text."""
        return tuple(sorted([line.code for line in self.lines] + [w.code for w in self.wrong]))


@dataclass(frozen=True)
class InPage:
    intro: str
    parts: tuple[Part, ...]


@dataclass(frozen=True)
class PartVerdict:
    function: str
    right: bool
    hint: str  # what is wrong, for the student ("" when right)


@dataclass(frozen=True)
class Verdict:
    parts: tuple[PartVerdict, ...]

    @property
    def passed(self) -> bool:
        return all(p.right for p in self.parts)

    @property
    def right(self) -> int:
        return sum(p.right for p in self.parts)


def _function(tree: ast.Module, name: str) -> ast.FunctionDef:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    raise ValueError(f"the starter has no function {name!r}")


def _has_docstring(node: ast.FunctionDef) -> bool:
    first = node.body[0]
    return isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str)


def _head(source: str, node: ast.FunctionDef) -> str:
    """The `def` line(s) and the docstring, as written."""
    end = node.body[0].end_lineno if _has_docstring(node) else node.body[0].lineno - 1
    return "".join(source.splitlines(keepends=True)[node.lineno - 1:end]).rstrip()


def with_bodies(source: str, bodies: Mapping[str, Sequence[str]]) -> str:
    """The starter's text with the body of each function in `bodies` (all but its docstring) replaced by those
    lines, indented as the body was."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    edits = []
    for name, body in bodies.items():
        node = _function(tree, name)
        kept = 1 if _has_docstring(node) else 0
        indent = " " * node.body[0].col_offset
        start = node.body[kept].lineno - 1 if len(node.body) > kept else node.body[0].end_lineno
        edits.append((start, node.body[-1].end_lineno, [f"{indent}{code}\n" for code in body]))
    for start, end, new in sorted(edits, reverse=True):
        lines[start:end] = new
    return "".join(lines)


def _part(raw: dict[str, Any], source: str, tree: ast.Module) -> Part:
    function = str(raw["function"])
    lines = tuple(Line(str(x["key"]), str(x["code"]), tuple(str(k) for k in x.get("after", ()))) for x in raw["lines"])
    wrong = tuple(Wrong(str(x["code"]), str(x["instead_of"]), " ".join(str(x["hint"]).split()))
                  for x in raw.get("wrong", ()))
    keys = [line.key for line in lines]
    codes = [line.code for line in lines] + [w.code for w in wrong]
    if len(set(keys)) != len(keys) or len(set(codes)) != len(codes):
        raise ValueError(f"{function}: every line's key and text must differ from the others'")
    unknown = {k for line in lines for k in line.after} | {w.instead_of for w in wrong}
    if not unknown <= set(keys):
        raise ValueError(f"{function}: 'after' or 'instead_of' names no line of the answer: "
                         f"{sorted(unknown - set(keys))}")
    return Part(function, _head(source, _function(tree, function)), lines, wrong)


@cache
def load_in_page(folder: str, file: str) -> InPage | None:
    """The in-page exercise of the exercise in `folder` (its path in the lesson), whose student edits `file`;
    None when the folder has none (or, in a package made for students, lacks it)."""
    path, starter = ROOT / folder / IN_PAGE_FILE, ROOT / folder / file
    if not path.is_file() or not file or not starter.is_file():
        return None
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    source = starter.read_text(encoding="utf-8")
    tree = ast.parse(source)
    return InPage(" ".join(str(raw.get("intro", "")).split()), tuple(_part(p, source, tree) for p in raw["parts"]))


def _check_part(part: Part, chosen: Sequence[str | None]) -> PartVerdict:
    if len(chosen) != len(part.lines) or any(c is not None and c not in part.offered for c in chosen):
        raise ValueError(f"{part.function}: not an arrangement of the lines offered")
    if any(c is None for c in chosen):
        return PartVerdict(part.function, False, EMPTY_PLACE)
    wrong = {w.code: w for w in part.wrong}
    for code in chosen:
        if code in wrong:
            return PartVerdict(part.function, False, wrong[code].hint)
    if len(set(chosen)) < len(chosen):
        return PartVerdict(part.function, False, TWICE)
    by_key = {line.key: line for line in part.lines}
    place = {line.key: chosen.index(line.code) for line in part.lines}
    for line in sorted(part.lines, key=lambda x: place[x.key]):
        for needed in line.after:
            if place[needed] > place[line.key]:
                return PartVerdict(part.function, False, f"“{line.code}” uses what “{by_key[needed].code}” makes, "
                                                         "so it goes below that line.")
    return PartVerdict(part.function, True, "")


def check(exercise: InPage, arrangement: Mapping[str, Sequence[str | None]]) -> Verdict:
    """Each part's verdict on the lines the student put in its places (None: an empty place). ValueError for an
    arrangement the page could not have sent (a part missing, a line it does not offer)."""
    return Verdict(tuple(_check_part(part, list(arrangement[part.function])) for part in exercise.parts))


def result_payload(exercise_id: str, verdict: Verdict, arrangement: Mapping[str, Sequence[str | None]],
                   attempts: int) -> dict[str, Any]:
    """The exercise event of an in-page check: shaped as a `blocktrace check` report (passed, checked, how many
    functions right of how many), so the roster, the LMS score and xAPI count it alike, and "way": "page"."""
    return {"id": exercise_id, "way": "page", "checked": True, "passed": verdict.passed,
            "tests_passed": verdict.right, "tests_total": len(verdict.parts),
            "failed": [p.function for p in verdict.parts if not p.right], "attempts": attempts,
            "arrangement": {name: list(lines) for name, lines in arrangement.items()}}
