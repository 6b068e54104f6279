"""Whether a page opens with the predict-first gate: on, unless the teacher's signed link says off.

`?predict=off` alone is something any student can type, so the server ignores it (the gate shows, with a
short note). A link from the teacher's page carries `predict_sig`, an HMAC-SHA256 with the server's secret
over the explorable's route: it switches the gate off for that explorable only. The signature does not
cover the rest of the query, on purpose: with the gate off every control is unlocked anyway, and the page
rewrites its query as the controls change (url_state.sync_to_url), so a reload keeps working.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from html import escape
from urllib.parse import urlencode

from blocktrace.app.classroom import learner as learners

SIGNATURE_KEY = "predict_sig"
_DOMAIN = b"blocktrace predict off\x00"  # keeps these signatures apart from every other use of the secret
_HEX_DIGITS = 32  # 128 bits of the HMAC: plenty against guessing, short enough for a link
UNSIGNED_NOTICE = ("This link asks to skip the prediction step, which only a link from the teacher's page can "
                   "do: predict first, then the controls unlock.")


def signature(route: str, secret: bytes) -> str:
    """The `predict_sig` value that switches the gate off on `route` (e.g. /explorables/block-floor)."""
    return hmac.new(secret, _DOMAIN + route.encode("utf-8"), hashlib.sha256).hexdigest()[:_HEX_DIGITS]


def teacher_arguments(route: str, secret: bytes) -> dict[str, str]:
    """The query arguments of a teacher's link without the prediction step."""
    return {"predict": "off", SIGNATURE_KEY: signature(route, secret)}


def signed_off(route: str, query: Mapping[str, str], secret: bytes | None) -> bool:
    """True when the query asks for predict=off with this server's signature for this route."""
    if secret is None or query.get("predict") != "off":
        return False
    given = query.get(SIGNATURE_KEY, "")
    return hmac.compare_digest(given.encode("utf-8", "replace"), signature(route, secret).encode("ascii"))


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
    if signed_off(route, query, server_secret()):
        return GateDecision(False, [])
    return GateDecision(True, [UNSIGNED_NOTICE])


def teacher_section(base: str, explorables: Iterable[tuple[str, str]], secret: bytes) -> str:
    """HTML for the teacher's page: per explorable (route, title), a link and an iframe without the gate."""
    from blocktrace.explorables.components.embed import iframe_snippet  # the Embed dialog's, sized by its script

    rows = []
    for route, title in explorables:
        args = teacher_arguments(route, secret)
        link = f"{route}?{urlencode(args)}"  # on this server, whichever address the teacher used
        frame = iframe_snippet(base, route, args, title)
        rows.append(f'<li><a class="bt-predict-off" href="{escape(link)}">{escape(title)}</a>'
                    f'<pre class="bt-command"><code>{escape(frame)}</code></pre></li>')
    return ('<section class="bt-card"><h2 class="bt-h2">Links without the prediction step</h2>'
            "<p>For a demonstration, or for a page of your own that embeds an explorable: these links open it "
            "with every control unlocked. Students who type <code>?predict=off</code> still get the prediction "
            "step; only these signed links skip it. Anyone who has one can pass it on.</p>"
            f'<ul class="bt-predict-links">{"".join(rows)}</ul></section>')
