"""The race (train-the-block) in a classroom: predictions reach the store and the teacher's roster, the teacher
sees them against how the races came out, and a teacher's push sets one race on every student's page.

As in tests/unit/test_final_after_store.py, each page's recorder runs on the real store thread over a real
SQLite store and a stand-in for its Bokeh document hands the store's answers back; the races train in the
runner's worker process, as on the server. The recorder's lesson is the one the race's own page records into
(`lesson_for_explorable`: the lesson that uses the race); the summary and the pacing are per lesson.
"""

from __future__ import annotations

import asyncio
import csv
import io
import json
import re

import pytest

from blocktrace.app.classroom.identity import COOKIE_NAME, sign
from blocktrace.app.classroom.learner import Classroom, SessionRecorder, identify
from blocktrace.app.classroom.pacing import PUSH_ENDED, read_pushed_state
from blocktrace.app.classroom.race import PUSH_HELD_KEPT, PUSH_MOVED, PUSH_RACE
from blocktrace.app.classroom.store import EventStore, check_record, new_event_id
from blocktrace.app.classroom.teacher_view import lesson_section, presenter_bars
from blocktrace.app.lessons.loading import parse_lesson
from blocktrace.app.lessons.page import LessonView
from blocktrace.app.server.registry import EXPLORABLE_SPECS
from blocktrace.app.server.session_setup import attach_explorable, question_id, restore_explorable
from blocktrace.explorables.train_the_block import RaceExplorable
from blocktrace.explorables.train_the_block.state import PREDICTION_CHOICES
from blocktrace.explorables.train_the_block.view import TITLE, runner
from tests.drawn import meta, send
from tests.unit.test_final_after_store import SessionDocument, commit, open_classroom

CLASS, LESSON, RACE = "race1", "train-the-block", "train-the-block"
QUESTION = question_id(RACE)
ADD_OR_REPLACE = {"task": "copy", "vs": "residual", "floors": "2"}  # A (add) reaches 90 % first, at step 275
DEPTH = {"task": "copy", "vs": "depth", "floors": "2", "seed": "3"}  # a race of two 2-floor models
QUESTIONS = {QUESTION: (TITLE, PREDICTION_CHOICES)}
ADA, BEA, CY = "a" * 32, "b" * 32, "c" * 32
RACE_LESSON = parse_lesson("""---
id: train-the-block
title: A race on a lesson page
order: 9
objectives: [Predict which floor learns first, then race them]
prerequisites: []
explorables: [train-the-block]
stages: []
---
:::predict
explorable: train-the-block
:::
:::explorable
id: train-the-block
state: {task: copy, vs: residual, floors: "2"}
:::
""")


@pytest.fixture(scope="module", autouse=True)
def race_worker():
    """One worker for the module's races, slices of 50 steps."""
    runner.configure(workers=1, slice_steps=50, slice_cpu_s=60.0)
    yield
    runner.configure()  # shuts the worker down


@pytest.fixture
def classroom(tmp_path):
    yield from open_classroom(EventStore(f"sqlite:///{tmp_path / 'class.db'}"))


class Page:
    """One student's race page in the class: the explorable, its recorder and its document."""

    def __init__(self, classroom: Classroom, learner: str, query: dict[str, str], predict: bool = True) -> None:
        self.classroom, self.doc = classroom, SessionDocument()
        who = identify({COOKIE_NAME: sign(learner, classroom.secret)}, {"class": CLASS}, classroom.secret)
        self.recorder = SessionRecorder(classroom, who, lesson=LESSON, doc=self.doc)
        self.race = RaceExplorable(query=dict(query), predict=predict)
        attach_explorable(self.race, RACE, self.recorder)  # as the race's own page does (routes.explorable_page)
        restore_explorable(self.race, RACE, self.recorder, query)
        self.recorder.join()  # once the page is up in the browser (session_setup.start_session)
        self.idle()

    @property
    def state(self):
        return self.race.state

    def idle(self) -> None:
        """Every store call of this page answered, and the answers handed to the page."""
        self.doc.run_until(lambda: self.recorder.in_flight == 0 and not self.doc.ticks)

    def commit(self, choice: str) -> None:
        commit(self.race, choice)
        self.doc.run_until(lambda: self.state.prediction.committed)
        self.idle()

    def play(self, slices: int | None = None) -> str | None:
        """Play `slices` slices, or until the race is decided; its verdict (None: not decided yet)."""
        async def go() -> None:
            played = 0
            while self.state.decided is None and (slices is None or played < slices):
                assert await self.race.advance(), "the race stopped before it was decided"
                played += 1

        asyncio.run(go())
        self.idle()
        return self.state.decided

    def poll(self) -> None:
        """The page's periodic look at the class (reveals, holds, pushes), as its session runs it."""
        self.race._class_poll()

    def note(self) -> str:
        return self.race.gate._summary.object

    def setup(self) -> dict[str, object]:
        s = self.state
        return {"task": s.task, "vs": s.difference, "floors": s.floors, "seed": s.seed}


def races(classroom: Classroom) -> list[tuple[str, dict]]:
    """(learner, payload) of every stored race event, in the order stored."""
    rows = csv.DictReader(io.StringIO(classroom.store.export_csv(CLASS)))
    return [(r["learner_id"], json.loads(r["payload"])) for r in rows if r["kind"] == "race"]


def push(classroom: Classroom, link: str | None) -> None:
    """The teacher's Show to the class (None: Stop showing), and the store thread's next look at the paces."""
    pushed = None if link is None else {"explorable": RACE, "state": read_pushed_state(RACE, link)}
    classroom.store.set_pace(CLASS, LESSON, pushed=pushed)
    classroom.thread.paces = classroom.store.current_paces()  # what the store thread reads every few seconds


def text(html: str) -> str:
    """The words of an HTML fragment, one space between them."""
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)).strip()


def test_a_committed_race_prediction_reaches_the_store_and_the_teachers_roster(classroom) -> None:
    """The commit is stored as the race question's prediction, with the set-up it holds; the lesson's summary
    counts it, and the teacher's card shows the bar and the learner as committed."""
    classroom.store.join(CLASS, ADA, "Ada")
    page = Page(classroom, ADA, ADD_OR_REPLACE)
    waiting = Page(classroom, BEA, ADD_OR_REPLACE)
    assert classroom.store.summary(CLASS, LESSON)["committed"] == 0
    page.commit("a-first")
    assert classroom.store.prediction(CLASS, ADA, QUESTION).choice == "a-first"
    assert races(classroom) == [(ADA, {"question": QUESTION, "outcome": None, "setup": {
        "task": "copy", "vs": "residual", "floors": "2", "lr": "0.01", "warmup": "0", "seed": "0"}})]
    summary = classroom.store.summary(CLASS, LESSON)
    assert summary["committed"] == 1 and summary["distributions"] == {QUESTION: {"a-first": 1}}
    assert summary["outcomes"] == {}  # held: nothing decided yet
    roster = {entry["label"]: entry for entry in summary["roster"]}
    assert roster["Ada"]["committed"] and roster["Ada"]["current"] == "experiment"
    assert not roster[f"Student {BEA[:6]}"]["committed"]
    card = text(lesson_section("Train the block", summary, QUESTIONS, {}, "tok", "light"))
    assert f"Predictions in “{TITLE}” (1 answer)" in card
    assert "Roster: 2 learners, 1 learner not committed yet" in card and "Ada committed" in card
    assert "Predicted against" not in card and waiting.state.prediction.committed is False


def test_the_teacher_sees_the_class_predictions_against_how_their_races_came_out(classroom) -> None:
    """Two learners run the same race (A first) to its verdict, one having predicted A and one B; a third predicted
    A and has not run it. The summary, the card, its roster and the presenter's view say so."""
    for learner, name in ((ADA, "Ada"), (BEA, "Bea"), (CY, "Cy")):
        classroom.store.join(CLASS, learner, name)
    ada, bea, cy = (Page(classroom, who, ADD_OR_REPLACE) for who in (ADA, BEA, CY))
    ada.commit("a-first")
    bea.commit("b-first")
    cy.commit("a-first")
    assert ada.play() == bea.play() == "a-first"  # the same set-up: the same race
    assert [(who, p["outcome"]) for who, p in races(classroom) if p["outcome"]] == [(ADA, "a-first"), (BEA, "a-first")]
    summary = classroom.store.summary(CLASS, LESSON)
    assert summary["outcomes"] == {QUESTION: {"came_out": {"a-first": 2}, "borne_out": 1, "setups": 1}}
    roster = {entry["label"]: entry for entry in summary["roster"]}
    assert (roster["Ada"]["outcome"], roster["Bea"]["outcome"], roster["Cy"]["outcome"]) == (True, False, None)
    assert "experiment" in roster["Ada"]["done"] and "experiment" not in roster["Cy"]["done"]
    card = text(lesson_section("Train the block", summary, QUESTIONS, {}, "tok", "light"))
    assert "Predicted against how their races came out (2 races decided)" in card
    assert f"{PREDICTION_CHOICES['a-first']} 2 2" in card  # predicted by two (Ada, Cy); came out so for two
    assert f"{PREDICTION_CHOICES['b-first']} 1 0" in card
    assert "As predicted for 1 of 2 learners whose races were decided." in card
    assert "Ada committed Exercise 2 of 4: Predict, Experiment no result yet – as predicted" in card  # the roster
    assert "Bea committed Exercise 2 of 4: Predict, Experiment no result yet – not as predicted" in card
    assert "Cy committed Experiment 1 of 4: Predict no result yet – not decided yet" in card
    assert card.index("Predicted against") < card.index("Reveal to the class")  # beside the bars it reveals
    assert "Predicted against how their races came out (2 races decided)" in text(presenter_bars(summary, QUESTIONS))


def test_only_the_first_race_decided_for_a_committed_prediction_counts(classroom) -> None:
    """A race event of a learner with no prediction, or after their first decided race, counts for nothing; each
    set-up raced is counted, so the teacher sees when the class did not run one race."""
    def race(learner: str, outcome: str | None, **setup: str) -> None:
        payload = {"question": QUESTION, "setup": {"task": "copy", "vs": "residual", **setup}, "outcome": outcome}
        classroom.store.record(new_event_id(), CLASS, learner, "race", payload, LESSON, RACE)

    race(CY, "a-first")  # Cy never predicted
    for learner, choice in ((ADA, "a-first"), (BEA, "b-first")):
        classroom.store.commit_prediction(new_event_id(), CLASS, learner, QUESTION, choice, None, LESSON, RACE)
    race(ADA, None)  # held at the commit
    race(ADA, "b-first")
    race(ADA, "a-first", seed="1")  # a second race, after the first was decided
    race(BEA, "b-first", vs="depth")
    summary = classroom.store.summary(CLASS, LESSON)
    assert summary["outcomes"] == {QUESTION: {"came_out": {"b-first": 2}, "borne_out": 1, "setups": 2}}
    assert "those races had 2 different set-ups" in text(lesson_section("T", summary, QUESTIONS, {}, "tok", "light"))
    assert [e["committed"] for e in summary["roster"]] == [True, True, False]  # Cy: an outcome, no prediction
    setup = {"task": "copy"}
    for bad in ({"setup": setup, "outcome": "a-first"}, {"question": QUESTION, "setup": setup, "outcome": 1},
                {"question": QUESTION, "setup": "task=copy", "outcome": None},
                {"question": QUESTION, "setup": {"task": 2}, "outcome": None}):
        with pytest.raises(ValueError):
            check_record(new_event_id(), CLASS, ADA, "race", bad, LESSON, RACE)


def test_a_race_stores_an_outcome_only_for_a_committed_prediction(classroom) -> None:
    """The server stores a race's outcome only when it has decided the race a committed prediction was for:
    a page without the prediction step races but stores none, and after the verdict another race stores none."""
    teacher_link = Page(classroom, ADA, ADD_OR_REPLACE, predict=False)
    teacher_link.play(slices=8)  # 400 steps: past the point where the race is decided
    assert teacher_link.state.result() == "a-first" and teacher_link.state.decided is None
    student = Page(classroom, BEA, ADD_OR_REPLACE)
    student.commit("b-first")
    assert student.play() == "a-first"
    student.state.seed = 7  # free after the verdict: a new race, with no prediction left for it
    student.play(slices=8)
    assert [(who, p["outcome"]) for who, p in races(classroom)] == [(BEA, None), (BEA, "a-first")]


def test_a_new_page_holds_the_race_the_prediction_was_for(classroom) -> None:
    """Reopened with another address, the page races the set-up the prediction was committed for (held until
    decided), not the address's; once decided, a new page is free and stores nothing more."""
    first = Page(classroom, ADA, ADD_OR_REPLACE)
    first.commit("a-first")
    first.play(slices=1)
    reopened = Page(classroom, ADA, DEPTH)  # the same learner, a link to another race
    assert reopened.state.prediction.committed and reopened.state.setup_held
    assert reopened.setup() == {"task": "copy", "vs": "residual", "floors": 2, "seed": 0}
    send(reopened.race, "difference", "depth")  # a message from the page: set back
    assert reopened.state.difference == "residual" and meta(reopened.race)["controls"]["difference"] == "residual"
    assert reopened.play() == "a-first"
    again = Page(classroom, ADA, DEPTH)
    assert again.state.decided == "a-first" and not again.state.setup_held
    assert again.setup() == {"task": "copy", "vs": "depth", "floors": 2, "seed": 3}  # as its address says
    assert [p["outcome"] for _who, p in races(classroom)] == [None, "a-first"]  # stored once


def test_a_second_tab_that_commits_later_holds_the_race_the_first_committed_for(classroom) -> None:
    """Two tabs of one learner, open before the commit on different races: the first tab's commit stands, and the
    second tab, told so, races the set-up the first one holds, not its own."""
    first, second = Page(classroom, ADA, ADD_OR_REPLACE), Page(classroom, ADA, DEPTH)
    first.commit("a-first")
    second.commit("b-first")
    assert second.state.prediction.choice == "a-first" and "it stands" in second.note()
    assert second.setup() == first.setup() == {"task": "copy", "vs": "residual", "floors": 2, "seed": 0}
    assert second.state.setup_held
    assert [p["setup"]["vs"] for _who, p in races(classroom)] == ["residual"]


def test_a_pushed_race_lands_before_the_commit_and_is_the_race_predicted(classroom) -> None:
    """The teacher's race set-up reaches a student who has not committed (a set-up shows no result); the student
    then predicts for that race, and its outcome is stored with it."""
    page = Page(classroom, ADA, ADD_OR_REPLACE)
    push(classroom, "http://10.0.0.5:5006/explorables/train-the-block?task=copy&vs=depth&floors=2&seed=3&embed=1")
    page.poll()
    assert page.setup() == {"task": "copy", "vs": "depth", "floors": 2, "seed": 3}
    assert PUSH_RACE in page.note() and not page.state.prediction.committed
    assert meta(page.race)["controls"]["difference"] == "depth"  # the control shows it
    page.commit("together")
    assert page.state.predicted_setup["difference"] == "depth"
    verdict = page.play()
    assert races(classroom)[-1] == (ADA, {"question": QUESTION, "outcome": verdict, "setup": {
        "task": "copy", "vs": "depth", "floors": "2", "lr": "0.01", "warmup": "0", "seed": "3"}})


def test_a_push_moves_a_held_race_and_nothing_the_page_sends_does(classroom) -> None:
    """A student mid-race (committed, not decided) is moved to the teacher's race: their prediction stands for it
    and it starts from step 0; a changed control sent by the page is still set back, and Stop showing leaves the
    held race as it is. A student whose race was decided gets the push, and their own set-up back after."""
    held = Page(classroom, ADA, ADD_OR_REPLACE)
    held.commit("a-first")
    held.play(slices=1)
    done = Page(classroom, BEA, ADD_OR_REPLACE)
    done.commit("a-first")
    done.play()
    push(classroom, "task=copy&vs=depth&floors=2&seed=3")
    held.poll()
    done.poll()
    assert held.setup() == {"task": "copy", "vs": "depth", "floors": 2, "seed": 3}
    assert held.state.setup_held and held.state.predicted_setup["difference"] == "depth"
    assert held.state.a.steps == [] and PUSH_MOVED in held.note()
    assert {"task", "difference", "floors", "lr", "warmup", "seed"} <= set(meta(held.race)["disabled"])
    send(held.race, "task", "sort")  # the disabled control, sent anyway
    send(held.race, "seed", "4")
    assert held.setup() == {"task": "copy", "vs": "depth", "floors": 2, "seed": 3}
    assert meta(held.race)["controls"]["task"] == "copy" and meta(held.race)["controls"]["seed"] == 3
    held.idle()
    assert races(classroom)[-1][1]["setup"]["vs"] == "depth"  # a new page would hold the pushed race
    assert done.setup() == {"task": "copy", "vs": "depth", "floors": 2, "seed": 3}
    assert done.state.decided == "a-first" and not done.state.setup_held
    push(classroom, None)
    held.poll()
    done.poll()
    assert held.setup()["vs"] == "depth" and PUSH_HELD_KEPT in held.note()
    assert done.setup() == {"task": "copy", "vs": "residual", "floors": 2, "seed": 0} and PUSH_ENDED in done.note()
    assert held.play() is not None
    outcomes = [(who, p["setup"]["vs"]) for who, p in races(classroom) if p["outcome"]]
    assert outcomes == [(BEA, "residual"), (ADA, "depth")]


def test_a_lesson_page_counts_the_race_as_the_experiment_once_it_is_decided(classroom) -> None:
    """On a lesson page the race, not the commit, is the experiment: the strip ticks it when the server decides the
    race, and a reopened page puts back the decided race (not held again) with the tick."""
    def lesson_page() -> tuple[LessonView, SessionDocument]:
        doc = SessionDocument()
        who = identify({COOKIE_NAME: sign(ADA, classroom.secret)}, {"class": CLASS}, classroom.secret)
        recorder = SessionRecorder(classroom, who, lesson=RACE_LESSON.id, doc=doc)
        view = LessonView(RACE_LESSON, recorder=recorder)
        doc.run_until(lambda: recorder.in_flight == 0 and not doc.ticks)
        return view, doc

    view, doc = lesson_page()
    race = view.explorables[RACE]
    commit(race, "b-first")
    doc.run_until(lambda: race.state.prediction.committed)
    assert view.progress.predict and not view.progress.experiment
    assert lesson_page()[0].progress.experiment is False  # reopened: held, not run yet

    async def play() -> None:
        while race.state.decided is None:
            assert await race.advance()

    asyncio.run(play())
    doc.run_until(lambda: view.recorder.in_flight == 0 and not doc.ticks)
    assert view.progress.experiment
    reopened, _ = lesson_page()
    assert reopened.explorables[RACE].state.decided == "a-first" and reopened.progress.experiment


def test_the_race_is_the_only_explorable_whose_pushes_land_before_the_commit() -> None:
    """The registry marks the race; the other explorables' pushes still wait for the student's commit."""
    assert [eid for eid, spec in EXPLORABLE_SPECS.items() if spec.race] == [RACE]
