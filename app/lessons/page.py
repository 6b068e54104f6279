"""A lesson as a page: its Markdown, the live explorables, checkpoints and a progress strip."""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import nullcontext
from html import escape
from typing import Any
from urllib.parse import quote, urlencode

import panel as pn
import param

from blocktrace.app.classroom.class_summary import STEP_LABELS
from blocktrace.app.classroom.learner import SessionRecorder, newest_per_slot, slot_key
from blocktrace.app.classroom.pacing import closed_steps, pace_of
from blocktrace.app.classroom.store_validation import MAX_TEXT, RACE
from blocktrace.app.exercises.handlers import latest_result
from blocktrace.app.exercises.in_page import load_in_page
from blocktrace.app.exercises.in_page_view import InPageView
from blocktrace.app.exercises.package import install_command, installed_version
from blocktrace.app.lessons.loading import Directive, Lesson, load_lessons
from blocktrace.app.lessons.markdown import render
from blocktrace.app.server.pages import apply_theme, shell
from blocktrace.app.server.registry import EXPLORABLE_SPECS
from blocktrace.app.server.session_setup import attach_explorable, learner_bar, put_back, start_session
from blocktrace.app.settings import settings
from blocktrace.explorables.components.checkpoint import Checkpoint, CheckpointView, Option
from blocktrace.explorables.components.page_layout import READABLE_CONTROLS, beside, readable
from blocktrace.explorables.components.prediction import GATE_EVENTS
from blocktrace.explorables.components.style import styled
from blocktrace.explorables.components.updates import LiveHTML, batched, set_object
from blocktrace.explorables.components.url_state import session_query
from blocktrace.explorables.components.weak_callbacks import periodically

__all__ = ["LessonView", "lesson_routes"]

log = logging.getLogger(__name__)

MAX_EXPLANATION = MAX_TEXT  # characters of an explanation: the store keeps no longer text
MIN_EXPLANATION = 20  # a sentence
# The box itself takes this many, so a longer paste is never cut without a word: the counter shows it is over,
# and the server refuses it with a message, keeping the text for the student to shorten.
EXPLANATION_BOX_LIMIT = 10 * MAX_EXPLANATION
STEP_OF_DIRECTIVE = {"exercise": "implement", "explain": "explain"}  # the parts a hold can close
STEPS = tuple(STEP_LABELS.items())
WAITING = {  # what a held part says until it opens (app/lessons/loading.py: the answer directive)
    "prediction": "Opens once you have committed your answer to the question above.",
    "claim": "Opens once you have claimed where the two traces first differ.",
    "checkpoint": "Opens once you have checked an answer to the question above.",
}
HELD_BY_TEACHER = "Opens when your teacher releases the class from the prediction step."


class LessonProgress(param.Parameterized):
    """The four checkpoints of a lesson."""

    predict = param.Boolean(default=False, doc="A prediction was committed.")
    experiment = param.Boolean(default=False, doc="A control of the explorable was changed after predicting.")
    implement = param.Boolean(default=False, doc="The exercise's test result was reported.")
    explain = param.Boolean(default=False, doc="A written explanation was submitted.")

    def done(self) -> int:
        return sum(getattr(self, name) for name, _ in STEPS)


def progress_html(progress: LessonProgress) -> str:
    items = []
    for name, label in STEPS:
        done = getattr(progress, name)
        mark = "✓" if done else "○"
        state = "done" if done else "to do"
        items.append(f'<li class="{"done" if done else "todo"}"><span aria-hidden="true">{mark}</span> '
                     f'{label}<span class="bt-sr-only"> ({state})</span></li>')
    return (f'<nav aria-label="Lesson checkpoints"><ol class="bt-progress">{"".join(items)}</ol>'
            f'<p class="bt-muted bt-sr-live" aria-live="polite">{progress.done()} of 4 checkpoints done</p></nav>')


def exercise_result_html(payload: dict[str, Any]) -> str:
    """What a stored or fresh exercise result says on the lesson page."""
    total, passed = payload.get("tests_total"), payload.get("tests_passed")
    if payload.get("way") == "page":
        if payload.get("passed") is True:
            return ('<p class="bt-ok bt-exercise-result" role="status">Checked in the page: every function is '
                    "right. Your teacher sees this result.</p>")
        return (f'<p class="bt-bad bt-exercise-result" role="status">Checked in the page: {escape(str(passed))} of '
                f"{escape(str(total))} functions right. Read the hint under each one that is not, change a line "
                "and check again.</p>")
    if not payload.get("checked"):  # the old self-report buttons
        ok = payload.get("passed") is True
        return f'<p class="bt-muted bt-exercise-result" role="status">Reported: {"all" if ok else "some"} tests ' \
               f'{"pass" if ok else "fail"} (not checked).</p>'
    if payload.get("passed") is True:
        return (f'<p class="bt-ok bt-exercise-result" role="status">Checked: all {total} tests pass on your laptop '
                "and your functions' numbers match the server's. Your teacher sees this result.</p>")
    if passed == total:
        why = "every test passes, but your functions' numbers did not match the server's check"
    else:
        failing = ", ".join(escape(str(n)) for n in payload.get("failed", [])[:5])
        why = f"{passed} of {total} tests pass; still failing: {failing}"
    return (f'<p class="bt-bad bt-exercise-result" role="status">Checked: {why}. Read the first failing test\'s '
            "message in your terminal, fix one thing, and run <code>blocktrace check</code> again.</p>")


def explanation_counter(count: int) -> str:
    """The line under the explanation box: characters written of those kept, and how many too many."""
    over = count - MAX_EXPLANATION
    if over > 0:
        return (f'<p class="bt-field-error bt-counter">{count:,} / {MAX_EXPLANATION:,} characters: '
                f"{over:,} too many</p>")
    return f'<p class="bt-muted bt-counter">{count:,} / {MAX_EXPLANATION:,} characters</p>'


# explanation_counter, in the browser: the counter follows every key without a message to the server. Panel's HTML
# pane carries its text HTML-escaped (its view decodes it), so the script escapes what it sets as the server does.
COUNTER_JS = f"""
const count = [...cb_obj.value_input.trim()].length, limit = {MAX_EXPLANATION}, over = count - limit;
const fmt = (n) => n.toLocaleString("en");
const html = over > 0
  ? `<p class="bt-field-error bt-counter">${{fmt(count)}} / ${{fmt(limit)}} characters: ${{fmt(over)}} too many</p>`
  : `<p class="bt-muted bt-counter">${{fmt(count)}} / ${{fmt(limit)}} characters</p>`;
counter.text = html.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
"""


def explanation_problem(words: str) -> str | None:
    """Why an explanation (stripped) cannot be submitted, in the student's words; None when it can."""
    if not words:
        return "Your explanation is empty: write a few sentences in the box, then submit."
    if len(words) < MIN_EXPLANATION:
        return f"Write at least a sentence ({MIN_EXPLANATION} characters); yours has {len(words)}."
    if len(words) > MAX_EXPLANATION:
        return (f"Your explanation has {len(words):,} characters, {len(words) - MAX_EXPLANATION:,} more than the "
                f"{MAX_EXPLANATION:,} kept. Shorten it, then submit again: nothing was saved.")
    return None


def _install_step() -> str:
    """The exercise's first step on a laptop: blocktrace from this server (the address the page came from), the
    version it runs, offline; nothing when this server is not an installed blocktrace."""
    dist_version = installed_version()
    request = getattr(getattr(pn.state.curdoc, "session_context", None), "request", None)
    protocol, host = getattr(request, "protocol", None), getattr(request, "host", None)
    if dist_version is None or not protocol or not host:
        return ""
    return ("<li>Get <code>blocktrace</code> once: in a terminal, run<pre class=\"bt-command bt-install\"><code>"
            f"{escape(install_command(f'{protocol}://{host}', dist_version))}</code></pre>"
            "It comes from your teacher's server, so it works without the internet. It needs Python 3.11 or newer "
            "with NumPy (on Windows, type <code>py</code> instead of <code>python</code>).</li>")


class LessonView(pn.viewable.Viewer):
    """One session's lesson page."""

    def __init__(self, lesson: Lesson, on_event: Callable[[str, dict[str, Any]], None] | None = None,
                 recorder: SessionRecorder | None = None):
        super().__init__()
        self.lesson = lesson
        self.progress = LessonProgress()
        self.recorder = recorder
        self._on_event = on_event or (recorder.emit if recorder is not None else (lambda kind, payload: None))
        self.explorables: dict[str, Any] = {}
        self.checkpoints: dict[str, Checkpoint] = {}  # by id, as each checkpoint directive is reached
        self.in_page: dict[str, InPageView] = {}  # each exercise's version done in the page, by exercise id
        self.checkpoint_views: list[CheckpointView] = []
        predicted = {d.attrs["explorable"] for d in lesson.directives("predict")}
        for d in lesson.directives("explorable"):
            eid = d.attrs["id"]
            query = {str(k): str(v) for k, v in (d.attrs.get("state") or {}).items()}
            explorable = EXPLORABLE_SPECS[eid].load()(query=query, embed=True, predict=True)
            explorable.show_gate = eid not in predicted
            self.explorables[eid] = explorable
            if recorder is not None:
                attach_explorable(explorable, eid, recorder)
            self._watch_explorable(eid, explorable)
        self.strip = LiveHTML(progress_html(self.progress), **styled(sizing_mode="stretch_width"))
        self.progress.param.watch(lambda *_: setattr(self.strip, "object", progress_html(self.progress)),
                                  [name for name, _ in STEPS])
        self._resumers: dict[tuple[str, str | None], Callable[[dict[str, Any]], None]] = {}
        self._claim_answers: dict[str, list[Callable[[], None]]] = {}  # explorable -> answers opened by a claim
        self._held: dict[str, list[Callable[[], None]]] = {}  # explorable -> parts held until its prediction
        self._step_parts: dict[str, list[tuple[pn.Column, Any]]] = {}  # step -> (place, part) the pace may close
        self._closed: set[str] = set()
        self._polls: list[Callable[[], None]] = []  # held here: the periodic callbacks call them weakly
        self.parts = [self._part(block) for block in lesson.blocks]
        if recorder is not None:
            recorder.restore_events(self.resume)  # after the predictions: the store thread answers in order
        if self._stores:
            self._follow_pace()
            periodically(self._follow_pace, settings().pace_poll_ms)

    @property
    def _stores(self) -> bool:
        """This page's work goes to the class store (a classroom and a learner)."""
        return self.recorder is not None and self.recorder.active

    def resume(self, events: list) -> None:
        """Put back what this learner did on this page before: answers, text, results, claims and controls.

        Each slot (a checkpoint, the explanation, a control, ...) takes its newest stored event, in the
        order those were made. A value the page no longer accepts is skipped.
        """
        newest = newest_per_slot(events)
        if self.recorder is not None:
            self.recorder.remember(newest)
        for event in newest:
            try:
                self._resume_one(event)
            except (ValueError, TypeError, KeyError, IndexError) as error:  # a stored value this page refuses
                log.info("not resumed: a %s event (%s)", event.kind, type(error).__name__)

    def _resume_one(self, event: Any) -> None:
        explorable = self.explorables.get(event.explorable) if event.explorable else None
        held = event.kind == RACE and event.payload.get("outcome") is None  # stored at the commit: not run yet
        if explorable is not None and explorable.gate.prediction.unlocked and not held:
            self.progress.experiment = True  # whatever it stored after the commit was the experiment
        if event.kind == "claim" and explorable is not None:
            for then in self._claim_answers.pop(event.explorable, []):  # claimed before: its answers open
                then()
        if explorable is not None:
            put_back(explorable, event)
            return
        handler = self._resumers.get((event.kind, slot_key(event.payload)))
        if handler is not None:
            handler(event.payload)

    # --- live parts -------------------------------------------------------------------------

    def _watch_explorable(self, eid: str, explorable: Any) -> None:
        gate = explorable.gate.prediction

        def predicted(event) -> None:
            if event.new:
                self.progress.predict = True

        gate.param.watch(predicted, "committed")
        self.progress.predict = self.progress.predict or gate.committed
        names = sorted({k.param for k in EXPLORABLE_SPECS[eid].query_keys().values()})

        def changed(*events) -> None:
            if gate.unlocked:
                self.progress.experiment = True  # the recorder (attach_explorable) stores the change itself

        explorable.state.param.watch(changed, names)
        if EXPLORABLE_SPECS[eid].race:  # a race is the experiment once the server has decided it
            explorable.state.param.watch(lambda event: changed() if event.new is not None else None, ["decided"])

    def _part(self, block: str | Directive) -> pn.viewable.Viewable:
        if isinstance(block, str):
            return LiveHTML(f'<div class="bt-prose">{render(block)}</div>', **styled(sizing_mode="stretch_width"))
        part = getattr(self, f"_directive_{block.name}")(block.attrs)
        step = STEP_OF_DIRECTIVE.get(block.name)
        if step is None:
            return part
        place = pn.Column(part, sizing_mode="stretch_width")  # holds the part, or the held note instead
        self._step_parts.setdefault(step, []).append((place, part))
        return place

    def _follow_pace(self) -> None:
        """Close the steps after the one the teacher holds the class at (their content leaves the page)."""
        recorder = self.recorder
        pace = pace_of(recorder.classroom.thread.paces, recorder.learner.class_code, self.lesson.id)
        closed = closed_steps(pace.hold if pace else None)
        if closed == self._closed:
            return
        self._closed = closed
        for step, places in self._step_parts.items():
            for place, part in places:
                place.objects = [self._held_note(step)] if step in closed else [part]

    def _held_note(self, step: str) -> pn.viewable.Viewable:
        name = {"implement": "the exercise", "explain": "the explanation"}.get(step, "this step")
        return LiveHTML(f'<p class="bt-notice bt-held" role="status">Your teacher is holding the class at an earlier '
                        f"step; {name} opens when they release it.</p>", **styled(sizing_mode="stretch_width"))

    def _directive_explorable(self, attrs: dict) -> pn.viewable.Viewable:
        explorable = self.explorables[attrs["id"]]
        title = EXPLORABLE_SPECS[attrs["id"]].title()
        return pn.Column(LiveHTML(f'<h2 class="bt-h2">Explorable: {escape(title)}</h2>', **styled()),
                         explorable, css_classes=["bt-explorable"], sizing_mode="stretch_width")

    def _directive_predict(self, attrs: dict) -> pn.viewable.Viewable:
        return self.explorables[attrs["explorable"]].gate

    def _directive_checkpoint(self, attrs: dict) -> pn.viewable.Viewable:
        checkpoint = Checkpoint(attrs["id"], attrs["question"], [
            Option(str(o["text"]), bool(o.get("correct")), str(o["feedback"])) for o in attrs["options"]])
        self.checkpoints[checkpoint.qid] = checkpoint
        view = CheckpointView(checkpoint, on_check=lambda c: self._on_event(
            "checkpoint", {"checkpoint": c.qid, "answer": c.answer, "correct": c.correct}))
        self.checkpoint_views.append(view)  # in the page, or held in an answer until it opens
        self._resumers[("checkpoint", checkpoint.qid)] = lambda payload: view.restore(int(payload["answer"]))
        return view

    def _directive_exercise(self, attrs: dict) -> pn.viewable.Viewable:
        """The exercise, two ways: on a laptop with Python (blocktrace from this server, a download, one command,
        and the result the server checked), or in the page (the lines of each function chosen and ordered)."""
        exercise_id = str(attrs.get("id"))
        edit = escape(str(attrs.get("file", "")))
        result = LiveHTML('<p class="bt-muted bt-exercise-result" role="status">No result yet.</p>',
                          **styled(sizing_mode="stretch_width"))

        def show(payload: dict[str, Any]) -> None:
            self.progress.implement = True
            result.object = exercise_result_html(payload)

        in_page = self._in_page_exercise(exercise_id, attrs, show)
        if in_page is not None:
            self.in_page[exercise_id] = in_page

        def resume(payload: dict[str, Any]) -> None:
            show(payload)
            if in_page is not None and payload.get("way") == "page":
                in_page.restore(payload)  # the lines of the last check, not a poll's: those may be mid-change

        self._resumers[("exercise", exercise_id)] = resume
        html = (f'<h2 class="bt-h2">Exercise: {escape(str(attrs.get("title", "")))}</h2>'
                f'<p>{escape(str(attrs.get("about", "")))}</p>')
        if self._stores:
            learner = self.recorder.learner
            href = f"/exercises/{quote(exercise_id)}.zip?{urlencode({'class': learner.class_code})}"
            html += ('<h3 class="bt-h3">On a computer with Python</h3><ol class="bt-steps">'
                     f"{_install_step()}"
                     f'<li><a class="bt-link bt-download" href="{escape(href)}" download>'
                     "Download the exercise</a> (a zip: the file you edit, its tests and a ticket for this class) "
                     "and unzip it.</li>"
                     f"<li>Edit <code>{edit}</code>.</li>"
                     "<li>In that folder, run <code>blocktrace check</code>. It runs the tests, names each mistake "
                     "it finds, and sends the result here and to your teacher.</li></ol>")
            self._poll_exercise(learner.class_code, learner.id, exercise_id, show)
        else:
            html += (f'<p>Edit <code>{escape(str(attrs["path"]))}/{edit}</code>, then run:</p>'
                     f'<pre class="bt-command"><code>blocktrace check {escape(str(attrs["path"]))}</code></pre>'
                     '<p class="bt-muted">This server keeps no class records, so the result stays on your '
                     "computer.</p>")
        return pn.Column(LiveHTML(html, **styled(sizing_mode="stretch_width")), *([in_page] if in_page else []),
                         result, css_classes=["bt-card"], sizing_mode="stretch_width")

    def _in_page_exercise(self, exercise_id: str, attrs: dict,
                          show: Callable[[dict[str, Any]], None]) -> InPageView | None:
        """The exercise done in the page, checked and (with a classroom) stored by the server; None if it has none."""
        data = load_in_page(str(attrs.get("path")), str(attrs.get("file", "")))
        if data is None:
            return None

        def is_open() -> bool:  # the teacher's hold closes it here, whatever the browser still shows or sends
            return "implement" not in self._closed

        if self._stores:
            learner = self.recorder.learner
            return InPageView(exercise_id, data, f"{learner.class_code}\x00{learner.id}\x00{exercise_id}",
                              lambda payload, saved: self.recorder.emit("exercise", payload, saved=saved), show,
                              is_open)

        def done(payload: dict[str, Any]) -> None:
            self.progress.implement = True
            self._on_event("exercise", payload)

        return InPageView(exercise_id, data, f"session\x00{id(self)}\x00{exercise_id}", None, done, is_open)

    def _poll_exercise(self, class_code: str, learner: str, exercise_id: str,
                       show: Callable[[dict[str, Any]], None]) -> None:
        """Show a result `blocktrace check` sent while the page is open, to this or another server process (the
        store thread's copy: no database read here)."""
        doc = pn.state.curdoc
        if doc is None or doc.session_context is None:
            return
        shown: dict[str, Any] = {"result": None}

        def poll() -> None:
            found = latest_result(class_code, learner, exercise_id)
            if found is not None and found != shown["result"]:
                shown["result"] = found
                show(found)

        self._polls.append(poll)
        periodically(poll, settings().exercise_poll_ms)

    def _directive_answer(self, attrs: dict) -> pn.viewable.Viewable:
        """A part held on the server: a note in its place until the student has committed what it answers.

        Until then its text and its checkpoints are not in the page's document at all (a folded or hidden
        element would still be sent to the browser); they are built now, so that an earlier visit's answers
        are put back into them, and go into the document when it opens."""
        title = escape(str(attrs.get("title") or ""))
        head = f'<h3 class="bt-h3">{title}</h3>' if title else ""
        label = title or "Opens after your answer"
        blocks = attrs["blocks"]
        if len(blocks) == 1 and isinstance(blocks[0], str):
            # Prose alone: one pane whose text changes, a cheaper message than new models in the page.
            place: Any = LiveHTML("", **styled(sizing_mode="stretch_width"))
            prose = f'<div class="bt-prose">{render(blocks[0])}</div>'
            shown = f'<section class="bt-answer" aria-label="{label}">{head}{prose}</section>' if title else prose

            def show(open_: bool, note: str) -> None:
                set_object(place, shown if open_ else note)
        else:
            parts = [LiveHTML(f'<div class="bt-prose">{render(b)}</div>', **styled(sizing_mode="stretch_width"))
                     if isinstance(b, str) else self._part(b) for b in blocks]
            if title:
                parts.insert(0, LiveHTML(f'<section class="bt-answer" aria-label="{label}">{head}</section>',
                                         **styled(sizing_mode="stretch_width")))
            opened = pn.Column(*parts, sizing_mode="stretch_width", margin=0)
            closed = LiveHTML("", **styled(sizing_mode="stretch_width"))
            place = pn.Column(closed, sizing_mode="stretch_width", margin=0)

            def show(open_: bool, note: str) -> None:
                if not open_:
                    set_object(closed, note)
                wanted = opened if open_ else closed
                if place.objects != [wanted]:
                    place.objects = [wanted]

        def shown_or_note(open_: bool, waiting: str) -> None:
            said = waiting if title else f"This part {waiting[0].lower()}{waiting[1:]}"  # alone under a heading
            show(open_, f'<section class="bt-answer bt-answer-closed" aria-label="{label}">{head}'
                        f'<p class="bt-muted">{escape(said)}</p></section>')

        self._hold_until(attrs, shown_or_note)
        return place

    def _hold_until(self, attrs: dict, show: Callable[[bool, str], None]) -> None:
        """show(open, note) now and whenever the prediction, claim or checkpoint `attrs` names changes: open once
        it is committed (a prediction: final and not held by the teacher, as the explorable's own values are),
        else closed, with the note saying what opens it. A teacher's link without the prediction step opens all."""
        after = attrs["after"]
        if after == "checkpoint":
            checkpoint = self.checkpoints[attrs["checkpoint"]]
            show(checkpoint.attempts > 0, WAITING["checkpoint"])
            checkpoint.param.watch(lambda e: show(e.new > 0, WAITING["checkpoint"]), "attempts")
            return
        explorable = self.explorables[attrs["explorable"]]
        gate = explorable.gate.prediction
        if after == "prediction":
            def follow() -> None:
                show(gate.unlocked, HELD_BY_TEACHER if gate.committed and gate.held else WAITING["prediction"])

            follow()
            held = self._held.setdefault(attrs["explorable"], [])
            if not held:
                gate.param.watch(batched(lambda *_: self._follow_gate(held)), GATE_EVENTS)
            held.append(follow)
            return
        state, opened = explorable.state, {"open": False}  # a claim's answer stays open once claimed

        def claimed(*_events) -> None:
            opened["open"] = opened["open"] or state.claim_result is not None or gate.skipped
            show(opened["open"], WAITING["claim"])

        def claimed_before() -> None:  # a claim of an earlier visit (resume)
            opened["open"] = True
            claimed()

        claimed()
        state.param.watch(claimed, "claim_result")
        gate.param.watch(claimed, "skipped")
        self._claim_answers.setdefault(attrs["explorable"], []).append(claimed_before)

    @staticmethod
    def _follow_gate(held: list[Callable[[], None]]) -> None:
        """Open or close every part held until one prediction, together: the page's models are walked once
        (Bokeh recomputes its document's models after each change of a layout's children, unless frozen)."""
        doc = pn.state.curdoc
        with doc.models.freeze() if doc is not None else nullcontext():
            for follow in held:
                follow()

    def _directive_explain(self, attrs: dict) -> pn.viewable.Viewable:
        text = pn.widgets.TextAreaInput(label="Your explanation", max_length=EXPLANATION_BOX_LIMIT, rows=4,
                                        sizing_mode="stretch_width", placeholder="A few sentences")
        counter = pn.pane.HTML(explanation_counter(0), **styled(sizing_mode="stretch_width"))
        text.jscallback(value_input=COUNTER_JS, args={"counter": counter})  # drawn in the browser, key by key
        error = LiveHTML("", **styled(sizing_mode="stretch_width"))
        submit = pn.widgets.Button(label="Submit explanation", color="primary")
        readable([text])
        echo = LiveHTML("", **styled(sizing_mode="stretch_width"))

        def show(words: str, status: str = "Saved.") -> None:
            self.progress.explain = True
            echo.object = (f'<p class="bt-ok bt-explained" role="status">{status}</p>'
                           f"<blockquote>{escape(words)}</blockquote>")

        def send(_event) -> None:
            if "explain" in self._closed:  # the teacher holds the class before this step
                return
            words = (text.value or "").strip()
            counter.object = explanation_counter(len(words))
            problem = explanation_problem(words)
            error.object = f'<p class="bt-field-error" role="alert">{escape(problem)}</p>' if problem else ""
            if problem:
                return
            if self._stores:
                show(words, "Saving…")
                self.recorder.emit("explanation", {"text": words}, saved=lambda: show(words))
            else:
                self._on_event("explanation", {"text": words})
                show(words, "Submitted.")

        def resume(payload: dict[str, Any]) -> None:
            words = str(payload["text"])[:MAX_EXPLANATION]
            if not text.value:
                text.value = words
                counter.object = explanation_counter(len(words))
            show(words)

        self._resumers[("explanation", None)] = resume

        submit.on_click(send)
        return pn.Column(LiveHTML(f'<h2 class="bt-h2">Explain</h2><p>{escape(str(attrs["prompt"]))}</p>',
                                      **styled(sizing_mode="stretch_width")),
                         text, counter, error, submit, echo, css_classes=["bt-card"], sizing_mode="stretch_width")

    def __panel__(self):
        lesson = self.lesson
        objectives = "".join(f"<li>{escape(o)}</li>" for o in lesson.objectives)
        head = LiveHTML(
            f'<h1 class="bt-title">{escape(lesson.title)}</h1>'
            f'<p class="bt-muted">You will:</p><ul class="bt-objectives">{objectives}</ul>',
            **styled(sizing_mode="stretch_width"))
        bar = learner_bar(self.recorder) if self.recorder is not None else None
        parts = steps_beside(lesson.blocks, self.parts)
        return pn.Column(*([bar] if bar is not None else []), head, self.strip, *parts,
                         sizing_mode="stretch_width", styles={"max-width": "80rem"},
                         stylesheets=[READABLE_CONTROLS])  # the prose, the learner bar and the boxes at 1rem


def steps_beside(blocks: list, parts: list) -> list:
    """The parts, with each explorable's steps ("## Run the comparison" and the answer it heads) beside the
    explorable instead of under it: the student reads a step and moves the control it names without
    scrolling past a 1,500 px explorable. Narrow, the steps wrap to below it as before."""
    out, i = [], 0
    while i < len(parts):
        block = blocks[i]
        heading = blocks[i + 1] if i + 1 < len(blocks) else None
        after = blocks[i + 2] if i + 2 < len(blocks) else None
        if (isinstance(block, Directive) and block.name == "explorable" and isinstance(heading, str)
                and heading.strip().startswith("## ") and "\n" not in heading.strip()
                and isinstance(after, Directive) and after.name == "answer"):
            out.append(beside(parts[i], [parts[i + 1], parts[i + 2]]))
            i += 3
        else:
            out.append(parts[i])
            i += 1
    return out


def first_question(lesson: Lesson) -> str | None:
    """The first question the lesson's page asks: its first prediction's or checkpoint's, outside any answer."""
    for block in lesson.blocks:
        if isinstance(block, Directive) and block.name == "predict":
            return EXPLORABLE_SPECS[block.attrs["explorable"]].question()
        if isinstance(block, Directive) and block.name == "checkpoint":
            return str(block.attrs["question"])
    return None


def lesson_routes() -> dict[str, Callable[[], pn.viewable.Viewable]]:
    def page_for(lesson: Lesson) -> Callable[[], pn.viewable.Viewable]:
        def page() -> pn.viewable.Viewable:
            query = session_query()
            apply_theme(query)
            recorder = start_session(query, lesson=lesson.id)
            return shell(LessonView(lesson, recorder=recorder), lesson.title, question=first_question(lesson))
        page.__name__ = lesson.id.replace("-", "_") + "_lesson"
        page.title = lesson.title
        return page

    return {lesson.route: page_for(lesson) for lesson in load_lessons()}
