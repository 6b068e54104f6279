"""What learners type reaches the teacher's pages and the index as text: the pages render through autoescaping
templates (app/classroom/templates, rendering.py), not f-strings with escape() placed by hand (issue 24)."""

from __future__ import annotations

import ast
import base64
import re
import tomllib
import urllib.parse
import urllib.request
from collections.abc import Iterator
from glob import glob
from html.parser import HTMLParser
from pathlib import Path

import pytest

from blocktrace.app.classroom.identity import clean_display_name
from blocktrace.app.classroom.join import Refusal, index_join_section
from blocktrace.app.classroom.store import EventStore, default_url, new_event_id
from tests.conftest import Server, module_server

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "escape room"
CLASS = "esc1"
LESSON = "transformer-block"
EXPLORABLE = "transformer-block-trace"
QUESTION = "transformer-block-trace/prediction"
SCRIPT = "<script>alert(1)</script>"
IMAGE = '"><img src=x onerror=alert(1)>'
TEMPLATED = ["app/classroom/teacher_view.py", "app/classroom/join.py", "app/classroom/teacher.py",
             "app/classroom/store_status.py", "app/server/predict_links.py"]


class Page(HTMLParser):
    """A page as a browser would read it: its elements (tag, attributes) and its text."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str | None]]] = []
        self.texts: list[str] = []
        self.feed(html)
        self.close()
        self.text = "".join(self.texts)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.texts.append(data)


def assert_shown_as_text(html: str, *typed: str) -> Page:
    """Every `typed` text is in the page's text, and no element or attribute of the page came from one of them."""
    page = Page(html)
    for text in typed:
        assert text in page.text, text
        assert text not in html, f"{text!r} sits in the HTML unescaped"
    scripts = [attrs.get("src") for tag, attrs in page.elements if tag == "script"]
    assert all(src and src.startswith("/assets/") for src in scripts), scripts  # only the page's own script
    assert not [attrs for tag, attrs in page.elements if tag == "img" and attrs.get("class") != "bt-qr"]
    assert not [attrs for _, attrs in page.elements if any(name.startswith("on") for name in attrs)]
    return page


def test_a_typed_class_code_is_shown_as_text_on_the_index() -> None:
    """The index's join section shows a refused ?class= value as text beside the field, and in the field to
    correct it, whichever markup it holds."""
    for typed in (SCRIPT, IMAGE):
        section = index_join_section(None, Refusal(typed, "not a code", None))
        page = assert_shown_as_text(section, typed)
        assert f"“{typed}” is not a class code" in page.text
        assert ("input", "bt-class-code", typed) in [(tag, attrs.get("id"), attrs.get("value"))
                                                     for tag, attrs in page.elements]


@pytest.fixture(scope="module")
def classroom(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A served class whose learners are named with markup and explained with markup, both committed to the
    answer the dashboard lists as a misconception (with its learners' names)."""
    running = module_server(tmp_path_factory, "escaping", "--teacher-password", PASSWORD)
    server = next(running)
    with EventStore(default_url(server.data_dir)) as students:  # as the server's sessions store them
        for n, text in enumerate((SCRIPT, IMAGE)):
            learner = f"{n + 1:x}" * 32
            assert clean_display_name(text) == text  # stored as typed: escaping is the page's job
            students.join(CLASS, learner, text)
            assert students.commit_prediction(new_event_id(), CLASS, learner, QUESTION, "keep-both", None,
                                              LESSON, EXPLORABLE)
            assert students.record(new_event_id(), CLASS, learner, "explanation", {"text": f"because {text}"},
                                   LESSON, EXPLORABLE)
    yield server
    next(running, None)  # stops the server and checks its log


def teacher_get(server: Server, path: str) -> str:
    request = urllib.request.Request(server.url(path), headers={
        "Authorization": "Basic " + base64.b64encode(f"teacher:{PASSWORD}".encode()).decode()})
    with urllib.request.urlopen(request, timeout=60) as response:
        assert response.status == 200
        return response.read().decode("utf-8")


def test_names_and_explanations_are_shown_as_text_on_the_dashboard(classroom: Server) -> None:
    """The roster's names, the misconception's names and the written explanations show markup as text."""
    html = teacher_get(classroom, f"/teacher?class={CLASS}")
    page = assert_shown_as_text(html, SCRIPT, IMAGE, f"because {SCRIPT}", f"because {IMAGE}")
    assert f"{SCRIPT}: because {SCRIPT}" in page.text and f"{IMAGE}: because {IMAGE}" in page.text
    misconception = page.text.split("Misconception to discuss")[1].split("Written explanations")[0]
    assert SCRIPT in misconception and IMAGE in misconception
    roster = page.text.split("Last active", 1)[1].split("Predictions in", 1)[0]
    assert SCRIPT in roster and IMAGE in roster
    assert re.search(r"<strong>2</strong> learners committed a prediction in this lesson", html)
    assert "_xsrf" in [attrs.get("name") for tag, attrs in page.elements if tag == "input"]  # the forms' token


def test_a_class_code_with_markup_is_not_echoed_by_the_dashboard(classroom: Server) -> None:
    """A ?class= holding markup is no class code: the dashboard opens "no class" and shows none of it."""
    for typed in (SCRIPT, IMAGE):
        html = teacher_get(classroom, "/teacher?" + urllib.parse.urlencode({"class": typed}))
        page = assert_shown_as_text(html)
        assert "No class chosen" in page.text and "alert(1)" not in page.text


def test_the_presenter_view_shows_counts_and_no_names(classroom: Server) -> None:
    """The projector's view shows the class's answers with no learner's name or explanation, escaped or not."""
    html = teacher_get(classroom, f"/teacher/present?class={CLASS}&lesson={LESSON}")
    page = assert_shown_as_text(html)
    assert "alert(1)" not in page.text and "because" not in page.text
    assert "2 learners of 2 committed" in page.text
    assert [attrs.get("class") for tag, attrs in page.elements if tag == "iframe"] == ["bt-present-frame"]
    assert [attrs.get("class") for tag, attrs in page.elements if tag == "body"] == ["teacher bt-page bt-presenter"]


def test_the_teacher_pages_are_built_by_templates_not_by_hand() -> None:
    """No f-string builds HTML and no escape() is placed by hand in the modules whose pages show typed text."""
    for name in TEMPLATED:
        source = (ROOT / name).read_text(encoding="utf-8")
        assert "escape(" not in source, name
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.JoinedStr):
                literal = "".join(v.value for v in node.values if isinstance(v, ast.Constant))
                assert not re.search(r"</?[a-z]", literal), f"{name}:{node.lineno} builds HTML in an f-string"


def test_every_template_travels_in_the_wheel() -> None:
    """pyproject.toml's package data names every template, so an installed server finds its pages."""
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    patterns = data["package-data"]["blocktrace.app.classroom"]
    folder = ROOT / data["package-dir"]["blocktrace.app"] / "classroom"
    shipped = {Path(p).relative_to(folder).as_posix() for pattern in patterns for p in glob(str(folder / pattern))}
    templates = {p.relative_to(folder).as_posix() for p in (folder / "templates").iterdir()}
    assert templates and templates <= shipped, sorted(templates - shipped)
