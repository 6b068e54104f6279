"""Whether a page opens with the predict-first gate: on, unless the teacher's signed link says off.

`?predict=off` alone is something any student can type, so the server ignores it (the gate shows, with a
short note). A link from the teacher's page carries `predict_until` (when it stops working, in Unix
seconds) and `predict_sig`, the explorable's route and that time signed with the server's secret
(app/signing.py, PREDICT_OFF): it switches the gate off for that explorable only, until then. A link for
a demonstration works for DEMO_HOURS, so one passed round the class is spent by the next lesson; the embed
snippet for a course's own page (whose readers all have it anyway) for EMBED_DAYS. The signature does not
cover the rest of the query, on purpose: with the gate off every control is unlocked anyway, and the page
rewrites its query as the controls change (url_state.sync_to_url, which keeps these two), so a reload keeps working.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import urlencode

from blocktrace.app import signing
from blocktrace.app.classroom import learner as learners
from blocktrace.app.classroom.rendering import render

SIGNATURE_KEY = "predict_sig"
UNTIL_KEY = "predict_until"
DEMO_HOURS = 12
EMBED_DAYS = 365
LONGEST_S = (EMBED_DAYS + 1) * 86400  # a link said to last longer than any this server makes is refused
UNSIGNED_NOTICE = ("This link asks to skip the prediction step, which only a link from the teacher's page can "
                   "do: predict first, then the controls unlock.")
EXPIRED_NOTICE = ("This link from the teacher's page has expired, so the prediction step is back: predict first, "
                  "then the controls unlock (or ask your teacher for today's link).")


def _signed_text(route: str, until: int) -> str:
    return f"{route} {until}"


def signature(route: str, secret: bytes, until: int, now: Callable[[], float] = time.time) -> str:
    """The `predict_sig` value that switches the gate off on `route` (e.g. /explorables/block-floor) until
    `until` (Unix seconds)."""
    return signing.sign(secret, signing.PREDICT_OFF, _signed_text(route, until), clock=now)


def teacher_arguments(route: str, secret: bytes, valid_s: float = DEMO_HOURS * 3600,
                      now: Callable[[], float] = time.time) -> dict[str, str]:
    """The query arguments of a teacher's link without the prediction step, working for `valid_s`."""
    until = int(now() + valid_s)
    return {"predict": "off", UNTIL_KEY: str(until), SIGNATURE_KEY: signature(route, secret, until, now)}


def link_state(route: str, query: Mapping[str, str], secret: bytes | None,
               now: Callable[[], float] = time.time) -> str:
    """"valid", "expired" (signed by this server, past its time) or "unsigned" (anything else)."""
    if secret is None or query.get("predict") != "off":
        return "unsigned"
    text = query.get(UNTIL_KEY, "")
    if not (text.isascii() and text.isdigit() and len(text) <= 12):
        return "unsigned"
    until = int(text)
    if signing.unsign(secret, signing.PREDICT_OFF, query.get(SIGNATURE_KEY), clock=now) != _signed_text(route, until):
        return "unsigned"
    moment = now()
    return "valid" if moment < until <= moment + LONGEST_S else "expired"


def signed_off(route: str, query: Mapping[str, str], secret: bytes | None,
               now: Callable[[], float] = time.time) -> bool:
    """True when the query asks for predict=off with this server's signature for this route, still valid."""
    return link_state(route, query, secret, now) == "valid"


def server_secret() -> bytes | None:
    """The classroom's secret; None without a classroom (then no link can switch the gate off)."""
    classroom = learners.current()
    return classroom.secret if classroom is not None else None


@dataclass(frozen=True)
class GateDecision:
    predict: bool  # show the gate
    notices: list[str]  # for the page, e.g. why a typed predict=off was ignored


def decide(route: str, query: Mapping[str, str]) -> GateDecision:
    """The gate for a page request: off only for the teacher's signed link."""
    if query.get("predict") != "off":
        return GateDecision(True, [])
    state = link_state(route, query, server_secret())
    if state == "valid":
        return GateDecision(False, [])
    return GateDecision(True, [EXPIRED_NOTICE if state == "expired" else UNSIGNED_NOTICE])


def teacher_section(base: str, explorables: Iterable[tuple[str, str]], secret: bytes) -> str:
    """HTML for the teacher's page: per explorable (route, title), a link and an iframe without the gate."""
    from blocktrace.explorables.components.embed import iframe_snippet  # the Embed dialog's, sized by its script

    rows = [(f"{route}?{urlencode(teacher_arguments(route, secret))}",  # on this server, whichever address
             title, iframe_snippet(base, route, teacher_arguments(route, secret, EMBED_DAYS * 86400), title))
            for route, title in explorables]
    return render("predict_links.html", rows=rows, demo_hours=DEMO_HOURS, embed_days=EMBED_DAYS)
