"""The in-page exercise on a lesson page: for each function, its `def` line and docstring, one select per line of
its body, and the server's word on it after "Check my lines".

The selects offer each line's text (in_page.Part.offered); which lines are right stays in in_page.py, on the
server. A check is refused while the teacher holds the class before the exercise, and comes at most once every
`in_page_gap` seconds per learner and exercise (a table every worker process shares, made before they fork).
The lines chosen stay as they are after a check, and once every part is right they are fixed there.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from html import escape
from typing import Any

import panel as pn
import param

from blocktrace.app.exercises.in_page import InPage, check, result_payload
from blocktrace.app.server.rate_limits import TokenBuckets
from blocktrace.app.settings import settings
from blocktrace.explorables.components.page_layout import readable
from blocktrace.explorables.components.style import styled
from blocktrace.explorables.components.updates import LiveHTML

__all__ = ["InPageState", "InPageView", "Place", "share_check_limits"]

log = logging.getLogger(__name__)

EMPTY = "— choose a line —"
CODE_SELECT = '.bk-input { font-family: ui-monospace, "DejaVu Sans Mono", monospace; }'  # the lines read as code

_checks: TokenBuckets | None = None


def share_check_limits() -> TokenBuckets:
    """The table of checks per learner and exercise; `blocktrace serve` makes it before forking its workers
    (exercise_patterns), so all of them count one learner's checks together."""
    global _checks
    if _checks is None:
        _checks = TokenBuckets(capacity=1, per_second=1 / settings().in_page_gap)
    return _checks


class Place(param.Parameterized):
    """One place of a function's body: the line the student put there."""

    line = param.Selector(default="", objects=[""],
                          doc="The text of the line chosen for this place (empty: none yet); one of the part's lines.")


class InPageState(param.Parameterized):
    """What this learner has done with the in-page exercise."""

    attempts = param.Integer(default=0, bounds=(0, None), doc="Checks made (in this and earlier visits).")
    passed = param.Boolean(default=False, doc="A check found every part right: the lines stay as they are.")


def _feedback_html(right: bool | None, hint: str = "") -> str:
    if right is None:
        return ""
    if right:
        return '<p class="bt-ok" role="status">✓ Right.</p>'
    return f'<p class="bt-in-page-hint" role="status"><span class="bt-bad">✗ Not yet.</span> {escape(hint)}</p>'


class InPageView(pn.viewable.Viewer):
    """One session's in-page exercise.

    `record(payload, saved)` stores a check's result and calls `saved()` once the store has it (None: nothing is
    stored); `on_result(payload)` then tells the page. `is_open()` is False while the teacher holds the class
    before the exercise. `limit_key` names the learner and exercise whose checks are counted together."""

    def __init__(self, exercise_id: str, exercise: InPage, limit_key: str,
                 record: Callable[[dict[str, Any], Callable[[], None]], None] | None,
                 on_result: Callable[[dict[str, Any]], None], is_open: Callable[[], bool] = lambda: True):
        super().__init__()
        self.exercise_id, self.exercise, self.limit_key = exercise_id, exercise, limit_key
        self._record, self._on_result, self._is_open = record, on_result, is_open
        self.state = InPageState()
        self.checks = share_check_limits()  # a test may give its own table
        self.places: dict[str, list[Place]] = {}
        self.selects: list[pn.widgets.Select] = []
        self.feedback: dict[str, LiveHTML] = {}
        for part in exercise.parts:
            places = []
            for _ in part.lines:
                place = Place()
                place.param.line.objects = {EMPTY: "", **{code: code for code in part.offered}}
                places.append(place)
            self.places[part.function] = places
            self.feedback[part.function] = LiveHTML("", **styled(sizing_mode="stretch_width"))
        self.button = pn.widgets.Button(label="Check my lines", color="primary")
        self.button.on_click(self._check)
        self.status = LiveHTML("", **styled(sizing_mode="stretch_width"))
        self._layout = self._build()

    def arrangement(self) -> dict[str, list[str | None]]:
        return {name: [place.line or None for place in places] for name, places in self.places.items()}

    def _check(self, _event=None) -> None:
        if self.state.passed or not self._is_open():
            return
        wait = self.checks.wait(self.limit_key)
        if wait > 0:
            self._say("bt-bad", f"Wait {math.ceil(wait)} s before you check again (one check every "
                                f"{1 / self.checks.per_second:g} s). Your lines are kept.")
            return
        arrangement = self.arrangement()
        try:
            verdict = check(self.exercise, arrangement)
        except ValueError as error:  # not an arrangement of the lines offered: the page never sends one
            log.info("an in-page check refused: %s", error)
            self._say("bt-bad", "These lines cannot be checked. Reload the page and choose them again.")
            return
        self.state.attempts += 1
        self._show(verdict)
        payload = result_payload(self.exercise_id, verdict, arrangement, self.state.attempts)
        if self._record is None:  # nothing stored: the verdict is all there is to say
            self._say("bt-ok" if verdict.passed else "bt-muted", "Every function is right." if verdict.passed else
                      f"{verdict.right} of {len(verdict.parts)} functions right. Read the hint under each one "
                      "that is not.")
            self._on_result(payload)
            return
        self._say("bt-muted", "Saving…")

        def saved() -> None:  # the page's result line says it, once the store has it
            self.status.object = ""
            self._on_result(payload)

        self._record(payload, saved)

    def _show(self, verdict) -> None:
        for part in verdict.parts:
            self.feedback[part.function].object = _feedback_html(part.right, part.hint)
        if verdict.passed:
            self.state.passed = True
            for select in self.selects:
                select.disabled = True
            self.button.disabled = True

    def _say(self, css: str, text: str) -> None:
        self.status.object = f'<p class="{css} bt-in-page-status" role="status">{escape(text)}</p>'

    def restore(self, payload: dict[str, Any]) -> None:
        """Put back the lines of a check stored in an earlier visit, and what the server said of them (not counted
        as a check, not stored again). A payload whose lines this page no longer offers puts nothing back."""
        arrangement = payload.get("arrangement")
        if not isinstance(arrangement, dict):
            return
        verdict = check(self.exercise, arrangement)  # ValueError for lines no longer offered: the caller skips it
        for name, places in self.places.items():
            for place, line in zip(places, arrangement[name], strict=True):
                place.line = line or ""
        attempts = payload.get("attempts")
        self.state.attempts = max(self.state.attempts, attempts if isinstance(attempts, int) and attempts > 0 else 1)
        self._show(verdict)

    def _build(self) -> pn.Column:
        parts: list[Any] = [LiveHTML(f'<h3 class="bt-h3">No Python? Do it here, in the page</h3>'
                                     f"<p>{escape(self.exercise.intro)}</p>", **styled(sizing_mode="stretch_width"))]
        for part in self.exercise.parts:
            parts.append(LiveHTML(f'<pre class="bt-command bt-in-page-head"><code>{escape(part.head)}</code></pre>',
                                  **styled(sizing_mode="stretch_width")))
            for i, place in enumerate(self.places[part.function], start=1):
                select = pn.widgets.Select.from_param(place.param.line, name=f"{part.function}, line {i}",
                                                      description=None, sizing_mode="stretch_width")
                readable([select])
                select.stylesheets = [*select.stylesheets, CODE_SELECT]
                self.selects.append(select)
                parts.append(select)
            parts.append(self.feedback[part.function])
        return pn.Column(*parts, self.button, self.status, css_classes=["bt-in-page"], sizing_mode="stretch_width")

    def __panel__(self) -> pn.viewable.Viewable:
        return self._layout
