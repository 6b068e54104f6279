"""A multiple-choice checkpoint: pick an answer, check it, read feedback written for that answer."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

import panel as pn
import param

from blocktrace.explorables.components.page_layout import READABLE_CONTROLS
from blocktrace.explorables.components.prediction import unanswered
from blocktrace.explorables.components.style import WRAPPING_CHOICES, styled
from blocktrace.explorables.components.updates import LiveHTML

__all__ = ["Checkpoint", "CheckpointView", "Option"]


@dataclass(frozen=True)
class Option:
    label: str
    correct: bool
    feedback: str


class Checkpoint(param.Parameterized):
    """The answer state of one question."""

    answer = param.Integer(default=None, allow_None=True, doc="Index of the option checked last.")
    attempts = param.Integer(default=0, doc="How many times an answer was checked.")

    def __init__(self, qid: str, question: str, options: Sequence[Option], **params):
        super().__init__(**params)
        self.qid, self.question, self.options = qid, question, list(options)

    def check(self, index: int | None) -> str:
        """Record an answer and return its feedback (or what to do first)."""
        if index is None:
            return "Pick an answer first."
        self.param.update(answer=index, attempts=self.attempts + 1)
        return self.feedback(index)

    def feedback(self, index: int) -> str:
        option = self.options[index]
        return ("Right. " if option.correct else "Not quite. ") + option.feedback

    @property
    def correct(self) -> bool | None:
        return None if self.answer is None else self.options[self.answer].correct


class CheckpointView(pn.viewable.Viewer):
    def __init__(self, checkpoint: Checkpoint, on_check: Callable[[Checkpoint], None] | None = None):
        super().__init__()
        self.checkpoint = checkpoint
        self._on_check = on_check
        self._labels = {o.label: i for i, o in enumerate(checkpoint.options)}
        self.choice = unanswered(pn.widgets.RadioBoxGroup(options=list(self._labels), inline=False,
                                                          stylesheets=[WRAPPING_CHOICES],
                                                          sizing_mode="stretch_width",
                                                          label=checkpoint.question))
        self.button = pn.widgets.Button(label="Check answer", color="primary")
        self.feedback = LiveHTML("", **styled(sizing_mode="stretch_width"))
        self.button.on_click(self._check)

    def _check(self, _event=None) -> None:
        index = self._labels.get(self.choice.value)  # None: nothing chosen yet
        text = self.checkpoint.check(index)
        self._show(text, self.checkpoint.correct if index is not None else None)
        if self._on_check is not None and index is not None:
            self._on_check(self.checkpoint)

    def _show(self, text: str, ok: bool | None) -> None:
        cls = "bt-ok" if ok else "bt-bad" if ok is False else "bt-muted"
        self.feedback.object = f'<p class="{cls}" role="status" aria-live="polite">{escape(text)}</p>'

    def restore(self, index: int) -> None:
        """Show an answer checked in an earlier visit, and its feedback, without reporting it again."""
        option = self.checkpoint.options[index]  # IndexError for an answer this question does not have
        if index < 0:
            raise IndexError(index)
        self.checkpoint.param.update(answer=index, attempts=max(self.checkpoint.attempts, 1))
        self.choice.value = option.label
        self._show(self.checkpoint.feedback(index), option.correct)

    def __panel__(self):
        return pn.Column(
            LiveHTML(f'<h3 class="bt-h3">Checkpoint</h3><p class="bt-question">{escape(self.checkpoint.question)}'
                         "</p>", **styled(sizing_mode="stretch_width")),
            self.choice, self.button, self.feedback,
            css_classes=["bt-card"], sizing_mode="stretch_width", stylesheets=[READABLE_CONTROLS],
        )
