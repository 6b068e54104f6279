"""Joining a class in real browsers: the teacher's link and QR code, the code typed on the index, and a class
that stays with the student from page to page."""

from __future__ import annotations

import base64
import urllib.request

import pytest
from playwright.sync_api import Browser, expect

from tests.browser.teacher_login import logged_in_page
from tests.conftest import module_server

pytestmark = pytest.mark.browser
PASSWORD = "join the class"
TRACE = "/explorables/transformer-block-trace"
XSS = '<img src=x onerror="window.__pwned=1">'


@pytest.fixture(scope="module")
def classroom(tmp_path_factory):
    yield from module_server(tmp_path_factory, "join", "--teacher-password", PASSWORD)


def dashboard(server, code: str) -> str:
    request = urllib.request.Request(server.url(f"/teacher?class={code}"))
    request.add_header("Authorization", "Basic " + base64.b64encode(f"teacher:{PASSWORD}".encode()).decode())
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.read().decode()


def test_a_student_joins_by_the_teachers_link_and_stays_in_the_class(browser: Browser, classroom) -> None:
    teacher = logged_in_page(browser, classroom.url("/teacher?class=period3"), PASSWORD)
    expect(teacher.get_by_role("heading", name="Students join class “period3”")).to_be_visible()
    qr = teacher.locator("img.bt-qr")
    expect(qr).to_be_visible()
    assert qr.evaluate("img => img.complete && img.naturalWidth > 100")  # the SVG decoded, a code to scan
    link = teacher.locator(".bt-join-link a").inner_text()
    assert link == classroom.url("/?class=period3")
    expect(teacher.get_by_text("This link names this computer only")).to_be_visible()  # no address given

    student = browser.new_context().new_page()
    student.goto(link)
    expect(student.get_by_role("status").filter(has_text="You are in class")).to_contain_text("period3")
    student.get_by_role("link", name="Pre-norm Transformer block trace").click()
    student.wait_for_url("**/explorables/transformer-block-trace?class=period3")
    student.goto(classroom.url(TRACE))  # a link without the class: the cookie keeps it
    expect(student.locator(".bt-learner-bar")).to_contain_text("Class period3")
    student.get_by_text("Zero updates return the input unchanged").click()
    student.get_by_role("button", name="Commit prediction").click()
    expect(student.get_by_text("Your prediction (final)")).to_be_visible()
    assert "<strong>1</strong> learner committed a prediction" in dashboard(classroom, "period3")
    assert "<strong>1</strong> learner committed a prediction" not in dashboard(classroom, "default")
    teacher.context.close()
    student.context.close()


def test_a_student_types_the_class_code_on_the_index_and_can_change_it(browser: Browser, classroom) -> None:
    student = browser.new_context().new_page()
    student.goto(classroom.url("/"))
    expect(student.get_by_text("Not in a class yet")).to_be_visible()
    student.get_by_label("Class code").fill("period4")
    student.get_by_role("button", name="Join").click()
    expect(student.get_by_role("status").filter(has_text="You are in class")).to_contain_text("period4")
    student.goto(classroom.url(TRACE))
    bar = student.locator(".bt-learner-bar")
    expect(bar).to_contain_text("Class period4")
    bar.get_by_role("link", name="change class").click()
    student.get_by_label("Class code").fill("period5")
    student.get_by_role("button", name="Join").click()
    expect(student.get_by_role("status").filter(has_text="You are in class")).to_contain_text("period5")
    student.goto(classroom.url(TRACE))
    expect(student.locator(".bt-learner-bar")).to_contain_text("Class period5")
    student.context.close()


def test_a_code_the_server_cannot_use_is_refused_beside_the_field_and_never_run(browser: Browser, classroom) -> None:
    student = browser.new_context().new_page()
    student.goto(classroom.url("/?class=period6"))
    student.goto(classroom.url("/?class=" + urllib.request.quote(XSS)))
    expect(student.get_by_role("alert")).to_contain_text("is not a class code")
    expect(student.get_by_role("alert")).to_contain_text(XSS)  # shown as text
    assert student.evaluate("() => window.__pwned === undefined")
    expect(student.get_by_role("status").filter(has_text="You are in class")).to_contain_text("period6")  # kept
    student.context.close()
