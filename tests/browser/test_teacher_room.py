"""The teacher runs the room from the dashboard: who is where, each checkpoint on its own, reveal and hide,
an archive that asks first, words right for one and many, and the dark theme."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.browser.teacher_login import logged_in_page
from tests.conftest import module_server

pytestmark = pytest.mark.browser
PASSWORD = "run the room"
CODE = "room7"
LESSON = f"/lessons/transformer-block?class={CODE}"


@pytest.fixture(scope="module")
def classroom(tmp_path_factory):
    yield from module_server(tmp_path_factory, "room", "--teacher-password", PASSWORD)


def teacher_page(browser: Browser, classroom, query: str = "") -> Page:
    return logged_in_page(browser, classroom.url(f"/teacher?class={CODE}{query}"), PASSWORD)


def lesson_card(page: Page):
    return page.locator("section.bt-card").filter(has=page.get_by_role("heading", name="The Transformer block"))


def test_roster_checkpoints_reveal_and_archive(browser: Browser, classroom) -> None:
    ada = browser.new_context().new_page()
    ada.goto(classroom.url(LESSON))
    ada.get_by_label("Your name (optional)").fill("Ada")
    ada.get_by_role("button", name="Save name").click()
    expect(ada.get_by_text("Saved.")).to_be_visible()
    ada.get_by_text("Zero updates return the input unchanged").click()
    ada.get_by_role("button", name="Commit prediction").click()
    expect(ada.get_by_text("Your prediction (final)")).to_be_visible()
    ada.get_by_text("Its input, unchanged.").click()
    ada.get_by_role("button", name="Check answer").first.click()
    ada.get_by_text("A constant non-zero vector such as [2, 2, 2, 2].").click()
    ada.get_by_role("button", name="Check answer").nth(1).click()
    ada.get_by_label("Your explanation").fill("Adding zero keeps the stream; replacing erases it entirely.")
    ada.get_by_role("button", name="Submit explanation").click()
    expect(ada.locator(".bt-explained")).to_have_text("Saved.")

    # Joins by explaining, commits nothing (the checkpoints, which give the prediction's answer, open only after
    # a commit).
    nameless = browser.new_context().new_page()
    nameless.goto(classroom.url(LESSON))
    nameless.get_by_label("Your explanation").fill("I think the block keeps its input when nothing is added.")
    nameless.get_by_role("button", name="Submit explanation").click()
    expect(nameless.locator(".bt-explained")).to_have_text("Saved.")

    teacher = teacher_page(browser, classroom)
    card = lesson_card(teacher)
    roster = card.locator("table.teacher-roster")
    expect(roster).to_contain_text("Roster: 2 learners, 1 learner not committed yet")
    # The name exactly: another learner's random id, such as "Student 9e0ada", may hold "ada"
    ada_row = roster.locator("tr", has=teacher.get_by_role("rowheader", name="Ada", exact=True))
    expect(ada_row).to_contain_text("committed")
    expect(ada_row.locator("td").nth(1)).to_have_text("Experiment")  # predicted, explained; not experimented
    expect(ada_row.locator("td").nth(2)).to_have_text("2 of 4: Predict, Explain")
    other = roster.locator("tbody tr").filter(has_not=teacher.get_by_role("rowheader", name="Ada", exact=True))
    expect(other.locator("th")).to_have_text(re.compile(r"^Student [0-9a-f]{6}$"))  # a short label, no id
    expect(other.locator("td").first).to_have_text("not yet")
    zero = card.locator("table.teacher-bars", has_text="Checkpoint: Attention and the MLP both return")
    constant = card.locator("table.teacher-bars", has_text="Checkpoint: Which input tells RMSNorm apart")
    expect(zero.locator("caption")).to_contain_text("(1 answer)")  # one for one, not "1 answers"
    expect(constant.locator("caption")).to_contain_text("(1 answer)")
    expect(card.locator("caption", has_text="Predictions in")).to_contain_text("(1 answer)")

    card.get_by_role("button", name="Reveal to the class").click()
    expect(lesson_card(teacher).get_by_role("button", name="Hide from the class")).to_be_visible()
    expect(ada.get_by_text("The class answered (revealed by your teacher)")).to_be_visible(timeout=20_000)
    lesson_card(teacher).get_by_role("button", name="Hide from the class").click()
    expect(lesson_card(teacher).get_by_role("button", name="Reveal to the class")).to_be_visible()
    expect(ada.get_by_text("The class answered (revealed by your teacher)")).to_have_count(0, timeout=20_000)

    teacher.get_by_role("button", name=f"Archive and reset class “{CODE}”…").click()
    expect(teacher.get_by_role("heading", name=f"Archive and reset class “{CODE}”?")).to_be_visible()
    expect(teacher.get_by_text("the answers, predictions and reveals of 2 learners")).to_be_visible()
    teacher.get_by_role("link", name="No, keep the class as it is").click()
    expect(lesson_card(teacher).locator("table.teacher-roster")).to_contain_text("2 learners")  # nothing archived
    teacher.get_by_role("button", name=f"Archive and reset class “{CODE}”…").click()
    teacher.get_by_role("button", name="Yes, archive and reset").click()
    expect(lesson_card(teacher)).to_contain_text("Nobody has joined this class yet.")
    for page in (ada, nameless, teacher):
        page.context.close()


def test_the_dashboard_follows_the_dark_theme(browser: Browser, classroom) -> None:
    teacher = teacher_page(browser, classroom, "&theme=dark")
    expect(teacher.locator("body")).to_have_css("background-color", "rgb(13, 17, 23)")
    expect(teacher.locator("body")).to_have_css("color", "rgb(230, 237, 243)")
    expect(teacher.get_by_role("link", name="Light theme")).to_have_attribute("href", re.compile("class=room7"))
    for link in teacher.locator("main a[href^='/teacher?']").all():  # class links keep the theme
        assert "theme=dark" in link.get_attribute("href")
    teacher.get_by_role("link", name="Light theme").click()
    expect(teacher.get_by_role("link", name="Dark theme")).to_be_visible()
    expect(teacher.locator("body")).to_have_css("background-color", "rgb(255, 255, 255)")
    teacher.context.close()


def test_the_presenter_view_shows_the_explorable_beside_the_class_answers(browser: Browser, classroom) -> None:
    student = browser.new_context().new_page()
    student.goto(classroom.url("/lessons/transformer-block?class=present1"))
    student.get_by_text("Zero updates return the input unchanged").click()
    student.get_by_role("button", name="Commit prediction").click()
    expect(student.get_by_text("Your prediction (final)")).to_be_visible()
    projector = {"width": 1366, "height": 768}
    teacher = logged_in_page(browser, classroom.url("/teacher?class=present1"), PASSWORD, viewport=projector)
    teacher.get_by_role("link", name="Present “The Transformer block”").click()
    answers = teacher.locator("main.bt-present-answers")
    expect(answers.locator("caption")).to_contain_text("(1 answer)")
    # Large type (1.25rem); a retrying check: the style sheet may still be loading when the caption appears.
    expect(answers.locator("table")).to_have_css("font-size", re.compile(r"^(2\d|[3-9]\d)(\.\d+)?px$"))
    frame = teacher.frame_locator("iframe.bt-present-frame")
    expect(frame.get_by_role("slider", name="Attention update scale")).to_be_enabled()  # no prediction step
    expect(frame.get_by_role("button", name="Commit prediction")).to_have_count(0)
    # The explorable fills the screen below the header, no band left under it, and is drawn larger.
    box = teacher.locator("iframe.bt-present-frame").bounding_box()
    assert box is not None and projector["height"] - 16 <= box["y"] + box["height"] <= projector["height"]
    assert box["width"] > projector["width"] / 2
    expect(teacher.locator("iframe.bt-present-frame")).to_have_css("zoom", "1.2")
    teacher.context.close()
    student.context.close()


def test_pacing_holds_releases_and_pushes_a_state(browser: Browser, classroom) -> None:
    code = "pace9"
    committed = browser.new_context().new_page()
    committed.goto(classroom.url(f"/lessons/transformer-block?class={code}"))
    committed.get_by_text("Zero updates return the input unchanged").click()
    committed.get_by_role("button", name="Commit prediction").click()
    expect(committed.get_by_text("Your prediction (final)")).to_be_visible()
    control = committed.get_by_role("checkbox", name="Replace instead of add residuals (broken)")
    expect(control).to_be_enabled()
    waiting = browser.new_context().new_page()
    waiting.goto(classroom.url(f"/lessons/transformer-block?class={code}"))
    expect(waiting.get_by_role("button", name="Commit prediction")).to_be_visible()

    teacher = logged_in_page(browser, classroom.url(f"/teacher?class={code}"), PASSWORD)
    card = lesson_card(teacher)
    card.get_by_role("button", name="Hold at Predict").click()
    expect(lesson_card(teacher)).to_contain_text("The class is held at Predict")
    expect(committed.locator(".bt-held").first).to_be_visible(timeout=20_000)
    expect(control).to_be_disabled()
    expect(committed.get_by_label("Your explanation")).to_have_count(0)  # later steps leave the page
    lesson_card(teacher).get_by_role("button", name="Release").click()
    expect(control).to_be_enabled(timeout=20_000)
    expect(committed.get_by_label("Your explanation")).to_be_visible(timeout=20_000)

    lesson_card(teacher).get_by_label("Look at this").fill("attention_scale=9")  # out of the slider's range
    lesson_card(teacher).get_by_role("button", name="Show to the class").click()
    expect(lesson_card(teacher).get_by_role("alert")).to_contain_text("attention_scale='9' is not a value")
    lesson_card(teacher).get_by_label("Look at this").fill(
        classroom.url("/explorables/transformer-block-trace?attention_scale=0&residual=replace&embed=1"))
    lesson_card(teacher).get_by_role("button", name="Show to the class").click()
    expect(lesson_card(teacher)).to_contain_text("attention_scale=0&residual=replace")
    expect(committed.locator(".bt-pushed")).to_be_visible(timeout=20_000)
    expect(control).to_be_checked()
    expect(waiting.get_by_role("button", name="Commit prediction")).to_be_visible()  # no result before a commit
    assert waiting.locator(".bt-pushed").count() == 0
    lesson_card(teacher).get_by_role("button", name="Stop showing").click()  # the student's own settings return
    expect(committed.locator(".bt-pushed-ended")).to_be_visible(timeout=20_000)
    expect(control).not_to_be_checked()
    expect(lesson_card(teacher)).not_to_contain_text("Showing every student")
    for page in (committed, waiting, teacher):
        page.context.close()
