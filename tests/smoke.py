"""Every page of a running server, in Chromium: it renders with its CSS, a control change updates it,
nothing is mis-encoded or fetched from elsewhere, and /health, /teacher and the lessons answer.

Each page must also carry a viewport for phones (laid out at the phone's width, not shrunk). Used by
tests/browser/test_every_page.py (tuned and --no-tuning servers) and, as a script, by CI through
.ci/serve-smoke: on the lowest declared versions (Python 3.11) and on the installed wheel (Python 3.13,
newest Panel and Bokeh):

    python tests/smoke.py http://127.0.0.1:5006 [--teacher-password PW] [--as-student [--expect-gzip]]

`--as-student` sends X-Forwarded-For with a classroom address (the server needs --use-xheaders), so
scripts come the way a student's laptop gets them (gzipped). The explorables ask for a prediction
before their controls unlock: with the teacher password the checks open them through /teacher's signed
links without that step (as a teacher would); without it, each check commits a prediction first.
Prints one line per check and a closing 'N passed, M failed'; exits 1 if any failed. The expected
lessons are read from this repository's lessons/ folder, not from the server, so a server missing one
fails.
"""

from __future__ import annotations

import argparse
import base64
import html
import re
import sys
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from playwright.sync_api import Browser, Page, expect, sync_playwright

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
STUDENT_LAPTOP = {"X-Forwarded-For": "192.168.1.23"}
LESSONS = Path(__file__).resolve().parents[1] / "lessons"
# A bound on each wait, not a speed check. In CI the smoke runs at a lower priority beside the whole test
# suite on two cores: a page that loads in about a second alone has taken over 20 s there.
TIMEOUT_MS = 60_000
expect.set_options(timeout=TIMEOUT_MS)  # every check, not only page actions


def lessons() -> list[tuple[str, str]]:
    """(route, title) of every lesson in the repository, from each lesson.md's front matter."""
    found = []
    for path in sorted(LESSONS.glob("*/lesson.md")):
        head = path.read_text(encoding="utf-8").split("---")[1]
        fields = dict(re.findall(r"^(id|title): *(.+)$", head, re.M))
        found.append((f"/lessons/{fields['id']}", fields["title"].strip()))
    return found


def slider(page: Page, label: str):
    """The slider labelled `label`: a range input a browser-drawn page draws, or Panel's slider handle."""
    drawn = page.get_by_role("slider", name=label, exact=True)
    return drawn.or_(page.locator(".bk-input-group", has_text=label).get_by_role("slider")).first


def change_trace(page: Page) -> None:
    """Attention update scale to 0: the attention update row becomes zeros."""
    row = page.get_by_role("table", name=re.compile("One forward pass")).get_by_role(
        "row", name=re.compile("^Attention update")).locator("td:not(.empty)")
    expect(row.first).to_be_visible()
    expect(row).not_to_have_text(["0.000"] * 5)
    handle = slider(page, "Attention update scale")
    handle.focus()
    page.keyboard.press("Home")
    expect(row).to_have_text(["0.000"] * 5)


def change_floor(page: Page) -> None:
    """Next stage: the stepper moves from stage 1 to stage 2."""
    expect(page.get_by_text("Stage 1 / 8")).to_be_visible()
    page.get_by_role("button", name="Next stage ▶").click()
    expect(page.get_by_text("Stage 2 / 8")).to_be_visible()


def change_lab(page: Page) -> None:
    """Width 512: the parameter table is recounted for d = 512."""
    page.get_by_label("d (model width)").select_option(label="512")
    expect(page.get_by_role("table", name=re.compile(r"Parameters of one block \(d = 512"))).to_be_visible()


def change_race(page: Page) -> None:
    """One step: both models take their first step, and the page says so in words."""
    page.get_by_role("button", name="One step").click()
    expect(page.get_by_text(re.compile(r"^A: pre-norm: 1 step,"))).to_be_visible()


@dataclass(frozen=True)
class PageCheck:
    path: str
    shows: str  # text the rendered page must show (before any prediction)
    change: Callable[[Page], None] | None = None
    gated: bool = False  # an explorable: its controls unlock after a prediction, or from the teacher's link


def page_checks() -> list[PageCheck]:
    explorables = [
        PageCheck("/explorables/transformer-block-trace", "Attention update scale", change_trace, gated=True),
        PageCheck("/explorables/block-floor", "Next stage", change_floor, gated=True),
        PageCheck("/explorables/decoder-block-lab", "Shape of every tensor", change_lab, gated=True),
        PageCheck("/explorables/train-the-block", "The one difference", change_race, gated=True),
    ]
    return [PageCheck("/", "Pre-norm Transformer block trace"), *explorables,
            *(PageCheck(route, title) for route, title in lessons())]


def commit_prediction(page: Page) -> None:
    """Answer the page's prediction gate (its first answer) and wait until the prediction is final."""
    page.locator(".bt-predict").get_by_role("radio").first.check()
    page.get_by_role("button", name=re.compile(r"^Commit (prediction|bet)$")).click()
    expect(page.get_by_text("Your prediction (final)")).to_be_visible()


def visit(browser: Browser, base: str, check: PageCheck, headers: dict[str, str],
          expect_gzip: bool = False, link: str | None = None) -> list[str]:
    """Open one page in a fresh context; the problems found (empty when all is well).

    `link`: the teacher's link to a gated page, without the prediction step (else the check predicts first).
    With expect_gzip, BokehJS must have come gzipped (as the tuned server sends it to a classroom address).
    """
    problems: list[str] = []
    encodings: dict[str, str] = {}
    context = browser.new_context(viewport={"width": 1280, "height": 900}, extra_http_headers=headers)
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    host = urlsplit(base).hostname

    def on_request(request) -> None:
        parts = urlsplit(request.url)
        if parts.scheme not in ("data", "blob") and parts.hostname != host:
            problems.append(f"request left the server: {request.url}")

    def on_response(response) -> None:
        if response.url.split("?")[0].endswith("/bokeh.min.js"):
            encodings["bokeh.min.js"] = response.headers.get("content-encoding", "none")
        if response.status >= 400:
            problems.append(f"HTTP {response.status} for {response.url}")

    page.on("request", on_request)
    page.on("response", on_response)
    page.on("requestfailed", lambda r: problems.append(f"request failed: {r.url} ({r.failure})"))
    page.on("console", lambda m: problems.append(f"console error: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda err: problems.append(f"page error: {err}"))
    try:
        page.goto(base + (link or check.path))
        expect(page.locator(".bt-early")).to_be_hidden()  # the page is drawn: what follows checks the drawn page
        expect(page.get_by_text(check.shows).filter(visible=True).first).to_be_visible()
        if check.gated and link is None:
            commit_prediction(page)
        # The house stylesheet reached the page's shadow roots: its headings carry its colours.
        headings = page.locator(".bt-title:visible, .bt-h1:visible, .bt-h2:visible")
        expect(headings.first).to_be_visible()
        styled = headings.evaluate_all(
            "els => els.some(el => getComputedStyle(el).getPropertyValue('--bt-line').trim() !== '')")
        if not styled:
            problems.append("the house stylesheet (static/css/blocktrace.css) is not applied")
        viewport = page.evaluate("document.querySelector('meta[name=viewport]')?.content || ''")
        if "width=device-width" not in viewport:
            problems.append("no viewport meta: a phone lays the page out 980 px wide and shrinks it")
        problems += shown_before_the_scripts(browser, base + (link or check.path), headers, page)
        if check.change is not None:
            check.change(page)
        if expect_gzip and encodings.get("bokeh.min.js") != "gzip":
            problems.append(f"bokeh.min.js came with Content-Encoding {encodings.get('bokeh.min.js')}, not gzip")
    except AssertionError as error:
        problems.append(f"{type(error).__name__}: " + " | ".join(str(error).splitlines()[:6]))
    except Exception as error:  # a Playwright timeout or a closed page: report it, go on with the next page
        problems.append(f"{type(error).__name__}: " + " | ".join(str(error).splitlines()[:6]))
    finally:
        context.close()
    return problems


def shown_before_the_scripts(browser: Browser, url: str, headers: dict[str, str], drawn: Page) -> list[str]:
    """What the page's HTML shows before any script runs (a context with JavaScript off): its title, and the
    question the drawn page (`drawn`, where visit() has already seen that early block hidden) asks first."""
    problems = []
    context = browser.new_context(java_script_enabled=False, extra_http_headers=headers)
    try:
        page = context.new_page()
        page.goto(url)
        title = page.locator(".bt-early-title")
        if not title.is_visible():
            return ["no title in the page's HTML: a blank page until the scripts have run"]
        if title.inner_text() + " · blocktrace" != drawn.title():
            problems.append(f"the title shown before the scripts, {title.inner_text()!r}, is not the page's")
        early = page.locator(".bt-early-question")
        # The gate's question (a teacher's link has none: the early one is the route's, whatever the link)
        asked = drawn.locator(".bt-predict .bt-question:visible")
        if asked.count() and not early.is_visible():
            problems.append("the page's question is not shown before the scripts have run")
        if asked.count() and early.is_visible() and early.inner_text() != asked.first.inner_text():
            problems.append(f"the question shown before the scripts, {early.inner_text()!r}, is not the one "
                            f"the page asks first, {asked.first.inner_text()!r}")
    finally:
        context.close()
    return problems


def fetch(url: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as error:
        return error.code, ""


def basic_auth(password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"teacher:{password}".encode()).decode()}


def teacher_links(base: str, password: str | None) -> dict[str, str]:
    """route -> the teacher page's signed link that opens it without the prediction step ({} without one)."""
    if not password:
        return {}
    status, body = fetch(base + "/teacher", basic_auth(password))
    if status != 200:
        return {}
    found = re.findall(r'href="(/explorables/[a-z0-9-]+)\?([^"]*)"', body)
    return {route: f"{route}?{html.unescape(query)}" for route, query in found if "predict=off" in html.unescape(query)}


def http_checks(base: str, teacher_password: str | None) -> list[tuple[str, list[str]]]:
    results = []
    status, body = fetch(base + "/health")
    results.append(("/health", [] if (status, body) == (200, "ok\n") else [f"got {status} {body!r}"]))
    status, body = fetch(base + "/teacher")  # redirects followed: the login page
    results.append(("/teacher without the password", [] if status == 200 and "Teacher password" in body
                    else [f"got {status}, not the login page"]))
    if teacher_password:
        status, body = fetch(base + "/teacher", basic_auth(teacher_password))
        ok = status == 200 and "Classes:" in body
        results.append(("/teacher with the password", [] if ok else [f"got {status}"]))
    return results


def run(browser: Browser, base: str, *, as_student: bool = False, expect_gzip: bool = False,
        teacher_password: str | None = None) -> list[tuple[str, list[str]]]:
    """Every check against the server at `base`: (name, problems) per check."""
    headers = STUDENT_LAPTOP if as_student else {}
    links = teacher_links(base, teacher_password)
    results = []
    for check in page_checks():
        problems = []
        if check.gated and teacher_password and check.path not in links:
            problems.append("the teacher's page has no link to it without the prediction step")
        results.append((check.path, problems + visit(browser, base, check, headers, expect_gzip,
                                                     links.get(check.path))))
    return results + http_checks(base, teacher_password)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("--teacher-password")
    parser.add_argument("--as-student", action="store_true")
    parser.add_argument("--expect-gzip", action="store_true", help="fail unless BokehJS comes gzipped")
    args = parser.parse_args(argv)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        results = run(browser, args.url.rstrip("/"), as_student=args.as_student, expect_gzip=args.expect_gzip,
                      teacher_password=args.teacher_password)
        browser.close()
    failed = 0
    for name, problems in results:
        print(("ok    " if not problems else "FAIL  ") + name)
        for problem in problems:
            print("        " + problem)
        failed += bool(problems)
    print(f"smoke: {len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
