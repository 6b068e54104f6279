"""A reload (a new session of the same learner) puts back everything done on a lesson page: the prediction,
checkpoint answers, the explanation, the exercise result and the explorable's controls.

The sessions' recorders run on the real store thread over a real SQLite store, as in test_final_after_store.
"""

from __future__ import annotations

import panel as pn
import pytest

from blocktrace.app.classroom.identity import COOKIE_NAME, sign
from blocktrace.app.classroom.learner import Classroom, SessionRecorder, identify
from blocktrace.app.classroom.store import EventStore, StoredEvent
from blocktrace.app.lessons.loading import load_lessons
from blocktrace.app.lessons.page import LessonView
from blocktrace.app.server.session_setup import attach_explorable, learner_bar, restore_explorable
from blocktrace.explorables.components.checkpoint import CheckpointView
from blocktrace.explorables.transformer_block_trace.view import TraceExplorable
from tests.drawn import send
from tests.unit.test_final_after_store import SessionDocument, commit, open_classroom

CLASS, LEARNER = "resume", "0123456789abcdef0123456789abcdef"
LESSON = next(lesson for lesson in load_lessons() if lesson.id == "transformer-block")
EXPLANATION = "Zero updates leave the stream as it was; replacing throws the input away."
CHECKED = {"id": "transformer-block-residual", "passed": True, "tests_passed": 12, "tests_total": 12, "failed": [],
           "numbers_match": True, "checked": True}


@pytest.fixture
def classroom(tmp_path):
    yield from open_classroom(EventStore(f"sqlite:///{tmp_path / 'class.db'}"))


def open_page(classroom: Classroom, learner: str = LEARNER,
              lesson=LESSON) -> tuple[LessonView, SessionRecorder, SessionDocument]:
    doc = SessionDocument()
    who = identify({COOKIE_NAME: sign(learner, classroom.secret)}, {"class": CLASS}, classroom.secret)
    recorder = SessionRecorder(classroom, who, lesson=lesson.id, doc=doc)
    view = LessonView(lesson, recorder=recorder)
    idle(recorder, doc)
    return view, recorder, doc


def idle(recorder: SessionRecorder, doc: SessionDocument) -> None:
    doc.run_until(lambda: recorder.in_flight == 0 and not doc.ticks)


def widgets(view: LessonView, kind: type) -> list:
    found = []
    for part in view.parts:
        objects = part.select(kind) if isinstance(part, pn.layout.Panel) else []
        found += objects
    return found


def checkpoint_views(view: LessonView) -> list[CheckpointView]:
    return view.checkpoint_views


def press(view: LessonView, label: str) -> None:
    [button] = [b for b in widgets(view, pn.widgets.Button) if b.label == label]
    button.clicks += 1


def explanation_box(view: LessonView) -> pn.widgets.TextAreaInput:
    [box] = widgets(view, pn.widgets.TextAreaInput)
    return box


def page_text(view: LessonView) -> str:
    texts = []
    for part in view.parts:
        if isinstance(part, pn.layout.Panel):
            texts += [str(p.object) for p in part.select(lambda o: hasattr(o, "object"))]
        elif hasattr(part, "object"):
            texts.append(str(part.object))
    return " ".join(texts)


def test_a_reload_restores_answers_text_result_and_controls(classroom) -> None:
    view, recorder, doc = open_page(classroom)
    explorable = view.explorables["transformer-block-trace"]
    prediction = explorable.gate.prediction
    commit(explorable, next(iter(prediction.choices)))
    doc.run_until(lambda: prediction.committed)
    explorable.state.zero_updates()  # both experiments the prediction is about: its verdict shows
    explorable.state.replace = True
    assert explorable.state.judged
    explorable.state.param.update(replace=False, mlp_scale=1.0)  # where the student leaves the controls
    doc.fire_timeouts()  # the end of the burst: the controls' last values go to the store
    first = checkpoint_views(view)[0]
    first.choice.value = first.checkpoint.options[1].label
    first.button.clicks += 1
    explanation_box(view).value = EXPLANATION
    press(view, "Submit explanation")
    assert "Saving…" in page_text(view)
    doc.run_until(lambda: recorder.in_flight == 0 and "Saved." in page_text(view))
    classroom.store.record("e" * 32, CLASS, LEARNER, "exercise", CHECKED, LESSON.id)  # as /exercises/report does
    assert view.progress.done() == 3  # the exercise is reported by `blocktrace check`, outside this page

    again, recorder2, doc2 = open_page(classroom)  # the same learner, a new session
    assert again.progress.done() == 4, "prediction, experiment, exercise and explanation all come back"
    restored = checkpoint_views(again)[0]
    assert restored.checkpoint.question in page_text(again), "held until the commit: the reload's restore opens it"
    assert restored.checkpoint.answer == 1 and restored.checkpoint.attempts == 1
    assert restored.choice.value == restored.checkpoint.options[1].label
    assert restored.checkpoint.feedback(1) in restored.feedback.object
    assert checkpoint_views(again)[1].checkpoint.answer is None  # never answered: left alone
    assert explanation_box(again).value == EXPLANATION
    assert "Checked: all 12 tests pass" in page_text(again)
    state = again.explorables["transformer-block-trace"].state
    assert (state.attention_scale, state.mlp_scale, state.replace) == (0.0, 1.0, False)
    assert state.judged, "the experiments seen before count again: the verdict is back"
    rows_before = classroom.store.export_csv(CLASS).count("\n")
    idle(recorder2, doc2)
    doc2.fire_timeouts()
    idle(recorder2, doc2)
    assert classroom.store.export_csv(CLASS).count("\n") == rows_before, "putting things back stores nothing new"


def test_another_learner_and_another_lesson_resume_nothing(classroom) -> None:
    view, recorder, doc = open_page(classroom)
    explanation_box(view).value = EXPLANATION
    press(view, "Submit explanation")
    doc.run_until(lambda: recorder.in_flight == 0 and "Saved." in page_text(view))
    other, _, _ = open_page(classroom, learner="fedcba9876543210fedcba9876543210")
    assert explanation_box(other).value == "" and other.progress.done() == 0
    assert classroom.store.learner_events(CLASS, LEARNER, "block-floor") == []
    assert [e.kind for e in classroom.store.learner_events(CLASS, LEARNER, LESSON.id)] == ["explanation"]


def test_a_stored_value_the_page_refuses_is_skipped(classroom) -> None:
    """An answer index the question does not have, or a control value out of bounds, leaves the default."""
    view, _, _ = open_page(classroom)
    explorable = view.explorables["transformer-block-trace"]
    prediction = explorable.gate.prediction
    prediction.settle(next(iter(prediction.choices)), None)
    qid = checkpoint_views(view)[0].checkpoint.qid
    view.resume([StoredEvent("checkpoint", None, {"checkpoint": qid, "answer": 7, "correct": True}),
                 StoredEvent("param", "transformer-block-trace", {"name": "attention_scale", "value": 1e9}),
                 StoredEvent("explanation", None, {"text": EXPLANATION})])
    assert checkpoint_views(view)[0].checkpoint.answer is None
    assert explorable.state.attention_scale == 1.0
    assert explanation_box(view).value == EXPLANATION


def test_a_reload_restores_the_block_floor_claim_its_answer_and_checkpoints(classroom) -> None:
    lesson = next(x for x in load_lessons() if x.id == "block-floor")
    view, recorder, doc = open_page(classroom, lesson=lesson)
    floor = view.explorables["block-floor"]
    commit(floor, next(iter(floor.gate.prediction.choices)))
    doc.run_until(lambda: floor.gate.prediction.committed)
    floor.state.tracked = 1  # "an"
    floor.state.stage = 4
    doc.fire_timeouts()
    send(floor, "action", "claim")  # "This is the first divergence", as the browser sends it
    assert floor.state.claim_result[1] == "Right on"
    inside = floor.checkpoint_views[0]
    inside.choice.value = inside.checkpoint.options[1].label
    inside.button.clicks += 1
    explanation_box(view).value = EXPLANATION
    press(view, "Submit explanation")
    doc.run_until(lambda: recorder.in_flight == 0 and "Saved." in page_text(view))
    assert "first divergence is at stage 4" in page_text(view)

    again, _, _ = open_page(classroom, lesson=lesson)
    floor2 = again.explorables["block-floor"]
    assert floor2.state.words[floor2.state.tracked] == "an" and floor2.state.stage == 4
    assert floor2.state.claim_result is not None and floor2.state.claim_result[1] == "Right on"
    assert "first divergence is at stage 4" in page_text(again), "the answer opened by the claim opens again"
    assert floor2.checkpoint_views[0].checkpoint.answer == 1


def open_standalone(classroom: Classroom, query: dict[str, str] | None = None, learner: str = LEARNER):
    """An explorable's own page, set up as its route does (app/server/routes.py)."""
    doc = SessionDocument()
    who = identify({COOKIE_NAME: sign(learner, classroom.secret)}, {"class": CLASS}, classroom.secret)
    recorder = SessionRecorder(classroom, who, lesson=LESSON.id, doc=doc)
    explorable = TraceExplorable(query=query)
    attach_explorable(explorable, "transformer-block-trace", recorder)
    restore_explorable(explorable, "transformer-block-trace", recorder, query or {})
    idle(recorder, doc)
    return explorable, recorder, doc


def test_the_explorable_s_own_page_restores_controls_and_experiments_from_the_lesson(classroom) -> None:
    """What a student did in the lesson comes back on the explorable's own page, and a link's state wins."""
    view, recorder, doc = open_page(classroom)
    explorable = view.explorables["transformer-block-trace"]
    commit(explorable, next(iter(explorable.gate.prediction.choices)))
    doc.run_until(lambda: explorable.gate.prediction.committed)
    explorable.state.zero_updates()
    explorable.state.replace = True
    explorable.state.param.update(mlp_scale=0.5, inspect="blocks.0.resid_mid")
    doc.fire_timeouts()
    idle(recorder, doc)

    alone, _, _ = open_standalone(classroom)
    state = alone.state
    assert alone.gate.prediction.committed
    assert (state.attention_scale, state.mlp_scale, state.replace) == (0.0, 0.5, True)
    assert state.inspect == "blocks.0.resid_mid", "the stage the student was looking at"
    assert state.judged, "the experiments seen in the lesson count on the explorable's own page"

    linked, _, _ = open_standalone(classroom, {"mlp_scale": "2"})
    assert linked.state.mlp_scale == 2.0, "a state the link names stays as the link says"
    assert linked.state.replace is True


def test_the_explorable_s_own_page_of_another_learner_restores_nothing(classroom) -> None:
    view, recorder, doc = open_page(classroom)
    explorable = view.explorables["transformer-block-trace"]
    commit(explorable, next(iter(explorable.gate.prediction.choices)))
    doc.run_until(lambda: explorable.gate.prediction.committed)
    explorable.state.mlp_scale = 0.5
    doc.fire_timeouts()
    idle(recorder, doc)
    stranger, _, _ = open_standalone(classroom, learner="f" * 32)
    assert not stranger.gate.prediction.committed and stranger.state.mlp_scale == 1.0


@pytest.mark.parametrize("name", ["Ada Lovelace", '<img src=x onerror="window.__pwned=1">'])
def test_a_saved_name_is_shown_back_in_the_name_field_of_every_new_page(classroom, name) -> None:
    """After "Save name" and "Saved.", a reload (or another page) shows the name in its field, as the text it is."""
    def bar_of_a_new_page() -> tuple[pn.widgets.TextInput, pn.widgets.Button, SessionRecorder, SessionDocument]:
        doc = SessionDocument()
        who = identify({COOKIE_NAME: sign(LEARNER, classroom.secret)}, {"class": CLASS}, classroom.secret)
        recorder = SessionRecorder(classroom, who, lesson=LESSON.id, doc=doc)
        bar = learner_bar(recorder)
        recorder.join()  # as the page does once it is up in the browser (start_session's onload)
        idle(recorder, doc)
        return bar.select(pn.widgets.TextInput)[0], bar.select(pn.widgets.Button)[0], recorder, doc

    field, save, recorder, doc = bar_of_a_new_page()
    assert field.value == ""  # a learner who never saved one
    field.value = name
    save.clicks += 1
    idle(recorder, doc)
    assert classroom.store.display_name(CLASS, LEARNER) == name
    again, _save, _recorder, _doc = bar_of_a_new_page()
    assert again.value == name
