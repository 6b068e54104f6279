"""Predict first: a question answered and committed before the controls unlock; final once committed.

In a classroom a commit is final only once the class store has durably written it: between the
press and the store's answer the gate says "Saving your prediction…", its form stays locked, and
the experiment stays locked too (`unlocked` is False), so a server that dies meanwhile never leaves
a student who saw "final" without a stored answer.
"""

from __future__ import annotations

from collections.abc import Callable
from html import escape

import panel as pn
import param

from blocktrace.explorables.components.page_layout import READABLE_CONTROLS, readable
from blocktrace.explorables.components.style import WRAPPING_CHOICES, styled
from blocktrace.explorables.components.updates import LiveHTML

__all__ = [
    "CHOICES_CLASS", "GATE_EVENTS", "NOT_SAVED", "SAVING", "SAVING_DELAYED", "Prediction", "PredictionGate",
    "unanswered",
]

MAX_NOTE = 500
CHOICES_CLASS = "bt-choices"  # the gate's radio group: the class tests and benchmarks find it by
SAVING = "Saving your prediction…"
SAVING_DELAYED = "Not saved yet: the class database cannot be reached; retrying. Your answer:"
SAVING_HINT = "The controls unlock once your teacher's server has saved it."


HELD_NOTE = ("Your teacher is holding the class at the prediction step: the controls unlock when they release "
             "it. Meanwhile, think about why you chose your answer.")
NOT_SAVED = "Your prediction (not saved: this page is not recording, reload it in a minute):"
GATE_EVENTS = ["committed", "skipped", "held"]  # the parameters `unlocked` follows: watch these


class Prediction(param.Parameterized):
    """A prediction (or bet): a short choice plus optional free text, committed once."""

    choice = param.Selector(default=None, objects=[], allow_None=True, doc="The answer picked.")
    note = param.String(default="", doc="Optional words on why.")
    committed = param.Boolean(default=False, doc="True once final (in a classroom: stored); nothing changes after.")
    saving = param.Boolean(default=False, doc="True from Commit until the store has the answer: locked, not final.")
    delayed = param.Boolean(default=False, doc="While saving: the store did not take it yet (it is retried).")
    skipped = param.Boolean(default=False, doc="True when the gate is switched off (?predict=off).")
    held = param.Boolean(default=False, doc="True while the teacher holds the class at the prediction step: "
                                            "committed or not, the experiment stays locked.")

    def __init__(self, choices: dict[str, str], **params):
        super().__init__(**params)
        self.choices = choices
        self.param.choice.objects = list(choices)
        self.needs_store = False  # set by the classroom: then a commit is final only once stored
        self.unsaved = False  # set by the classroom when this page records nothing: a commit is never called final

    @property
    def unlocked(self) -> bool:
        """The experiment may be shown: the prediction is final (durably stored in a classroom), or skipped,
        and the teacher is not holding the class at the prediction step."""
        return (self.committed or self.skipped) and not self.held

    def commit(self, choice: str | None, note: str = "") -> str | None:
        """Commit once; return an error message instead when it cannot be committed.

        Without a store the commit is final at once; with one it is saving until `settle`.
        """
        if self.committed:
            return "Your prediction is already committed and cannot be changed."
        if self.saving:
            return "Your prediction is being saved and cannot be changed."
        if choice not in self.choices:
            return "Pick one of the answers before committing."
        final = not self.needs_store
        self.param.update(choice=choice, note=note.strip()[:MAX_NOTE], committed=final, saving=not final,
                          delayed=False)
        return None

    def settle(self, choice: str, note: str | None) -> None:
        """The store has this answer (the one committed, or one stored earlier): it is final now."""
        if choice not in self.choices:
            return
        self.param.update(choice=choice, note=note or "", committed=True, saving=False, delayed=False)

    def wait_for_store(self) -> None:
        """The store did not take the answer yet: still saving (and retried), never final."""
        if self.saving:
            self.delayed = True

    def reopen(self) -> None:
        """The store refused the commit and holds no answer: the student may commit again."""
        if self.saving:
            self.param.update(saving=False, delayed=False)


def unanswered(group: pn.widgets.RadioBoxGroup) -> pn.widgets.RadioBoxGroup:
    """The group with no option chosen: Panel picks the first option of a new group, Bokeh's own group
    (`active` None) shows none. Tab still enters the group and the arrow keys choose, as in any radio group."""
    group.value = None
    return group


class PredictionGate(pn.viewable.Viewer):
    """The question, its answers, a note box and a Commit button; then the committed answer, read-only."""

    def __init__(
        self,
        prediction: Prediction,
        question: str,
        hint: str = "",
        commit_label: str = "Commit prediction",
        on_commit: Callable[[Prediction], None] | None = None,
        heading: str = "Predict first",
    ):
        super().__init__()
        self.prediction = prediction
        self.on_commit = on_commit  # the page may set it later, e.g. to store the commit on the server
        self._commit_label = commit_label
        labels = {label: key for key, label in prediction.choices.items()}
        self._labels = labels
        self._choice = unanswered(pn.widgets.RadioBoxGroup(options=list(labels), inline=False,
                                                           stylesheets=[WRAPPING_CHOICES],
                                                           sizing_mode="stretch_width",
                                                           label="Your answer", css_classes=[CHOICES_CLASS]))
        self._note = pn.widgets.TextAreaInput(label="Why? (optional)", max_length=MAX_NOTE, rows=2,
                                              placeholder="A sentence on your reasoning", sizing_mode="stretch_width")
        self._button = pn.widgets.Button(label=commit_label, color="primary")
        readable([self._choice, self._note])
        self._message = LiveHTML("", css_classes=["bt-field-error"])
        self._button.on_click(self._commit)
        self._extra = ""
        self._summary = LiveHTML(self._summary_html(), **styled(sizing_mode="stretch_width"))  # the class's bars
        self._form = pn.Column(self._choice, self._note, pn.Row(self._button, self._message))
        self._layout = pn.Column(
            LiveHTML(f'<h2 class="bt-h2">{escape(heading)}</h2><p class="bt-question">{escape(question)}</p>'
                         + (f'<p class="bt-hint">{escape(hint)}</p>' if hint else ""),
                         sizing_mode="stretch_width"),
            self._form,
            self._summary,
            css_classes=["bt-card", "bt-predict"],
            sizing_mode="stretch_width", stylesheets=[READABLE_CONTROLS],  # placed alone on a lesson page too
        )
        self._sync()
        prediction.param.watch(lambda *_: self._sync(), ["committed", "saving", "delayed", "skipped", "held"])

    def _commit(self, _event=None) -> None:
        key = self._labels.get(self._choice.value)
        error = self.prediction.commit(key, self._note.value or "")
        self.show_error(error or "")
        if error is None and self.on_commit is not None:
            self.on_commit(self.prediction)

    def show_error(self, text: str) -> None:
        """A short message beside the Commit button (plain text), e.g. when the store refused a commit."""
        self._message.object = f'<span role="alert">{escape(text)}</span>' if text else ""

    def show_message(self, html_text: str) -> None:
        """A note under the committed answer (already escaped by the caller), e.g. the class's answers."""
        self._extra = html_text
        self._summary.object = self._summary_html()

    def _summary_html(self) -> str:
        p = self.prediction
        if p.skipped and not p.committed:
            return '<p class="bt-muted">The prediction step is switched off for this page.</p>'
        note = f'<br><span class="bt-muted">Your reasoning: {escape(p.note)}</span>' if p.note else ""
        if p.saving:
            status = SAVING_DELAYED if p.delayed else SAVING
            return (f'<p class="bt-saving" role="status" aria-live="polite"><strong>{escape(status)}</strong> '
                    f'{escape(p.choices[p.choice])}{note}</p>'
                    f'<p class="bt-muted">{escape(SAVING_HINT)}</p>{self._extra}')
        if not p.committed:  # a note before the commit: a race set up by the teacher (app/classroom/race.py)
            return f'<p class="bt-muted" aria-live="polite">The controls unlock once you commit.</p>{self._extra}'
        held = (f'<p class="bt-notice bt-held" role="status">{escape(HELD_NOTE)}</p>' if p.held else "")
        said = NOT_SAVED if p.unsaved else "Your prediction (final):"
        return (f'<p class="bt-committed" aria-live="polite"><strong>{escape(said)}</strong> '
                f'{escape(p.choices[p.choice])}{note}</p>{held}{self._extra}')

    def _sync(self) -> None:
        p = self.prediction
        self._form.visible = not p.committed and not p.saving and not p.skipped
        self._summary.object = self._summary_html()
        self._layout.visible = not (p.skipped and not p.committed)

    def __panel__(self):
        return self._layout
