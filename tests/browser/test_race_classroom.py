"""The race in a real class, in Chromium: the teacher shows one race set-up to every student's open page (one not
committed yet, one whose own race is held for her prediction), both race it to its verdict, and the teacher's card
shows the class's predictions against how the races came out, in the counts and in the roster.

The race's page records into the first lesson that uses the race (`lesson_for_explorable`), and the teacher paces
and summarises per lesson, so this runs once a lesson opens with the race (lessons/train-the-block/).
"""

from __future__ import annotations

import pytest
from playwright.sync_api import Browser, Page, expect

from blocktrace.app.lessons.loading import lesson_for_explorable, load_lessons
from blocktrace.explorables.train_the_block.state import PREDICTION_CHOICES
from tests.browser.teacher_login import logged_in_page
from tests.conftest import module_server

RACE = "train-the-block"
LESSON = next((x for x in load_lessons() if x.id == lesson_for_explorable(RACE)), None)
pytestmark = [pytest.mark.browser, pytest.mark.skipif(
    LESSON is None or LESSON.explorables[0] != RACE,
    reason="no lesson opens with the race yet, so the teacher has no card to pace it from")]
PASSWORD = "race the room"
CODE = "race7"
SETUP = "task=copy&vs=residual&floors=2"  # add against replace at two floors: A (add) reaches 90 % first


@pytest.fixture(scope="module")
def classroom(tmp_path_factory):
    yield from module_server(tmp_path_factory, "race-room", "--teacher-password", PASSWORD)


def student(browser: Browser, classroom, name: str) -> Page:
    page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    page.goto(classroom.url(f"/explorables/{RACE}?class={CODE}"))
    page.get_by_label("Your name (optional)").fill(name)
    page.get_by_role("button", name="Save name").click()
    expect(page.get_by_text("Saved.")).to_be_visible()
    return page


def commit(page: Page, choice: str) -> None:
    page.get_by_label(PREDICTION_CHOICES[choice]).check()
    page.get_by_role("button", name="Commit prediction").click()
    expect(page.get_by_text("Your prediction (final)")).to_be_visible()


def race_to_its_verdict(page: Page) -> None:
    """Play the held race until the server decides it: then its set-up is free again."""
    expect(page.get_by_label("Task")).to_be_disabled()
    page.get_by_role("button", name="Play").click()
    expect(page.get_by_label("Task")).to_be_enabled(timeout=120_000)


def card(teacher: Page):
    return teacher.locator("section.bt-card").filter(has=teacher.get_by_role("heading", name=LESSON.title))


def test_a_pushed_race_reaches_every_student_and_the_teacher_sees_it_against_the_outcome(browser: Browser,
                                                                                         classroom) -> None:
    """Ada has not committed; Bea has, and her own race (the page's default, 12 floors) is held. The teacher's
    push sets both pages to the race of two 2-floor models; Bea's prediction now stands for it. Both race it: A
    comes first, as Ada said and Bea did not, and the dashboard says so beside the bars and in the roster."""
    ada, bea = student(browser, classroom, "Ada"), student(browser, classroom, "Bea")
    commit(bea, "b-first")
    expect(bea.get_by_label("Floors in each model")).to_have_value("12")
    expect(bea.get_by_label("Floors in each model")).to_be_disabled()  # held as predicted

    teacher = logged_in_page(browser, classroom.url(f"/teacher?class={CODE}"), PASSWORD)
    card(teacher).get_by_label("Look at this").fill(classroom.url(f"/explorables/{RACE}?{SETUP}&embed=1"))
    card(teacher).get_by_role("button", name="Show to the class").click()
    expect(card(teacher)).to_contain_text("Showing every student, committed or not, this race: "
                                          "floors=2&task=copy&vs=residual")  # as stored: keys in order

    expect(ada.locator(".bt-pushed")).to_contain_text("Your teacher set up this race", timeout=20_000)
    expect(ada.get_by_label("Floors in each model")).to_have_value("2")
    expect(ada.get_by_label("The one difference")).to_have_value("Add or replace the stream")
    expect(ada.get_by_role("button", name="Play")).to_be_disabled()  # the race itself waits for her commit
    expect(bea.locator(".bt-pushed")).to_contain_text("your prediction now stands for it", timeout=20_000)
    expect(bea.get_by_label("Floors in each model")).to_have_value("2")
    expect(bea.get_by_label("Floors in each model")).to_be_disabled()  # still held: now on the teacher's race

    commit(ada, "a-first")
    race_to_its_verdict(ada)
    race_to_its_verdict(bea)

    teacher.reload()
    outcomes = card(teacher).locator("table.teacher-outcomes")
    expect(outcomes.locator("caption")).to_contain_text("(2 races decided)")
    a_first = outcomes.locator("tr", has=teacher.get_by_role("rowheader", name=PREDICTION_CHOICES["a-first"]))
    expect(a_first.locator("td")).to_have_text(["1", "2"])  # predicted by Ada; came out so in both races
    b_first = outcomes.locator("tr", has=teacher.get_by_role("rowheader", name=PREDICTION_CHOICES["b-first"]))
    expect(b_first.locator("td")).to_have_text(["1", "0"])
    expect(card(teacher)).to_contain_text("As predicted for 1 of 2 learners whose races were decided.")
    roster = card(teacher).locator("table.teacher-roster")

    def row(name: str):  # exactly this name: a random id such as "Student 9e0ada" holds "ada" too
        return roster.locator("tr", has=teacher.get_by_role("rowheader", name=name, exact=True))

    expect(row("Ada")).to_contain_text("as predicted")
    expect(row("Bea")).to_contain_text("not as predicted")

    card(teacher).get_by_role("button", name="Reveal to the class").click()
    expect(ada.get_by_text("The class answered (revealed by your teacher)")).to_be_visible(timeout=20_000)
    for page in (ada, bea, teacher):
        page.context.close()
