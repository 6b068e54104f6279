"""Joining a class: the link and QR code the teacher shows, the class a browser is in, the index's field."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

import segno

from blocktrace.app.classroom.identity import CLASS_COOKIE
from blocktrace.app.classroom.join import (
    class_of,
    index_join_section,
    join_link,
    qr_data_uri,
    student_base,
    teacher_card,
    with_class,
)


def test_the_join_link_opens_the_index_with_the_class() -> None:
    link = join_link("http://192.168.1.20:5006/", "period3")
    parts = urlsplit(link)
    assert (parts.netloc, parts.path, parse_qs(parts.query)) == ("192.168.1.20:5006", "/", {"class": ["period3"]})


def test_students_are_sent_to_an_address_they_can_reach() -> None:
    """A teacher browsing at localhost gets the address the server was told students use."""
    origins = ["localhost:5006", "127.0.0.1:5006", "192.168.1.20:5006"]
    assert student_base("http", "localhost:5006", origins) == ("http://192.168.1.20:5006", False)
    assert student_base("http", "[::1]:5006", origins) == ("http://192.168.1.20:5006", False)
    assert student_base("https", "class.example.org", origins) == ("https://class.example.org", False)
    # Nothing but this computer: the link is shown, marked as reachable from here only.
    assert student_base("http", "127.0.0.1:5006", origins[:2]) == ("http://127.0.0.1:5006", True)


def test_the_class_comes_from_the_link_then_the_cookie_and_default_is_no_class() -> None:
    assert class_of({"class": "period3"}, {CLASS_COOKIE: "period2"}) == "period3"
    assert class_of({}, {CLASS_COOKIE: "period2"}) == "period2"
    assert class_of({"class": "not a code!"}, {CLASS_COOKIE: "period2"}) == "period2"
    assert class_of({}, {CLASS_COOKIE: "default"}) is None
    assert class_of({}, {}) is None


def test_links_keep_the_class() -> None:
    assert with_class("/lessons/block-floor", "period3") == "/lessons/block-floor?class=period3"
    assert with_class("/x?theme=dark", "p-3") == "/x?theme=dark&class=p-3"
    assert with_class("/x", None) == "/x"


def test_the_teacher_card_shows_the_link_as_text_and_as_a_qr_code_of_that_link() -> None:
    base, code = "http://192.168.1.20:5006", "period3"
    card = teacher_card(base, code, local_only=False)
    link = join_link(base, code)
    assert f">{link}</a>" in card
    src = re.search(r'<img class="bt-qr" src="([^"]+)"', card).group(1)
    assert src == qr_data_uri(link) and src.startswith("data:image/svg+xml")
    assert segno.make(link, error="m").designator  # the text fits a QR code (segno raises otherwise)
    assert ">period3</strong>" in card and "names this computer only" not in card
    assert "names this computer only" in teacher_card("http://127.0.0.1:5006", code, local_only=True)


def test_the_teacher_card_of_no_class_asks_for_a_code_and_shows_no_link() -> None:
    card = teacher_card("http://192.168.1.20:5006", "default", local_only=False)
    assert "No class chosen" in card and "bt-qr" not in card and 'name="class"' in card


def test_the_index_says_which_class_and_escapes_what_was_typed() -> None:
    joined = index_join_section("period3", None)
    assert "You are in class" in joined and ">period3</strong>" in joined and 'role="alert"' not in joined
    typed = '<img src=x onerror="alert(1)">'
    refused = index_join_section(None, typed)
    assert "Not in a class yet" in refused and "<img" not in refused
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in refused and 'aria-invalid="true"' in refused
