"""The exercise on a device without Python, in Chromium: lines chosen in the page's selects, the server's hint for a
wrong one, the checked result on the page and in the teacher's roster, and the lines back after a reload; and the
install line for a laptop that has Python, with this server's address and version."""

from __future__ import annotations

import pytest
from playwright.sync_api import Browser, expect

from blocktrace.app.classroom.store import EventStore
from blocktrace.app.classroom.store_engine import default_url
from blocktrace.app.classroom.teacher_view import roster_table
from blocktrace.app.exercises.in_page import load_in_page
from blocktrace.app.exercises.package import install_command, installed_version
from tests.conftest import module_server

pytestmark = pytest.mark.browser
CLASS = "nopython"
LESSON = f"/lessons/transformer-block?class={CLASS}"
EXERCISE = load_in_page("lessons/transformer-block/exercise", "residual.py")


@pytest.fixture(scope="module")
def classroom(tmp_path_factory):
    patch = pytest.MonkeyPatch()
    patch.setenv("BLOCKTRACE_IN_PAGE_GAP", "0.01")  # the test's second check comes at once (the gap: tests/app)
    try:
        yield from module_server(tmp_path_factory, "in-page", "--teacher-password", "pw")
    finally:
        patch.undo()


def choose(page, wrong: bool) -> None:
    """Every place of every function filled; with `wrong`, the first function's first wrong line in it."""
    for part in EXERCISE.parts:
        mistake = part.wrong[0] if wrong and part is EXERCISE.parts[0] else None
        for i, line in enumerate(part.lines, start=1):
            code = mistake.code if mistake and line.key == mistake.instead_of else line.code
            page.get_by_label(f"{part.function}, line {i}", exact=True).select_option(label=code)


def test_lines_chosen_in_the_page_are_checked_stored_and_kept(browser: Browser, classroom) -> None:
    page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    page.goto(classroom.url(LESSON))
    result = page.locator(".bt-exercise-result")
    expect(result).to_have_text("No result yet.")
    expect(page.locator("pre.bt-install")).to_have_text(install_command(classroom.base_url, installed_version()))

    choose(page, wrong=True)
    page.get_by_role("button", name="Check my lines").click()
    expect(page.get_by_text(EXERCISE.parts[0].wrong[0].hint)).to_be_visible()
    expect(result).to_contain_text("Checked in the page: 1 of 2 functions right")

    choose(page, wrong=False)
    page.get_by_role("button", name="Check my lines").click()
    expect(result).to_contain_text("Checked in the page: every function is right. Your teacher sees this result.")
    first = page.get_by_label(f"{EXERCISE.parts[0].function}, line 1", exact=True)
    expect(first).to_be_disabled()

    with EventStore(default_url(classroom.data_dir)) as store:
        roster = roster_table(store.summary(CLASS, "transformer-block"))
    assert "<td>passed (checked)</td><td>in the page</td>" in roster

    page.reload()  # the lines come back from the store, fixed
    expect(result).to_contain_text("every function is right")
    expect(first).to_be_disabled()
    expect(first).to_have_value(EXERCISE.parts[0].lines[0].code)
    page.context.close()
