"""Joining a class: the link and QR code the teacher shows, the class a browser is in, the index's field."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

import pytest
import segno

from blocktrace.app.classroom.identity import CLASS_COOKIE
from blocktrace.app.classroom.join import (
    Refusal,
    admits,
    class_of,
    index_join_section,
    join_link,
    qr_data_uri,
    refusal,
    student_base,
    suggestion,
    teacher_card,
    with_class,
)

LMS_CLASS = "lti-0123456789abcdef0123"
CLASSES = frozenset({"period3", "physics-a", "bio2", "default", LMS_CLASS})


def gate(classes: frozenset[str] | None = CLASSES, open_joining: bool = False):
    """The server's word on a class, as Classroom.admits gives it from what its store thread read."""
    return lambda code, kept: admits(code, classes, open_joining, kept)


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
    assert class_of({"class": "period3"}, {CLASS_COOKIE: "bio2"}, gate()) == "period3"
    assert class_of({}, {CLASS_COOKIE: "bio2"}, gate()) == "bio2"
    assert class_of({"class": "not a code!"}, {CLASS_COOKIE: "bio2"}, gate()) == "bio2"
    assert class_of({"class": "chem7"}, {CLASS_COOKIE: "bio2"}, gate()) == "bio2"  # refused: the last good kept
    assert class_of({}, {CLASS_COOKIE: "default"}, gate()) is None
    assert class_of({}, {}, gate()) is None


# (what the student typed or the link said, open joining) -> (the class they are in, why not / the suggestion)
@pytest.mark.parametrize(("typed", "open_joining", "joined", "reason", "suggested"), [
    ("period3", False, "period3", None, None),
    ("Period3", False, "period3", None, None),  # a phone's capital
    (" period3 ", False, "period3", None, None),
    ("PERIOD3", False, "period3", None, None),
    ("perod3", False, None, "not opened", "period3"),  # a letter left out
    ("preiod3", False, None, "not opened", "period3"),  # two swapped
    ("pXriYd3", False, None, "not opened", "period3"),  # two wrong in 7 letters
    ("period 3", False, None, "not a code", "period3"),  # a space inside
    ("bio3", False, None, "not opened", "bio2"),  # one wrong in 4 letters
    ("bXo3", False, None, "not opened", None),  # two wrong in 4 letters: too far to be a typo
    ("chem7", False, None, "not opened", None),  # no class is close: "not opened yet", and no code given away
    ("pe", False, None, "not opened", None),
    (LMS_CLASS[:-1] + "4", False, None, "not opened", None),  # an LMS's class is never offered
    ("chem7", True, "chem7", None, None),  # the teacher lets students start classes
    ("Perod3", True, "perod3", None, None),
    ("<b>x</b>", True, None, "not a code", None),
])
def test_a_code_joins_a_class_the_server_has_and_a_near_miss_is_asked_about(
        typed, open_joining, joined, reason, suggested) -> None:
    """Case and spaces around a code never matter; a code no class has puts nobody into a class (unless the
    teacher opened joining) and gets at most the one code it nearly is."""
    admitted = gate(open_joining=open_joining)
    assert class_of({"class": typed}, {}, admitted) == joined
    answer = refusal(typed, admitted, CLASSES)
    assert (answer.reason, answer.suggestion) == (reason, suggested) if reason else answer is None


@pytest.mark.parametrize(("cookie", "classes", "open_joining", "joined"), [
    ("Period3", CLASSES, False, "period3"),  # a cookie from before codes had one spelling
    ("secret-class", CLASSES, False, None),  # crafted: no class has it
    ("secret-class", CLASSES, True, "secret-class"),
    ("bio2", None, False, "bio2"),  # the classes not read yet (database down at start): the cookie is kept...
])
def test_the_class_cookie_is_the_servers_word_not_the_browsers(cookie, classes, open_joining, joined) -> None:
    """A crafted class cookie puts nobody into a class the server does not have."""
    assert class_of({}, {CLASS_COOKIE: cookie}, gate(classes, open_joining)) == joined


def test_until_the_classes_are_read_a_new_code_waits() -> None:
    """...but a new code is not let in, and the student is told to try again in a moment."""
    assert class_of({"class": "bio2"}, {}, gate(None)) is None
    assert refusal("bio2", gate(None), None) == Refusal("bio2", "not read", None)


def test_two_codes_as_near_give_neither() -> None:
    """A code as close to two classes names neither: trying codes never lists classes."""
    assert suggestion("period5", {"period3", "period4"}) is None
    assert suggestion("period5", {"period3", "periodical"}) == "period3"


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


@pytest.mark.parametrize(("open_joining", "button"), [(False, "Let students start a class with any code"),
                                                     (True, "Only classes I opened")])
def test_the_teacher_card_switches_open_joining_with_a_form_of_the_teachers_own(open_joining, button) -> None:
    """The switch posts the other choice with the XSRF token; a course's teacher let in by an LMS gets none."""
    card = teacher_card("http://192.168.1.20:5006", "period3", False,
                        (open_joining, [("_xsrf", "token-1"), ("class", "period3"), ("theme", "light")]))
    assert 'action="/teacher/joining"' in card and '<input type="hidden" name="_xsrf" value="token-1">' in card
    assert f'value="{"no" if open_joining else "yes"}">{button}</button>' in card
    assert "/teacher/joining" not in teacher_card("http://192.168.1.20:5006", "period3", False, None)


def test_the_teacher_card_of_no_class_asks_for_a_code_and_shows_no_link() -> None:
    card = teacher_card("http://192.168.1.20:5006", "default", local_only=False)
    assert "No class chosen" in card and "bt-qr" not in card and 'name="class"' in card


def test_the_index_says_which_class_and_escapes_what_was_typed() -> None:
    joined = index_join_section("period3", None)
    assert "You are in class" in joined and ">period3</strong>" in joined and 'role="alert"' not in joined
    typed = '<img src=x onerror="alert(1)">'
    refused = index_join_section(None, Refusal(typed, "not a code", None))
    assert "Not in a class yet" in refused and "<img" not in refused and "is not a class code: use" in refused
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in refused and 'aria-invalid="true"' in refused


@pytest.mark.parametrize(("refused", "words"), [
    (Refusal("perod3", "not opened", "period3"), 'There is no class “perod3” here. Did you mean '
                                                 '<a class="bt-link" href="/?class=period3#join">period3</a>?'),
    (Refusal("chem7", "not opened", None), "There is no class “chem7” here yet: your teacher has not opened it."),
    (Refusal("chem7", "not read", None), "The class list cannot be read just now, so “chem7” could not be checked."),
])
def test_the_index_answers_a_code_no_class_has_beside_the_field(refused, words) -> None:
    """The answer sits beside the field, which keeps what was typed to correct it."""
    section = index_join_section("bio2", refused)
    assert words in section and 'value="' + refused.typed + '"' in section and ">bio2</strong>" in section
