"""Every page, light and dark, checked by axe-core in Chromium, and laid out at phone, tablet and desktop widths."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Browser, Page, expect
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from tests.browser.teacher_login import logged_in_page
from tests.conftest import module_server

pytestmark = pytest.mark.browser
PASSWORD = "axe-check"
PAGES = [
    "/",
    "/explorables/transformer-block-trace",
    "/explorables/transformer-block-trace?predict=off",
    "/explorables/block-floor",
    "/explorables/block-floor?predict=off&stage=4&tracked=2",
    "/explorables/decoder-block-lab",
    "/explorables/decoder-block-lab?predict=off",
    "/explorables/train-the-block",
    "/lessons/transformer-block",
    "/lessons/block-floor",
    "/lessons/decoder-block",
    "/lessons/train-the-block",
]
WIDTHS = (390, 1024, 1440)
# Full-page screenshots of each width, to look at: kept in this folder when BLOCKTRACE_SCREENS names one
# (a 390 px screenshot of the decoder lab is about 20,000 px tall; CI takes none).
SCREENS = Path(os.environ["BLOCKTRACE_SCREENS"]) if os.environ.get("BLOCKTRACE_SCREENS") else None


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    yield from module_server(tmp_path_factory, "a11y", "--teacher-password", PASSWORD)


def _url(site, path: str) -> str:
    """The page's address; a predict=off page as the teacher's signed link (a typed one keeps the gate)."""
    return site.url(site.teacher_link(path) if "predict=off" in path else path)


def _open(browser: Browser, url: str, width: int = 1280, **context) -> Page:
    page = browser.new_context(viewport={"width": width, "height": 900}, **context).new_page()
    page.goto(url, wait_until="networkidle")
    page.locator(".bt-header, .bt-title, .bt-card").first.wait_for()
    expect(page.locator(".bt-figure-pending")).to_have_count(0)  # figures sent after the page is up are in too
    return page


def _serious(page: Page) -> list[str]:
    result = Axe().run(page)
    return [f"{v['id']} ({v['impact']}): {v['help']} — {[n['target'] for n in v['nodes'][:3]]}"
            for v in result.response["violations"] if v["impact"] in ("serious", "critical")]


@pytest.mark.parametrize("path", PAGES)
def test_light_page_passes_axe_and_fits_every_width(browser: Browser, site, path: str) -> None:
    """No serious axe violation; at 1440, 1024 and 390 px nothing forces sideways scrolling (screenshots kept
    with BLOCKTRACE_SCREENS)."""
    page = _open(browser, _url(site, path), WIDTHS[-1])
    assert _serious(page) == []
    name = path.strip("/").replace("/", "_").replace("?", "_").replace("&", "_").replace("=", "-") or "index"
    for width in reversed(WIDTHS):
        page.set_viewport_size({"width": width, "height": 900})
        page.wait_for_function(f"document.scrollingElement.clientWidth === {width}")
        if SCREENS is not None:
            SCREENS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=SCREENS / f"{name}-{width}.png", full_page=True)
        fits_within(page, width)
    page.context.close()


def fits_within(page: Page, width: int) -> None:
    """Once the page has laid itself out again for the new width (Bokeh re-lays out on its resize observer,
    after the viewport has changed), nothing is wider than the window."""
    try:
        page.wait_for_function(f"document.scrollingElement.scrollWidth <= {width}", timeout=10_000)
    except PlaywrightTimeout:
        pytest.fail(f"wider than {width} px: {page.evaluate('document.scrollingElement.scrollWidth')} px")


# A phone as Chromium emulates one: a mobile viewport honours the page's <meta name="viewport">, and without it
# lays the page out 980 px wide and shrinks it to the screen (what a narrow desktop window does not show).
PHONE = {"is_mobile": True, "has_touch": True, "device_scale_factor": 3}


@pytest.mark.parametrize("path", [path for path in PAGES if "predict=off" not in path and "&" not in path])
def test_page_on_a_phone_is_laid_out_at_its_width(browser: Browser, site, path: str) -> None:
    """On a 390 px phone the page is laid out 390 px wide at scale 1 (body text at its own size), nothing
    forces sideways scrolling, and the text is no smaller than 14 px."""
    page = browser.new_context(viewport={"width": 390, "height": 844}, **PHONE).new_page()
    page.goto(_url(site, path), wait_until="networkidle")
    page.locator(".bt-header, .bt-title, .bt-card").first.wait_for()
    assert page.evaluate("[window.innerWidth, window.visualViewport.scale]") == [390, 1]
    fits_within(page, 390)
    smallest = page.evaluate("""() => Math.min(...[...document.querySelectorAll('p, li, label, .bt-lead')]
        .filter(e => e.offsetParent !== null && e.textContent.trim())
        .map(e => parseFloat(getComputedStyle(e).fontSize)))""")
    assert smallest >= 14, f"body text {smallest} px on a phone"
    page.context.close()


@pytest.mark.parametrize("path", PAGES)
def test_dark_page_passes_axe(browser: Browser, site, path: str) -> None:
    """The dark theme keeps every contrast and name axe checks."""
    joiner = "&" if "?" in path else "?"
    page = _open(browser, _url(site, f"{path}{joiner}theme=dark"))
    assert _serious(page) == []
    page.context.close()


def test_teacher_page_has_no_serious_axe_violations(browser: Browser, site) -> None:
    """The teacher's dashboard passes axe too."""
    page = logged_in_page(browser, site.url("/teacher"), PASSWORD)
    page.locator("main").wait_for()
    assert _serious(page) == []
    page.context.close()
