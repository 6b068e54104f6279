"""Predict first, in real Chromium: no lesson or explorable page shows or sends an answer to its question before
the student's commit is final, and once it is, the held parts arrive without a reload."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from blocktrace.app.lessons.loading import load_lessons
from blocktrace.app.server.registry import EXPLORABLE_SPECS
from tests.answers import explorable_answers, lesson_answers, normalised, sent_text

pytestmark = pytest.mark.browser

LESSONS = {lesson.route: lesson for lesson in load_lessons()}
PAGES = [*LESSONS, *(spec.route() for spec in EXPLORABLE_SPECS.values())]
COMMIT = re.compile(r"^Commit (prediction|bet)$")
PENDING = ".bt-figure-pending"  # a place still waiting for its figure or its panels (components/figures.py)
VISIBLE_TEXT = """() => {
    const out = [];  // the rendered text (innerText) of the page and of every shadow root Bokeh and Panel draw in
    const walk = (root) => {
        for (const el of root.children) if (el.innerText) out.push(el.innerText);
        for (const el of root.querySelectorAll("*")) if (el.shadowRoot) walk(el.shadowRoot);
    };
    walk(document.body);
    return out.join("\\n");
}"""


def answers_of(path: str) -> tuple[str, list[str]]:
    """The page's explorable and what answers its question: the parts a lesson holds (their own text) and the
    values and verdicts the explorable shows once the prediction is in."""
    lesson = LESSONS.get(path)
    if lesson is None:
        explorable = next(spec.id for spec in EXPLORABLE_SPECS.values() if spec.route() == path)
        return explorable, explorable_answers(explorable, {})
    [placed] = lesson.directives("explorable")
    query = {str(k): str(v) for k, v in (placed.attrs.get("state") or {}).items()}
    explorable = placed.attrs["id"]
    return explorable, [*lesson_answers(lesson), *explorable_answers(explorable, query)]


def found_in(answers: list[str], text: str) -> list[str]:
    return [answer[:80] for answer in answers if answer in text]


def shown(page: Page) -> str:
    """The page's visible words, a line (a paragraph, a row) at a time: no answer is made up across two lines."""
    return " ¶ ".join(normalised(line) for line in page.evaluate(VISIBLE_TEXT).splitlines())


def commit(page: Page, explorable: str) -> None:
    first = next(iter(EXPLORABLE_SPECS[explorable].choices().values()))
    page.get_by_label(first, exact=True).check()
    page.get_by_role("button", name=COMMIT).click()


@pytest.mark.parametrize("path", PAGES)
def test_no_answer_reaches_the_page_before_the_commit(open_page, path: str) -> None:
    """Before the commit neither the page's HTML, nor any websocket frame, nor its visible text holds any of its
    answers; once the commit is final the same session receives all of them (so the check can fail)."""
    explorable, answers = answers_of(path)
    assert answers, path
    opened = open_page(path, record=True)
    page = opened.page
    expect(page.get_by_role("button", name=COMMIT)).to_be_enabled()
    expect(page.locator(PENDING)).to_have_count(0)  # every figure and panel the page sends before the commit
    before = sent_text(opened.sent)
    assert found_in(answers, before) == [], "sent before the commit"
    assert found_in(answers, shown(page)) == [], "shown before the commit"
    held = len(opened.sent)
    commit(page, explorable)
    expect(page.get_by_text("Your prediction (final):")).to_be_visible()
    if EXPLORABLE_SPECS[explorable].race:  # the race is decided only once it has run (test_train_the_block.py)
        answers = [a for a in answers if not a.startswith("Decided:")]
    after = opened.sockets[-1]

    def arrived(*frame: str | bytes) -> bool:  # the frame being received, whether or not recorded yet
        text = sent_text([*opened.sent[held:], *frame])
        return all(answer in text for answer in answers)

    if not arrived():
        after.wait_for_event("framereceived", predicate=arrived, timeout=30_000)
    opened.assert_clean()
