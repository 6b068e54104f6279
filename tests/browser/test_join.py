"""Joining a class in real browsers: the teacher's link and QR code, the code typed on the index (in any case,
mistyped, or one no class has), a class that stays with the student from page to page, and the name they saved
shown back. The server starts as a new one does: students join only classes the teacher opened."""

from __future__ import annotations

import base64
import urllib.request

import pytest
from playwright.sync_api import Browser, expect

from blocktrace.app.classroom.store import EventStore, default_url
from tests.browser.teacher_login import logged_in_page
from tests.conftest import module_server

pytestmark = pytest.mark.browser
PASSWORD = "join the class"
TRACE = "/explorables/transformer-block-trace"
XSS = '<img src=x onerror="window.__pwned=1">'


@pytest.fixture(scope="module")
def classroom(tmp_path_factory):
    yield from module_server(tmp_path_factory, "join", "--teacher-password", PASSWORD, open_joining=False)


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
    for code in ("period4", "period5"):
        dashboard(classroom, code)  # the teacher opens the classes
    student = browser.new_context().new_page()
    student.goto(classroom.url("/"))
    expect(student.get_by_text("Not in a class yet")).to_be_visible()
    student.get_by_label("Class code").fill("Period4 ")  # a phone's capital, and a space after
    student.get_by_role("button", name="Join").click()
    expect(student.get_by_role("status").filter(has_text="You are in class")).to_contain_text("period4")
    student.goto(classroom.url(TRACE))
    bar = student.locator(".bt-learner-bar")
    expect(bar).to_contain_text("Class period4")
    bar.get_by_role("link", name="change class").click()
    student.get_by_label("Class code").fill("PERIOD5")
    student.get_by_role("button", name="Join").click()
    expect(student.get_by_role("status").filter(has_text="You are in class")).to_contain_text("period5")
    student.goto(classroom.url(TRACE))
    expect(student.locator(".bt-learner-bar")).to_contain_text("Class period5")
    student.context.close()


def test_a_code_the_server_cannot_use_is_refused_beside_the_field_and_never_run(browser: Browser, classroom) -> None:
    dashboard(classroom, "period6")
    student = browser.new_context().new_page()
    student.goto(classroom.url("/?class=period6"))
    student.goto(classroom.url("/?class=" + urllib.request.quote(XSS)))
    expect(student.get_by_role("alert")).to_contain_text("is not a class code")
    expect(student.get_by_role("alert")).to_contain_text(XSS)  # shown as text
    assert student.evaluate("() => window.__pwned === undefined")
    expect(student.get_by_role("status").filter(has_text="You are in class")).to_contain_text("period6")  # kept
    student.context.close()


def test_a_mistyped_code_is_asked_about_and_an_unopened_one_joins_nobody(browser: Browser, classroom) -> None:
    """"Did you mean period7?" for a near miss, "not opened" for a code no class has: neither joins a class, and
    the class the student was in stays."""
    dashboard(classroom, "period7")
    student = browser.new_context().new_page()
    student.goto(classroom.url("/"))
    student.get_by_label("Class code").fill("Perod7")
    student.get_by_role("button", name="Join").click()
    alert = student.get_by_role("alert")
    expect(alert).to_have_text("There is no class “Perod7” here. Did you mean period7?")
    expect(student.get_by_label("Class code")).to_have_value("Perod7")  # kept, to correct
    expect(student.get_by_text("Not in a class yet")).to_be_visible()
    alert.get_by_role("link", name="period7").click()
    expect(student.get_by_role("status").filter(has_text="You are in class")).to_contain_text("period7")
    student.get_by_label("Class code").fill("chem9")
    student.get_by_role("button", name="Join").click()
    expect(student.get_by_role("alert")).to_contain_text("your teacher has not opened it")
    expect(student.get_by_role("status").filter(has_text="You are in class")).to_contain_text("period7")
    student.goto(classroom.url(TRACE + "?class=chem9"))  # a link to another page: the same answer, the class kept
    bar = student.locator(".bt-learner-bar")
    expect(bar).to_contain_text("This link's class “chem9” is not open on this server")
    expect(bar).to_contain_text("Class period7")
    student.context.close()


def test_a_crafted_class_cookie_joins_nothing_until_the_teacher_lets_students_start_classes(
        browser: Browser, classroom) -> None:
    """The server decides: a class cookie the browser made up puts nobody into a class; the teacher's switch
    (one click on the teacher's card) lets students start one with any code, and turns back."""
    student = browser.new_context()
    student.add_cookies([{"name": "bt_class", "value": "made-up", "url": classroom.url("/")}])
    page = student.new_page()
    page.goto(classroom.url(TRACE))
    expect(page.locator(".bt-learner-bar")).to_contain_text("No class")
    with EventStore(default_url(classroom.data_dir)) as store:
        assert "made-up" not in store.class_codes()
    teacher = logged_in_page(browser, classroom.url("/teacher?class=period7"), PASSWORD)
    teacher.get_by_role("button", name="Let students start a class with any code").click()
    expect(teacher.get_by_role("button", name="Only classes I opened")).to_be_visible()
    page.goto(classroom.url("/?class=Chem9"))
    expect(page.get_by_role("status").filter(has_text="You are in class")).to_contain_text("chem9")
    teacher.get_by_role("button", name="Only classes I opened").click()
    expect(teacher.get_by_role("button", name="Let students start a class with any code")).to_be_visible()
    page.goto(classroom.url("/?class=chem10"))
    expect(page.get_by_role("alert")).to_contain_text("your teacher has not opened it")
    teacher.context.close()
    student.close()


def test_the_saved_name_is_shown_back_on_reload_and_on_every_page(browser: Browser, classroom) -> None:
    """After "Save name" and "Saved.", the name is in the name field after a reload, on the index and on an
    explorable's page, as text."""
    dashboard(classroom, "period8")
    student = browser.new_context().new_page()
    student.goto(classroom.url("/?class=period8"))
    name = student.get_by_label("Your name (optional)")
    expect(name).to_have_value("")
    name.fill(XSS)
    student.get_by_role("button", name="Save name").click()
    expect(student.get_by_role("status").filter(has_text="Saved.")).to_be_visible()
    student.reload()
    expect(student.get_by_label("Your name (optional)")).to_have_value(XSS)
    student.goto(classroom.url(TRACE))
    expect(student.get_by_label("Your name (optional)")).to_have_value(XSS)
    assert student.evaluate("() => window.__pwned === undefined")
    assert XSS.replace('"', "&quot;").replace("<", "&lt;").replace(">", "&gt;") in dashboard(classroom, "period8")
    student.context.close()
