"""The in-page exercises agree with the exercises' own tests: the server says "right" exactly when the lines, put
into the starter file, make the exercise's tests pass."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from blocktrace.app.exercises import in_page
from blocktrace.app.exercises.bundle import exercises
from blocktrace.app.exercises.runner import load_module, run_tests

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = sorted({(e.folder, e.file) for e in exercises().values()})
PARTS = [(folder, file, part.function) for folder, file in FOLDERS
         for part in in_page.load_in_page(folder, file).parts]


def right_bodies(exercise: in_page.InPage) -> dict[str, list[str]]:
    return {part.function: [line.code for line in part.lines] for part in exercise.parts}


def passes_its_tests(tmp_path: Path, folder: str, file: str, bodies: dict[str, list[str]]) -> bool:
    """Whether every test of the exercise passes on the starter with these bodies, run as `blocktrace check` runs
    them (a body that does not even load fails)."""
    source = (ROOT / folder / file).read_text(encoding="utf-8")
    path = tmp_path / file
    path.write_text(in_page.with_bodies(source, bodies), encoding="utf-8")
    try:
        module = load_module(path, "in_page_under_test")
    except SyntaxError:
        return False
    return all(o.passed for test in sorted((ROOT / folder).glob("test_*.py")) for o in run_tests(test, module))


def test_every_exercise_has_an_in_page_version():
    """A student without Python can do every lesson's exercise in the page."""
    assert FOLDERS and all(in_page.load_in_page(folder, file) is not None for folder, file in FOLDERS)


@pytest.mark.parametrize(("folder", "file"), FOLDERS)
def test_the_starter_fails_and_the_right_lines_pass(tmp_path, folder, file):
    """The starter as given fails its tests; with every part's right lines in it, every test passes, and the server
    says so too."""
    exercise = in_page.load_in_page(folder, file)
    assert not passes_its_tests(tmp_path, folder, file, {})
    assert passes_its_tests(tmp_path, folder, file, right_bodies(exercise))
    assert in_page.check(exercise, right_bodies(exercise)).passed


@pytest.mark.parametrize(("folder", "file", "function"), PARTS)
def test_each_order_and_each_wrong_line_is_judged_as_the_tests_judge_it(tmp_path, folder, file, function):
    """Every order of a part's right lines (the others right) passes the tests exactly when the server accepts it,
    and each wrong line, in place of the line it stands for, fails the tests and gets its own hint."""
    exercise = in_page.load_in_page(folder, file)
    part = next(p for p in exercise.parts if p.function == function)
    bodies = right_bodies(exercise)
    disagree = []
    for order in itertools.permutations(line.code for line in part.lines):
        verdict = in_page.check(exercise, {**bodies, function: list(order)}).parts
        accepted = next(v for v in verdict if v.function == function).right
        if accepted != passes_its_tests(tmp_path, folder, file, {**bodies, function: list(order)}):
            disagree.append((accepted, order))
    assert not disagree, f"the server's verdict and the tests differ (server said, order): {disagree}"
    for wrong in part.wrong:
        body = [wrong.code if line.key == wrong.instead_of else line.code for line in part.lines]
        assert not passes_its_tests(tmp_path, folder, file, {**bodies, function: body}), f"{wrong.code!r} passes"
        verdict = in_page.check(exercise, {**bodies, function: body})
        assert [(v.function, v.hint) for v in verdict.parts if not v.right] == [(function, wrong.hint)]


def test_the_server_names_an_empty_place_a_repeated_line_and_the_order():
    """Not every place filled, a line twice, and a line above the one it needs each get their own words; a line the
    page never offered is refused."""
    exercise = in_page.load_in_page("lessons/transformer-block/exercise", "residual.py")
    bodies = right_bodies(exercise)
    sub = bodies["residual_sublayer"]

    def hint(lines):
        return in_page.check(exercise, {**bodies, "residual_sublayer": lines}).parts[1].hint

    assert hint([sub[0], None, sub[2]]) == in_page.EMPTY_PLACE
    assert hint([sub[0], sub[0], sub[2]]) == in_page.TWICE
    assert hint([sub[1], sub[0], sub[2]]) == (f"“{sub[1]}” uses what “{sub[0]}” makes, so it goes below that line.")
    with pytest.raises(ValueError):
        hint([sub[0], "import os", sub[2]])
    with pytest.raises(ValueError):
        hint(sub[:2])


def test_lines_are_offered_in_an_order_that_says_nothing_of_the_answer():
    """The page lists a part's lines sorted by their text, right and wrong together."""
    for folder, file in FOLDERS:
        for part in in_page.load_in_page(folder, file).parts:
            assert list(part.offered) == sorted([x.code for x in part.lines] + [w.code for w in part.wrong])
            assert part.head.lstrip().startswith(f"def {part.function}(") and '"""' in part.head
