"""How students get into a class: the link and QR code the teacher shows, or the code typed on the index.

A class is a short code (CODE_RULE), compared without case or the spaces around it (identity.class_code). A
student who opens a link with `?class=CODE`, or types the code on the index, gets the class cookie from the
server (app/server/page_requests.py); every page after that records into the class, whatever its link says,
until they join another. "default" is where the work of a student who chose no class goes: the pages call that
"no class".

A student joins only a class this server has (`admits`): one the teacher opened (/teacher?class=CODE makes it),
one an LMS launched, or one learners are already in. A code no class has is answered on the index with the one
close code of a class here ("Did you mean period3?", `suggestion`), or with "your teacher has not opened it" --
unless the teacher lets students start a class with any code (the open-joining option, a switch on the
teacher's card, stored in the class database for every process). The server decides, from the classes its store
thread has read, wherever a code comes in; a crafted link or cookie is passed over like a mistyped code.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import quote, urlencode, urlsplit

import segno

from blocktrace.app.classroom.identity import CLASS_CODE_PATTERN, DEFAULT_CLASS, chosen_class, class_code
from blocktrace.app.classroom.rendering import render

__all__ = ["CODE_PATTERN", "CODE_RULE", "Refusal", "admits", "class_of", "index_join_section", "join_link",
           "loopback", "qr_data_uri", "refusal", "student_base", "suggestion", "teacher_card", "with_class"]

CODE_RULE = "1 to 24 letters, digits, - or _"
CODE_PATTERN = CLASS_CODE_PATTERN  # the browser's own check of the teacher's field; the server checks again
QR_SCALE = 6  # pixels per module: about 200 px for a join link, readable from the back of a classroom
SHOWN_TYPED = 60  # characters of a refused code shown back beside the field
Admits = Callable[[str, bool], bool]  # (code, kept in the class cookie) -> may a student be in it


def admits(code: str, classes: Collection[str] | None, open_joining: bool, kept: bool = False) -> bool:
    """Whether a student may be in class `code` (a class code as identity.class_code spells it).

    "default" (no class) always; else a class this server has (`classes`), or any code while the teacher lets
    students start classes (`open_joining`). `classes` None: not read yet (the database was down when this
    process started): only a code the server itself put in the class cookie before (`kept`).
    """
    if code == DEFAULT_CLASS:
        return True
    if classes is None:
        return kept
    return open_joining or code in classes


def _distance(a: str, b: str, limit: int) -> int:
    """Edits from `a` to `b`: a letter changed, added, left out, or two neighbours swapped (optimal string
    alignment distance); any number above `limit` once it is sure to be more (no row can get smaller)."""
    before, previous = None, list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        row = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            row[j] = min(previous[j] + 1, row[j - 1] + 1, previous[j - 1] + (a[i - 1] != b[j - 1]))
            if before is not None and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                row[j] = min(row[j], before[j - 2] + 1)
        if min(row) > limit:
            return limit + 1
        before, previous = previous, row
    return previous[-1]


def _edits_allowed(code: str) -> int:
    """How far a typed code may be from `code` to be offered: none for 3 letters or fewer (a guess that short
    would find other classes' codes), 1 up to 6 letters, 2 beyond."""
    return 0 if len(code) <= 3 else 1 if len(code) <= 6 else 2


def suggestion(typed: str, classes: Collection[str]) -> str | None:
    """The one class of `classes` whose code a student nearly typed, or None.

    Nearly: the same once spaces and case are set aside ("period 3"), or one or two letters wrong, missing,
    extra or swapped (_edits_allowed). Never a list, never an LMS's class or "default", and None when two codes
    are as close: a classmate who tries codes learns at most the one they nearly typed, not the other classes'.
    """
    squeezed = "".join(typed.split()).lower()
    best: list[str] = []
    best_distance = None
    for code in classes:
        allowed = _edits_allowed(code)
        if code == DEFAULT_CLASS or code.startswith("lti-") or abs(len(code) - len(squeezed)) > allowed:
            continue
        distance = _distance(squeezed, code, allowed)
        if distance > allowed or (best_distance is not None and distance > best_distance):
            continue
        if best_distance is None or distance < best_distance:
            best, best_distance = [code], distance
        else:
            best.append(code)
    return best[0] if len(best) == 1 else None


@dataclass(frozen=True)
class Refusal:
    """Why a code a student typed (or their link named) did not put them into a class."""

    typed: str  # as typed, cut to SHOWN_TYPED characters; shown as text
    reason: str  # "not a code" (not 1-24 letters...), "not opened" (no class has it), "not read" (cannot tell yet)
    suggestion: str | None  # the class they nearly typed (suggestion), if any

    @property
    def href(self) -> str | None:
        """The link that joins the suggested class."""
        return None if self.suggestion is None else f"/?{urlencode({'class': self.suggestion})}#join"


def refusal(typed: str | None, admitted: Admits, classes: Collection[str] | None) -> Refusal | None:
    """What to tell a student about the code they typed or their link named: None when it put them into a class
    (or there was none)."""
    if typed is None:
        return None
    code = class_code(typed)
    if code is not None and admitted(code, False):
        return None
    if code is not None and classes is None:
        return Refusal(typed[:SHOWN_TYPED], "not read", None)
    return Refusal(typed[:SHOWN_TYPED], "not a code" if code is None else "not opened",
                   suggestion(typed, classes or ()))


def join_link(base: str, code: str) -> str:
    """The address that puts a student into class `code` (the index, with the class in its query)."""
    return f"{base.rstrip('/')}/?{urlencode({'class': code})}"


def qr_data_uri(text: str) -> str:
    """A QR code of `text` as an SVG data URI, for an <img> (made here, nothing fetched)."""
    return segno.make(text, error="m").svg_data_uri(scale=QR_SCALE, border=4, dark="#111111", light="#ffffff")


def loopback(host: str) -> bool:
    """Whether HOST[:PORT] is this computer's own address only."""
    name = urlsplit(f"//{host}").hostname or ""
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def student_base(protocol: str, host: str, origins: Sequence[str] = ()) -> tuple[str, bool]:
    """The address students should open, and whether it only works on this computer.

    The teacher's own address, unless that is this computer's loopback (a teacher at localhost:5006);
    then the first address the server accepts websockets from that is not (the one `serve` was told
    students type, `--allow-websocket-origin`).
    """
    if not loopback(host):
        return f"{protocol}://{host}", False
    for origin in origins:
        if not loopback(origin):
            return f"{protocol}://{origin}", False
    return f"{protocol}://{host}", True


def class_of(query: Mapping[str, str], cookies: Mapping[str, str], admitted: Admits | None = None) -> str | None:
    """The class this browser is in (as the pages record it, chosen_class); None for none ("default")."""
    code = chosen_class(query, cookies, admitted)
    return None if code == DEFAULT_CLASS else code


def with_class(href: str, code: str | None) -> str:
    """A link of ours that keeps the class in its query too (the cookie already does; a copied link then
    does as well)."""
    if not code:
        return href
    return f"{href}{'&' if '?' in href else '?'}class={quote(code)}"


def teacher_card(base: str, code: str, local_only: bool,
                 joining: tuple[bool, list[tuple[str, str]]] | None = None) -> str:
    """The teacher's "how students join" card for class `code`, with the form to open another class.

    `joining`: (whether students may start a class with any code, the hidden fields of the form that switches
    it); None leaves the switch out (a course's teacher let in by an LMS decides for their class only)."""
    values = {"code": code, "code_pattern": CODE_PATTERN, "code_rule": CODE_RULE, "local_only": local_only,
              "open_joining": None if joining is None else joining[0], "fields": [] if joining is None else joining[1]}
    if code == DEFAULT_CLASS:
        return render("teacher_card.html", link=None, **values)
    link = join_link(base, code)
    return render("teacher_card.html", link=link, qr=qr_data_uri(link), base=base, **values)


def index_join_section(code: str | None, refused: Refusal | None) -> str:
    """The index's "your class" section: the class this browser is in, and the field to join one.

    `refused`: what became of a `?class=` value that put the browser into no class (shown as text, beside the
    field, with the class they nearly typed)."""
    return render("index_join.html", code=code, refused=refused, code_rule=CODE_RULE)
