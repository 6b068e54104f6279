"""Explorable state in the query string: read it with validation, write it back on every change."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import panel as pn
from panel.io.document import unlocked

from blocktrace.explorables.components.weak_callbacks import weakly

__all__ = ["WRITES", "QueryKey", "Writes", "apply_query", "read_choice", "read_int", "read_number", "read_on_off",
           "session_query", "sync_to_url", "write_number", "write_on_off"]


@dataclass(frozen=True)
class QueryKey:
    """One query-string key: how to read it onto the state and write it back."""

    param: str  # the state parameter it sets
    read: Callable[[str], Any]  # raises ValueError on an invalid value
    write: Callable[[Any], str] = str


def session_query() -> dict[str, str]:
    """The current session's query arguments (last value of each), or {} outside a server."""
    args = pn.state.session_args or {}
    out = {}
    for key, values in args.items():
        if values:
            raw = values[-1]
            out[key] = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
    return out


def apply_query(state: Any, keys: Mapping[str, QueryKey], query: Mapping[str, str]) -> list[str]:
    """Set the state from the query; return a notice for each value that was refused."""
    notices = []
    for name, spec in keys.items():
        if name not in query:
            continue
        try:
            setattr(state, spec.param, spec.read(query[name]))
        except (ValueError, TypeError):
            shown = query[name] if len(query[name]) <= 40 else query[name][:40] + "…"
            notices.append(f"The link's value {shown!r} for “{name}” could not be used; the default is shown instead.")
    return notices


@dataclass
class Writes:
    """When the address follows a change; the server sets it from its settings (app/server/routes.configure), as
    this package never imports the app."""

    delay_ms: int = 500
    clock: Callable[[], float] = time.monotonic  # seconds; a test steps its own


WRITES = Writes()


def sync_to_url(state: Any, keys: Mapping[str, QueryKey], delay_ms: int | None = None) -> None:
    """Keep the browser's query string in step with the state (server sessions only).

    In a served session the address is written once a burst of changes has ended: `delay_ms` (WRITES.delay_ms:
    the server's `url_write_ms` setting) after the last change. Writing it with every step of a slider was a
    tenth of the server's work per change; a write `delay_ms` after the first change of a burst still wrote
    twice in a burst of three changes 0.4 s apart.
    """
    location = pn.state.location
    if location is None or "bokeh-autoload-element" in (pn.state.session_args or {}):
        return  # no server, or a script-tag embed, whose location is the host page's: leave it alone
    doc = pn.state.curdoc
    delay_ms = WRITES.delay_ms if delay_ms is None else delay_ms
    clock = WRITES.clock
    timer = {"armed": False, "last": 0.0}  # one timeout waits at a time; `last`: when the newest change came

    def written() -> dict[str, str]:
        return {name: spec.write(getattr(state, spec.param)) for name, spec in keys.items()}

    def write() -> None:
        with unlocked():  # may run from a key-press event, outside Bokeh's document lock (see updates.py)
            location.update_query(**written())

    def arm(ms: float) -> None:
        try:
            doc.add_timeout_callback(weakly(due), max(1, round(ms)))  # `update`, held by the watcher, holds `due`
            timer["armed"] = True
        except (RuntimeError, AttributeError):  # the page is being taken apart
            timer["armed"] = False

    def due() -> None:
        quiet_ms = (clock() - timer["last"]) * 1000
        if quiet_ms < delay_ms:
            arm(delay_ms - quiet_ms)  # changed meanwhile: wait until the burst has been quiet for delay_ms
            return
        timer["armed"] = False
        write()

    def update(*_: Any) -> None:
        if delay_ms <= 0 or doc is None or doc.session_context is None:
            write()
            return
        timer["last"] = clock()
        if not timer["armed"]:
            arm(delay_ms)

    state.param.watch(update, sorted({spec.param for spec in keys.values()}))
    # An update made before the browser connected (work put back from the store while the page was being
    # built) is in the server's copy of the address but not in the browser's: send it once the page is up.
    built = written()

    def loaded() -> None:
        if written() != built:
            update()
            with unlocked():
                location.param.trigger("search")

    pn.state.onload(loaded)


def read_choice(*choices: str) -> Callable[[str], str]:
    def read(text: str) -> str:
        if text not in choices:
            raise ValueError(text)
        return text
    return read


def read_number(low: float, high: float) -> Callable[[str], float]:
    def read(text: str) -> float:
        value = float(text)
        if not low <= value <= high:  # also refuses NaN
            raise ValueError(text)
        return value
    return read


def read_int(low: int, high: int) -> Callable[[str], int]:
    def read(text: str) -> int:
        value = int(text)
        if not low <= value <= high:
            raise ValueError(text)
        return value
    return read


def read_on_off(text: str) -> bool:
    if text in ("on", "1", "true"):
        return True
    if text in ("off", "0", "false"):
        return False
    raise ValueError(text)


def write_on_off(value: bool) -> str:
    return "on" if value else "off"


def write_number(value: float) -> str:
    return f"{value:g}"
