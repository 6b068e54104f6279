"""Connect one page session to the classroom: identify the learner, restore and record their work."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from contextlib import nullcontext
from html import escape
from typing import Any
from urllib.parse import urlencode

import panel as pn

from blocktrace.app.classroom import learner as learners
from blocktrace.app.classroom.identity import DEFAULT_CLASS, clean_display_name
from blocktrace.app.classroom.learner import Learner, SessionRecorder, newest_per_slot
from blocktrace.app.classroom.pacing import PushedView, pace_of
from blocktrace.app.classroom.race import RaceRecord, RaceScreen
from blocktrace.app.classroom.store_validation import RACE
from blocktrace.app.server.registry import EXPLORABLE_SPECS
from blocktrace.app.settings import settings
from blocktrace.explorables.components.page_layout import READABLE_CONTROLS, readable
from blocktrace.explorables.components.style import styled
from blocktrace.explorables.components.updates import LiveHTML
from blocktrace.explorables.components.weak_callbacks import periodically

__all__ = [
    "attach_explorable", "for_a_browser", "learner_bar", "put_back", "question_id", "restore_explorable",
    "start_session"
]

log = logging.getLogger(__name__)


def question_id(explorable_id: str) -> str:
    """The stored question of an explorable's prediction gate (one per explorable)."""
    return f"{explorable_id}/prediction"


def for_a_browser(context: Any) -> bool:
    """A session of the running server, opened by a browser's page or websocket.

    Not Panel's start-up warm-up, which builds every page once with no server behind it (its
    session context has no server context) and throws it away: learning from it registered a
    learner per page at every start, and its store answers could land on the page while Panel
    was taking the page's callbacks aside, which stopped the server from starting.
    """
    return context is not None and getattr(context, "server_context", None) is not None \
        and getattr(context, "request", None) is not None


NO_LEARNER = ('<p class="bt-notice" role="status">Many new visitors have arrived from your network just now, '
              "so this page is not saving your work. Everything works; reload the page in a minute to be "
              "saved again.</p>")


def start_session(query: dict[str, str], lesson: str | None = None) -> SessionRecorder:
    """The recorder for this session, for the learner whose cookie the server set on the page request."""
    classroom = learners.current()
    context = getattr(pn.state.curdoc, "session_context", None)
    if classroom is None or not for_a_browser(context):
        return SessionRecorder(None, None, lesson)  # no classroom, or the start-up warm-up (no browser)
    learner = learners.identify(dict(pn.state.cookies or {}), query, classroom.secret, classroom.admits)
    if learner is None:  # over the new-learner limit of the address (app/server/page_requests.py)
        recorder = SessionRecorder(None, None, lesson)
        recorder.notice.param.update(object=NO_LEARNER, visible=True)
        recorder.unrecorded = True
        return recorder
    recorder = SessionRecorder(classroom, learner, lesson)
    # Joined once the page is up in the browser, which happens only in the process that holds its websocket.
    # With --num-procs the page request and the websocket may reach different processes, and each builds
    # the session; joining at build time registered a second, phantom learner in the other process.
    pn.state.onload(lambda: recorder.join())
    return recorder


def attach_explorable(explorable: Any, explorable_id: str, recorder: SessionRecorder) -> None:
    """Restore a committed prediction, store new commits (final only once stored), record what changes."""
    if not recorder.active:
        # A classroom page over its address's new-learner limit stores nothing: its commit is not called final.
        explorable.gate.prediction.unsaved = recorder.unrecorded
        return
    gate = explorable.gate
    prediction = gate.prediction
    prediction.needs_store = True  # "final", and the experiment, only once the store has the answer
    question = question_id(explorable_id)
    spec = EXPLORABLE_SPECS[explorable_id]
    race = RaceRecord(explorable.state, explorable_id, question, recorder) if spec.race else None
    explorable._class_race = race  # put_back hands it the race a new page restores
    restoring = race.restoring if race is not None else nullcontext

    def restore(stored) -> None:
        if not prediction.committed:
            with restoring():  # the race it was for comes back with the events (restore_explorable)
                prediction.settle(stored.choice, stored.note)

    recorder.restore_prediction(question, restore)

    def committed(p) -> None:
        def answer(status: str, row) -> None:
            if p.committed:
                return  # already final (restored meanwhile): what the store holds is shown
            if status == "stored":
                p.settle(p.choice, p.note)
            elif status == "refused" and row is not None and row.choice in p.choices:
                with restoring():
                    p.settle(row.choice, row.note)
                if race is not None:
                    race.refetch()  # the race the earlier commit holds, not this page's
                gate.show_message('<p class="bt-muted">You had already committed an answer earlier; it stands.</p>')
            elif status == "refused":
                p.reopen()
                gate.show_error("Your prediction could not be saved. Please commit it again.")
            else:
                p.wait_for_store()  # still saving: the recorder retries until the store takes it

        recorder.commit_prediction(question, p.choice, p.note, explorable_id, answer)

    gate.on_commit = committed
    explorable.emit = lambda kind, payload: recorder.emit(kind, payload, explorable_id)
    keys = spec.query_keys()
    names = sorted({k.param for k in keys.values()})

    def changed(*events) -> None:
        if prediction.unlocked:
            for e in events:
                recorder.parameter_changed(explorable_id, e.name, e.new)

    explorable.state.param.watch(changed, names)

    shown = {"answers": "", "pushed": 0}
    pushes = (RaceScreen if spec.race else PushedView)(explorable.state, explorable_id)

    def follow_pace() -> None:
        pace = pace_of(recorder.classroom.thread.paces, recorder.learner.class_code, recorder.lesson)
        held = pace is not None and pace.hold == "predict"
        if prediction.held != held:
            prediction.held = held
        if not prediction.unlocked and not pushes.before_commit:
            return  # nothing that shows a result is pushed onto a screen before its own prediction is committed
        if pace is not None and pace.pushed and pace.version != shown["pushed"]:
            shown["pushed"] = pace.version  # each push once; a student may move the controls again after
            if pushes.show(pace.pushed):
                gate.show_message(f'<p class="bt-notice bt-pushed" role="status">{escape(pushes.shown_note)}</p>')
        elif (pace is None or not pace.pushed) and pushes.give_back():
            gate.show_message(f'<p class="bt-notice bt-pushed-ended" role="status">{escape(pushes.ended_note)}</p>')

    def poll() -> None:  # no database work here: the store thread keeps what this reads up to date
        follow_pace()
        recorder.refresh_notice()
        if prediction.saving and recorder.notice.visible:  # the store hangs: say so in the gate too
            prediction.wait_for_store()
        if prediction.committed:
            answers = recorder.class_answers_html(question, prediction.choices, prediction.choice)
            if answers != shown["answers"]:  # revealed, changed, or gone after an archive
                shown["answers"] = answers
                gate.show_message(answers)

    follow_pace()  # a class already held: locked from the first frame
    explorable._class_poll = poll  # held by the page: the periodic callback calls it weakly
    periodically(poll, settings().reveal_poll_ms)


def put_back(explorable: Any, event: Any, fixed: frozenset[str] = frozenset()) -> None:
    """One stored event of an explorable back on a new page of it: a control's value (once its prediction
    is committed; not the parameters in `fixed`), or what the explorable resumes itself (experiments seen,
    claims, checkpoints)."""
    if event.kind == "param":
        name = str(event.payload["name"])
        if explorable.gate.prediction.unlocked and name not in fixed:
            explorable.state.param.update(**{name: event.payload["value"]})
        return
    race = getattr(explorable, "_class_race", None)
    if event.kind == RACE and race is not None:
        race.put_back(event.payload)  # the server's hold on the race predicted for wins over the address
        return
    resume = getattr(explorable, "resume", None)
    if resume is not None:
        resume(event.kind, event.payload)


def restore_explorable(explorable: Any, explorable_id: str, recorder: SessionRecorder,
                       query: Mapping[str, str]) -> None:
    """On an explorable's own page, put back what this learner did with it before (here or in its lesson).

    Runs after the prediction's restore (attach_explorable): the store thread answers in order, so the
    gate is open by the time the controls come back. A state the link itself names stays as the link says.
    """
    if not recorder.active:
        return
    keys = EXPLORABLE_SPECS[explorable_id].query_keys()
    fixed = frozenset(keys[k].param for k in query if k in keys)

    def found(events: list) -> None:
        newest = newest_per_slot([e for e in events if e.explorable == explorable_id])
        recorder.remember(newest)
        for event in newest:
            try:
                put_back(explorable, event, fixed)
            except (ValueError, TypeError, KeyError, IndexError) as error:  # a stored value the page refuses
                log.info("not resumed: a %s event (%s)", event.kind, type(error).__name__)

    recorder.restore_events(found)


def class_line(code: str, refused: str | None = None) -> str:
    """Which class this page records into, and the way to another (the index's class field).

    `refused`: the code this page's link named, which put the learner into no class (the index says why)."""
    note = ""
    if refused is not None:
        href = "/?" + urlencode({"class": refused[:60]}) + "#join"
        note = (f'<p class="bt-field-error" role="alert">This link\'s class “{escape(refused[:60])}” is not open '
                f'on this server. <a class="bt-link" href="{escape(href)}">Check the code</a></p>')
    if code == DEFAULT_CLASS:
        return note + ('<p class="bt-muted">No class · your work is saved on your teacher\'s server · '
                       '<a class="bt-link" href="/#join">join your class</a></p>')
    return note + (f'<p class="bt-muted">Class <strong class="bt-code">{escape(code)}</strong> · your work is saved '
                   'on your teacher\'s server · <a class="bt-link" href="/#join">change class</a></p>')


def learner_bar(recorder: SessionRecorder, class_shown: bool = True) -> pn.viewable.Viewable | None:
    """"Your name (optional)", showing the name saved before, and the class code (unless `class_shown` is False: the
    index says it above), for pages in a classroom."""
    if not recorder.active:
        return recorder.notice if recorder.notice.visible else None
    learner: Learner = recorder.learner
    name = pn.widgets.TextInput(label="Your name (optional)", max_length=40, placeholder="Shown to your teacher",
                                width=220)
    save = pn.widgets.Button(label="Save name")
    readable([name])
    message = LiveHTML("", **styled())

    stored_name: list[str] = []  # the name the store has confirmed, once it has

    def show(html_text: str) -> None:
        message.object = html_text

    def known(value: str | None) -> None:  # the name the store holds, read when the page joined the class
        if value and not stored_name:
            stored_name[:] = [value]
            if not name.value:  # not over what the learner has begun to type meanwhile
                name.value = value

    recorder.on_name = known

    def finished(value: str, ok: bool) -> None:
        if ok:
            stored_name[:] = [value]
        show('<span class="bt-ok" role="status">Saved.</span>' if ok else
             '<span class="bt-field-error" role="alert">Not saved yet: the class database cannot be reached.</span>')

    def saved(_event) -> None:
        value = clean_display_name(name.value or "") or ""
        if stored_name and value == stored_name[0]:
            show('<span class="bt-ok" role="status">Saved.</span>')  # unchanged, and already stored
            return
        error = recorder.join(name.value, done=lambda ok: finished(value, ok))
        show(f'<span class="bt-field-error" role="alert">{escape(error)}</span>' if error
             else '<span class="bt-muted" role="status">Saving…</span>')  # "Saved." only once the store has it

    save.on_click(saved)
    info = [LiveHTML(class_line(learner.class_code, learner.refused), **styled())] if class_shown else []
    return pn.FlexBox(*info, name, save, message, recorder.notice, flex_wrap="wrap", align_items="end",
                      sizing_mode="stretch_width", css_classes=["bt-learner-bar"],
                      stylesheets=[READABLE_CONTROLS])  # its own root on an explorable's page
