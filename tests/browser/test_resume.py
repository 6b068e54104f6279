"""A student who reloads a lesson page, or opens it in a new tab, finds everything they did on it."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.conftest import module_server

pytestmark = pytest.mark.browser
LESSON = "/lessons/transformer-block?class=resume1"
EXPLANATION = "Adding zero keeps the input; replacing with zero erases it, so the stream is lost."


@pytest.fixture(scope="module")
def classroom(tmp_path_factory):
    yield from module_server(tmp_path_factory, "resume")


def progress(page: Page):
    return page.locator(".bt-progress + .bt-sr-live")


def test_a_reload_and_a_new_tab_restore_the_whole_lesson(browser: Browser, classroom) -> None:
    context = browser.new_context()
    page = context.new_page()
    page.goto(classroom.url(LESSON))
    page.get_by_text("Zero updates return the input unchanged").click()
    page.get_by_role("button", name="Commit prediction").click()
    expect(page.get_by_text("Your prediction (final)")).to_be_visible()
    page.get_by_role("button", name="Zero updates").click()  # the experiment
    page.get_by_text("Its input, unchanged.").click()
    page.get_by_role("button", name="Check answer").first.click()
    expect(page.get_by_text("Right. Adding zero leaves the stream as it was")).to_be_visible()
    page.get_by_label("Your explanation").fill(EXPLANATION)
    page.get_by_role("button", name="Submit explanation").click()
    expect(page.locator(".bt-explained")).to_have_text("Saved.")  # the last of them, stored
    expect(progress(page)).to_have_text("3 of 4 checkpoints done")  # the exercise: test_exercise_from_laptop

    for again in (page, context.new_page()):  # the reload, then a second tab
        if again is page:
            page.reload()
        else:
            again.goto(classroom.url(LESSON))
        expect(again.get_by_text("Your prediction (final)")).to_be_visible()
        expect(progress(again)).to_have_text("3 of 4 checkpoints done")
        expect(again.get_by_role("radio", name="Its input, unchanged.")).to_be_checked()
        expect(again.get_by_text("Right. Adding zero leaves the stream as it was")).to_be_visible()
        expect(again.get_by_label("Your explanation")).to_have_value(EXPLANATION)
    alone = context.new_page()  # the same student on the explorable's own page: the lesson's work is there too
    alone.goto(classroom.url("/explorables/transformer-block-trace"))
    expect(alone.get_by_text("Your prediction (final)")).to_be_visible()
    expect(alone).to_have_url(re.compile(r"attention_scale=0(&|$)"))  # the controls as the lesson left them
    expect(alone).to_have_url(re.compile(r"mlp_scale=0(&|$)"))
    context.close()

    stranger = browser.new_context().new_page()  # another student on the same lesson: nothing of the first's
    stranger.goto(classroom.url(LESSON))
    expect(stranger.get_by_role("button", name="Commit prediction")).to_be_visible()
    expect(progress(stranger)).to_have_text("0 of 4 checkpoints done")
    expect(stranger.get_by_label("Your explanation")).to_have_value("")
    stranger.context.close()
