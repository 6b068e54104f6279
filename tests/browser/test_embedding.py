"""Embedding in other pages: an iframe and Bokeh's server_document script tag, from a page on another port.

The host pages are served from 127.0.0.1:HOST_PORT; the server accepts localhost:HOST_PORT only, so the
same files opened as http://127.0.0.1:HOST_PORT/… are pages the server refuses.
"""

from __future__ import annotations

import http.server
import re
import threading
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest
from playwright.sync_api import Browser, expect

from blocktrace.explorables.components.embed import iframe_snippet, script_snippet
from tests.conftest import free_port, start_server, stop_server

pytestmark = pytest.mark.browser
ROUTE = "/explorables/transformer-block-trace"
# The explorables whose first screen, embedded, holds the controls, the floor diagram and the first table.
# (The decoder lab's diagram belongs to its second panel, with that panel's own controls and table.)
FIRST_SCREEN = ("/explorables/transformer-block-trace", "/explorables/block-floor")
RACE = "/explorables/train-the-block"


@pytest.fixture(scope="module")
def host_port() -> int:
    return free_port()


@pytest.fixture(scope="module")
def embed_server(tmp_path_factory, host_port: int):
    """Our server, told to accept websockets from the host page's origin."""
    server = start_server(tmp_path_factory.mktemp("embed") / "server.log",
                          "--allow-websocket-origin", f"localhost:{host_port}")
    yield server
    stop_server(server)


@pytest.fixture(scope="module")
def host_page(tmp_path_factory, host_port: int, embed_server) -> Iterator[str]:
    """A plain HTML page served from another port, embedding the explorable both ways."""
    folder: Path = tmp_path_factory.mktemp("host")
    base = f"http://localhost:{embed_server.port}"
    state = {"attention_scale": "0", **embed_server.predict_off(ROUTE)}  # as the teacher's page gives it
    typed = {"attention_scale": "0", "predict": "off"}  # what an author could type: the gate stays
    pages = {
        "iframe.html": iframe_snippet(base, ROUTE, state, "Block trace"),
        "gated.html": iframe_snippet(base, ROUTE, typed, "Block trace"),
        "script.html": f'<div id="embedded">{script_snippet(base, ROUTE, state)}</div>',
        "both.html": script_snippet(base, ROUTE, state) + iframe_snippet(base, ROUTE, state, "Block trace"),
        **{f"first-screen-{route.rsplit('/', 1)[1]}.html": iframe_snippet(base, route, embed_server.predict_off(route),
                                                                          "Explorable")
           for route in FIRST_SCREEN},
        "race.html": iframe_snippet(base, RACE, {"floors": "2", "vs": "depth"}, "Race"),  # as an author types it
    }
    for name, body in pages.items():  # a course page: its text in a 900 px column
        (folder / name).write_text(
            '<!doctype html><html><head><title>Host</title><link rel="icon" href="data:,"></head><body>'
            f'<main style="max-width: 900px; margin: 0 auto"><h1>Course page</h1>{body}</main></body></html>')
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", host_port), partial(_QuietHandler, directory=str(folder)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://localhost:{host_port}"
    httpd.shutdown()
    httpd.server_close()
    thread.join()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


def _watch(page):
    errors, outside = [], []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: outside.append(r.url)
            if not r.url.startswith(("http://localhost", "http://127.0.0.1", "ws://", "data:", "blob:")) else None)
    return errors, outside


# In the embedded page: whether the iframe is as tall as the explorable (Panel's root column) within 3 px,
# with nothing to scroll inside, and taller (more) or shorter (not more) than `than` px.
FITS = """([more, than]) => {
  const root = document.querySelector("body > .bk-panel-models-layout-Column");
  if (!root) return false;
  const height = window.innerHeight, content = root.getBoundingClientRect().bottom + window.scrollY;
  const fits = Math.abs(height - content) <= 3 && document.documentElement.scrollHeight <= height + 1;
  return fits && (more ? height > than : height < than);
}"""

# On the host page: messages that must not size anything, then a last message once they have all arrived:
# one from the page itself, one from a sandboxed frame (origin "null") marked as an embed of ours.
SPOOF = """async () => {
  const ours = document.querySelector("iframe[data-blocktrace-embed]");
  const spoof = document.createElement("iframe");
  spoof.setAttribute("data-blocktrace-embed", "iframe");
  spoof.setAttribute("sandbox", "allow-scripts");
  spoof.style.height = "50px";
  spoof.srcdoc = "<script>parent.postMessage({type: 'blocktrace:height', height: 333, id: 'x'}, '*');" +
                 "parent.postMessage('spoofed', '*');<" + "/script>";
  const arrived = new Promise((resolve) => addEventListener("message", (e) => e.data === "spoofed" && resolve()));
  const before = ours.style.height;
  window.postMessage({type: "blocktrace:height", height: 222, id: "x"}, "*");
  document.body.append(spoof);
  await arrived;
  return {before, after: ours.style.height, spoof: spoof.style.height};
}"""


def test_iframe_embed_renders_responds_and_fits_its_content(browser: Browser, host_page: str) -> None:
    """The iframe snippet shows the explorable with the link's state, a control still works inside it, and the
    iframe takes the explorable's height, growing and shrinking with it; messages from another window or
    origin size nothing."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors, outside = _watch(page)
    page.goto(f"{host_page}/iframe.html")
    frame = page.frame_locator("iframe")
    table = frame.locator("table.stage-table")
    expect(table.locator("tr", has_text="Attention update").locator("td.num").first).to_have_text("0.000")
    frame.get_by_role("button", name="Constant 2, 2, 2, 2").click()
    expect(table.locator("tr", has_text="Input residual stream").locator("td.num").first).to_have_text("+2.000")
    expect(frame.locator("figure.dv-chart svg[role=img]")).to_have_count(3)  # the charts, drawn in the browser
    inner = page.locator("iframe").element_handle().content_frame()
    inner.wait_for_function(FITS, arg=[True, 1500])  # the whole explorable, far taller than the snippet's 700 px
    tall = inner.evaluate("window.innerHeight")
    field = frame.get_by_label("Input vector")
    field.fill("1, abc")
    field.press("Enter")
    expect(frame.get_by_text("Could not use this vector")).to_be_visible()
    inner.wait_for_function(FITS, arg=[True, tall])  # the error's line: taller
    frame.get_by_role("button", name="Constant 2, 2, 2, 2").click()
    expect(frame.get_by_text("Could not use this vector")).to_have_count(0)
    inner.wait_for_function(FITS, arg=[False, tall + 1])  # and back
    spoofed = page.evaluate(SPOOF)
    assert spoofed["after"] == spoofed["before"] != "" and spoofed["spoof"] == "50px", spoofed
    assert errors == [] and outside == []
    page.close()


def test_script_tag_embed_renders_and_responds(browser: Browser, host_page: str) -> None:
    """The server_document snippet renders inside the host page itself, loads only from our server, and responds."""
    page = browser.new_page()
    errors, outside = _watch(page)
    page.goto(f"{host_page}/script.html")
    embedded = page.locator("#embedded")
    table = embedded.locator("table.stage-table")
    expect(table.locator("tr", has_text="Attention update").locator("td.num").first).to_have_text("0.000")
    embedded.get_by_role("button", name="Constant 2, 2, 2, 2").click()
    expect(table.locator("tr", has_text="Input residual stream").locator("td.num").first).to_have_text("+2.000")
    expect(embedded.locator("figure.dv-chart svg[role=img]")).to_have_count(3)  # the charts, drawn in the browser
    assert page.url == f"{host_page}/script.html", "the embed must not rewrite the host page's address"
    expect(embedded.locator("[data-blocktrace-embed]")).to_have_attribute("data-blocktrace-checked", "allowed")
    expect(page.locator(".blocktrace-embed-refused")).to_have_count(0)
    assert errors == [] and outside == []
    page.close()


def test_an_embed_without_the_teachers_signature_asks_for_a_prediction(browser: Browser, host_page: str) -> None:
    """An iframe with a typed predict=off shows the gate and no trace until a prediction is committed."""
    page = browser.new_page()
    errors, outside = _watch(page)
    page.goto(f"{host_page}/gated.html")
    frame = page.frame_locator("iframe")
    expect(frame.get_by_role("button", name="Commit prediction")).to_be_visible()
    expect(frame.get_by_text("once you commit your prediction").first).to_be_visible()
    expect(frame.locator("table.stage-table")).to_have_count(0)
    frame.locator(".bt-predict").get_by_role("radio").nth(1).check()
    frame.get_by_role("button", name="Commit prediction").click()
    table = frame.locator("table.stage-table")
    expect(table.locator("tr", has_text="Attention update").locator("td.num").first).to_have_text("0.000")
    assert errors == [] and outside == []
    page.close()


def test_a_page_the_server_refuses_says_which_option_to_add(browser: Browser, host_page: str,
                                                           host_port: int) -> None:
    """From an origin the server does not accept, both embeds are replaced by a message naming the
    --allow-websocket-origin the server needs, instead of a blank space; still nothing from elsewhere."""
    page = browser.new_page()
    _, outside = _watch(page)  # the refused websocket and frame are console errors, as they should be
    page.goto(f"{host_page.replace('localhost', '127.0.0.1')}/both.html")
    refusals = page.get_by_role("alert")
    expect(refusals).to_have_count(2)
    for n in range(2):
        expect(refusals.nth(n)).to_contain_text(f"blocktrace serve --allow-websocket-origin 127.0.0.1:{host_port}")
    expect(page.locator("[data-blocktrace-embed]").first).to_have_attribute("data-blocktrace-checked", "refused")
    expect(page.locator("iframe[data-blocktrace-embed]")).to_be_hidden()
    expect(page.locator("table.stage-table")).to_have_count(0)
    assert outside == []
    page.close()


def test_the_embed_dialog_copies_each_snippet(browser: Browser, embed_server) -> None:
    """The Embed dialog shows both snippets full width, and each Copy button (by mouse or keyboard) puts
    its snippet on the clipboard and then says Copied."""
    context = browser.new_context(viewport={"width": 1280, "height": 900},
                                  permissions=["clipboard-read", "clipboard-write"])
    page = context.new_page()
    errors, outside = _watch(page)
    page.goto(embed_server.url(ROUTE))
    page.get_by_role("button", name="Embed", exact=True).click()
    dialog = page.get_by_role("dialog", name="Embed this explorable")
    expect(dialog).to_be_visible()
    iframe_text = dialog.get_by_role("textbox", name="The iframe snippet")
    expect(iframe_text).to_have_value(re.compile(r'^<iframe src="http://127\.0\.0\.1:\d+/explorables/.*'
                                                 r'data-blocktrace-embed="iframe".*embed-host\.js" defer></script>$',
                                                 re.DOTALL))
    script_text = dialog.get_by_role("textbox", name="The script-tag snippet")
    boxes = [box.evaluate("t => [t.clientWidth, t.scrollWidth]") for box in (iframe_text, script_text)]
    assert all(width >= 700 and scrolled <= width for width, scrolled in boxes), boxes  # wide, nothing cut off
    dialog.get_by_role("button", name="Copy the iframe snippet").click()
    expect(dialog.get_by_role("button", name="Copied the iframe snippet")).to_be_visible()
    assert page.evaluate("navigator.clipboard.readText()") == iframe_text.input_value()
    dialog.get_by_role("button", name="Copy the script-tag snippet").focus()
    page.keyboard.press("Enter")
    expect(dialog.get_by_role("button", name="Copied the script-tag snippet")).to_be_visible()
    copied = page.evaluate("navigator.clipboard.readText()")
    assert copied == script_text.input_value()
    assert copied.startswith('<div data-blocktrace-embed="script"') and "/autoload.js?" in copied
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    assert errors == [] and outside == []
    context.close()


@pytest.mark.parametrize("route", FIRST_SCREEN)
def test_an_embed_shows_the_controls_the_diagram_and_the_first_table_in_its_first_screen(
        browser: Browser, host_page: str, route: str) -> None:
    """In a 900 px course column seen 700 px at a time, the iframe scrolled to the top of the screen shows
    the whole Controls card, the whole floor diagram and the first table's heading and first two rows."""
    page = browser.new_page(viewport={"width": 900, "height": 700})
    errors, outside = _watch(page)
    page.goto(f"{host_page}/first-screen-{route.rsplit('/', 1)[1]}.html")
    frame = page.frame_locator("iframe")
    rows = frame.locator("table.bt-table").first.locator("tbody tr")
    expect(rows.first).to_be_visible()
    page.locator("iframe").evaluate("f => f.scrollIntoView({block: 'start'})")
    top = page.locator("iframe").bounding_box()["y"]
    controls = frame.locator(".bt-card").filter(has=frame.get_by_role("heading", name="Controls", exact=True))
    shown = {"controls": controls, "diagram": frame.locator("svg.fd-svg"),
             "table heading": frame.locator("table.bt-table").first.locator("caption"),
             "first row": rows.nth(0), "second row": rows.nth(1)}
    for name, locator in shown.items():
        expect(locator).to_have_count(1)
        box = locator.bounding_box()
        assert top <= box["y"] and box["y"] + box["height"] <= top + 700, (name, box, top)
    assert errors == [] and outside == []
    page.close()


def test_an_embedded_race_asks_first_then_plays_and_fits(browser: Browser, host_page: str) -> None:
    """The race in an author's iframe keeps its gate; after the commit it plays inside the frame, its curves and
    the look inside the models arrive, and the iframe grows to hold them; nothing is loaded from elsewhere."""
    page = browser.new_page(viewport={"width": 900, "height": 700})
    errors, outside = _watch(page)
    page.goto(f"{host_page}/race.html")
    frame = page.frame_locator("iframe")
    expect(frame.get_by_role("button", name="Play")).to_be_disabled()
    frame.get_by_label("A reaches 90 % held-out accuracy first.").check()
    frame.get_by_role("button", name="Commit prediction").click()
    frame.get_by_role("button", name="Play").click()
    expect(frame.get_by_text(re.compile(r"^A: 2 floors: .*held-out accuracy"))).to_be_visible(timeout=60_000)
    expect(frame.get_by_text(re.compile(r"^A: 2 floors, \d+ of \d+ right at step"))).to_be_visible()
    frame.get_by_role("button", name="Pause").click()  # the same button, saying what a press does now
    expect(frame.get_by_role("status").filter(has_text="Paused.")).to_be_visible()
    inner = page.locator("iframe").element_handle().content_frame()
    inner.wait_for_function(FITS, arg=[True, 2000])  # curves, maps, diagram and table: far taller than 700 px
    assert errors == [] and outside == []
    page.close()
