"""How students get into a class: the link and QR code the teacher shows, or the code typed on the index.

A class is a short code (CODE_RULE). A student who opens a link with `?class=CODE`, or types the code
on the index, gets the class cookie from the server (app/server/page_requests.py); every page after
that records into the class, whatever its link says, until they join another. "default" is where the
work of a student who chose no class goes: the pages call that "no class".
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from urllib.parse import quote, urlencode, urlsplit

import segno

from blocktrace.app.classroom.identity import CLASS_CODE_PATTERN, DEFAULT_CLASS, chosen_class
from blocktrace.app.classroom.rendering import render

__all__ = ["CODE_PATTERN", "CODE_RULE", "class_of", "index_join_section", "join_link", "loopback", "qr_data_uri",
           "student_base", "teacher_card", "with_class"]

CODE_RULE = "1 to 24 letters, digits, - or _"
CODE_PATTERN = CLASS_CODE_PATTERN  # the browser's own check of the field; the server checks again
QR_SCALE = 6  # pixels per module: about 200 px for a join link, readable from the back of a classroom


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


def class_of(query: Mapping[str, str], cookies: Mapping[str, str]) -> str | None:
    """The class this browser is in (as the pages record it, chosen_class); None for none ("default")."""
    code = chosen_class(query, cookies)
    return None if code == DEFAULT_CLASS else code


def with_class(href: str, code: str | None) -> str:
    """A link of ours that keeps the class in its query too (the cookie already does; a copied link then
    does as well)."""
    if not code:
        return href
    return f"{href}{'&' if '?' in href else '?'}class={quote(code)}"


def teacher_card(base: str, code: str, local_only: bool) -> str:
    """The teacher's "how students join" card for class `code`, with the form to open another class."""
    values = {"code": code, "code_pattern": CODE_PATTERN, "code_rule": CODE_RULE, "local_only": local_only}
    if code == DEFAULT_CLASS:
        return render("teacher_card.html", link=None, **values)
    link = join_link(base, code)
    return render("teacher_card.html", link=link, qr=qr_data_uri(link), base=base, **values)


def index_join_section(code: str | None, typed: str | None) -> str:
    """The index's "your class" section: the class this browser is in, and the field to join one.

    `typed`: a `?class=` value the server could not use (shown as text, beside the field)."""
    return render("index_join.html", code=code, typed=typed, code_pattern=CODE_PATTERN, code_rule=CODE_RULE)
