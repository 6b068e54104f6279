"""The teacher's pacing, as each student's session applies it: a hold at a step, and a state pushed to every screen.

The store thread keeps a copy of every class's paces (store.current_paces); sessions read that copy on their
poll, so pacing a class of 100 costs no database read per student. Everything is decided here, on the server:
a held step's content is not in the page, and a pushed state is applied only where the student's own
prediction already unlocked the controls (it never shows a result before the commit).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from blocktrace.app.classroom.store import STEPS, Pace
from blocktrace.app.server.registry import EXPLORABLE_SPECS

HOLDABLE = ("predict", "experiment", "implement")  # holding at the last step would hold nothing
PUSH_NOTE = "Your teacher set these controls for the whole class to look at."


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


def apply_pushed(state: Any, explorable: str, pushed: Mapping[str, Any]) -> bool:
    """Set the pushed controls on one student's state; False when the push is for another explorable."""
    if pushed.get("explorable") != explorable or not isinstance(pushed.get("state"), dict):
        return False
    keys = EXPLORABLE_SPECS[explorable].query_keys()
    values = {}
    for key, text in pushed["state"].items():
        if key in keys:
            try:
                values[keys[key].param] = keys[key].read(str(text))
            except (ValueError, TypeError):
                continue
    if values:
        state.param.update(**values)
    return bool(values)


def pace_of(paces: Mapping[tuple[str, str], Pace], class_code: str, lesson: str | None) -> Pace | None:
    return paces.get((class_code, lesson)) if lesson else None
