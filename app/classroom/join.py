"""How students get into a class: the link and QR code the teacher shows, or the code typed on the index.

A class is a short code (CODE_RULE). A student who opens a link with `?class=CODE`, or types the code
on the index, gets the class cookie from the server (app/server/page_requests.py); every page after
that records into the class, whatever its link says, until they join another. "default" is where the
work of a student who chose no class goes: the pages call that "no class".
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from html import escape
from urllib.parse import quote, urlencode, urlsplit

import segno

from blocktrace.app.classroom.identity import CLASS_CODE_PATTERN, DEFAULT_CLASS, chosen_class

CODE_RULE = "1 to 24 letters, digits, - or _"
CODE_PATTERN = CLASS_CODE_PATTERN  # the browser's own check of the field; the server checks again
QR_SCALE = 6  # pixels per module: about 200 px for a join link, readable from the back of a classroom


def join_link(base: str, code: str) -> str:
    """The address that puts a student into class `code` (the index, with the class in its query)."""
    return f"{base.rstrip('/')}/?{urlencode({'class': code})}"


def qr_data_uri(text: str) -> str:
    """A QR code of `text` as an SVG data URI, for an <img> (made here, nothing fetched)."""
    return segno.make(text, error="m").svg_data_uri(scale=QR_SCALE, border=4, dark="#111111", light="#ffffff")


def _loopback(host: str) -> bool:
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
    if not _loopback(host):
        return f"{protocol}://{host}", False
    for origin in origins:
        if not _loopback(origin):
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
    other = ('<form method="get" action="/teacher" class="bt-join-form"><label for="bt-open-class">Open a class '
             f'(new or earlier) by its code</label> <input id="bt-open-class" name="class" required maxlength="24" '
             f'pattern="{CODE_PATTERN}" placeholder="e.g. period3" autocomplete="off"> <button type="submit">Open'
             f'</button> <span class="bt-muted">{escape(CODE_RULE)}</span></form>')
    if code == DEFAULT_CLASS:
        return ('<section class="bt-card bt-join" aria-labelledby="bt-join-h"><h2 id="bt-join-h" class="bt-h2">'
                "No class chosen</h2><p>Students who open the site without a class code are counted here. Give "
                "each class a code of its own: open it below, and this page shows the link and the QR code that "
                f"put students into it.</p>{other}</section>")
    link = join_link(base, code)
    warning = ('<p class="bt-notice" role="note">This link names this computer only. So that students\' '
               "laptops can reach it, start the server with <code>--address 0.0.0.0 --allow-websocket-origin "
               "ADDRESS:PORT</code> (your laptop's address on the school network) and open this page there."
               "</p>") if local_only else ""
    return ('<section class="bt-card bt-join" aria-labelledby="bt-join-h">'
            f'<h2 id="bt-join-h" class="bt-h2">Students join class “{escape(code)}”</h2>'
            '<div class="bt-join-body">'
            f'<img class="bt-qr" src="{qr_data_uri(link)}" alt="QR code of the join link {escape(link)}">'
            '<div class="bt-join-text"><p>Open this link, or scan the code:</p>'
            f'<p class="bt-join-link"><a href="{escape(link)}">{escape(link)}</a></p>'
            f'<p>Or open <strong>{escape(base)}/</strong> and type the class code '
            f'<strong class="bt-code">{escape(code)}</strong>.</p>{warning}</div></div>{other}</section>')


def index_join_section(code: str | None, typed: str | None) -> str:
    """The index's "your class" section: the class this browser is in, and the field to join one.

    `typed`: a `?class=` value the server could not use (shown escaped, beside the field)."""
    if code:
        status = (f'<p role="status">You are in class <strong class="bt-code">{escape(code)}</strong>: your '
                  "answers go to your teacher's page for it. To change class, type another code.</p>")
    else:
        status = ('<p>Not in a class yet. Type the class code your teacher gives you, or open the link they '
                  "show.</p>")
    error = ""
    if typed is not None:
        error = (f'<p class="bt-field-error" role="alert" id="bt-class-error">“{escape(typed)}” is not a class '
                 f"code: use {escape(CODE_RULE)}.</p>")
    described = ' aria-describedby="bt-class-error" aria-invalid="true"' if error else ""
    return ('<section id="join" class="bt-card bt-join" aria-labelledby="bt-join-h">'
            '<h2 id="bt-join-h" class="bt-h2">Your class</h2>'
            f'{status}<form method="get" action="/" class="bt-join-form">'
            '<label for="bt-class-code">Class code</label> '
            f'<input id="bt-class-code" name="class" required maxlength="24" pattern="{CODE_PATTERN}" '
            f'placeholder="e.g. period3" autocomplete="off"{described}> <button type="submit">Join</button>'
            f"</form>{error}</section>")
