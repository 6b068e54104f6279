"""The teacher's pacing, as each student's session applies it: a hold at a step, and a state pushed to every screen.

The store thread keeps a copy of every class's paces (store.current_paces); sessions read that copy on their
poll, so pacing a class of 100 costs no database read per student. Everything is decided here, on the server:
a held step's content is not in the page, and a pushed state is applied only where the student's own
prediction already unlocked the controls (it never shows a result before the commit). A race's set-up is no
result (the race runs only after the commit): app/classroom/race.py pushes it before the commit too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from blocktrace.app.classroom.store import STEPS, Pace
from blocktrace.app.server.registry import EXPLORABLE_SPECS

__all__ = ["HOLDABLE", "PUSH_ENDED", "PUSH_NOTE", "PushedView", "closed_steps", "pace_of", "read_pushed_state"]

HOLDABLE = ("predict", "experiment", "implement")  # holding at the last step would hold nothing
PUSH_NOTE = "Your teacher set these controls for the whole class to look at."
PUSH_ENDED = "Your teacher stopped showing their settings: your own are back."


def closed_steps(hold: str | None) -> set[str]:
    """The steps a class held at `hold` may not open yet."""
    if hold not in STEPS:
        return set()
    return set(STEPS[STEPS.index(hold) + 1:])


def read_pushed_state(explorable: str, text: str) -> dict[str, str]:
    """The explorable's state keys from a link or a query string the teacher pasted; ValueError saying why not."""
    keys = EXPLORABLE_SPECS[explorable].query_keys()
    query = urlsplit(text.strip()).query if "?" in text or "://" in text else text.strip().lstrip("?")
    found: dict[str, str] = {}
    for key, value in parse_qsl(query, keep_blank_values=True):
        if key not in keys:
            continue  # embed, predict, class, theme, …: not part of what the class should look at
        try:
            keys[key].read(value)
        except (ValueError, TypeError):
            raise ValueError(f"{key}={value!r} is not a value this explorable accepts") from None
        found[key] = value
    if not found:
        raise ValueError("no control of this explorable is set there; paste a link from the explorable, e.g. "
                         "one copied from its address bar, or keys such as attention_scale=0&residual=replace")
    return found


def pushed_values(explorable: str, pushed: Mapping[str, Any] | None) -> dict[str, Any]:
    """The state parameters a push sets on this explorable, read as its controls read a link ({}: none)."""
    if not pushed or pushed.get("explorable") != explorable or not isinstance(pushed.get("state"), dict):
        return {}
    keys = EXPLORABLE_SPECS[explorable].query_keys()
    values = {}
    for key, text in pushed["state"].items():
        if key in keys:
            try:
                values[keys[key].param] = keys[key].read(str(text))
            except (ValueError, TypeError):
                continue
    return values


class PushedView:
    """One student's screen under the teacher's pushes: each push sets the controls it names, and when the
    teacher stops showing, the student's own settings come back (each control the student has not moved
    since the push)."""

    before_commit = False  # True: a push sets the controls before the student's prediction is committed too

    def __init__(self, state: Any, explorable: str) -> None:
        self.state, self.explorable = state, explorable
        self.own: dict[str, Any] = {}  # the student's values from before the first push now on screen
        self.set: dict[str, Any] = {}  # what the pushes set
        self.shown_note, self.ended_note = PUSH_NOTE, PUSH_ENDED  # what the student is told of a push, and its end

    @property
    def showing(self) -> bool:
        return bool(self.set)

    def show(self, pushed: Mapping[str, Any]) -> bool:
        """Apply a push; False when it sets nothing here."""
        values = pushed_values(self.explorable, pushed)
        if not values:
            return False
        for name in values:
            self.own.setdefault(name, getattr(self.state, name))
        self.set.update(values)
        self._apply(values)
        return True

    def _apply(self, values: dict[str, Any]) -> None:
        self.state.param.update(**values)

    def give_back(self) -> bool:
        """The teacher stopped showing: put back the student's own values; False when nothing was shown."""
        if not self.set:
            return False
        back = {name: value for name, value in self.own.items() if getattr(self.state, name) == self.set[name]}
        self.own, self.set = {}, {}
        if back:
            self.state.param.update(**back)
        return True


def pace_of(paces: Mapping[tuple[str, str], Pace], class_code: str, lesson: str | None) -> Pace | None:
    return paces.get((class_code, lesson)) if lesson else None
