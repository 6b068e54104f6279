"""Embedding in other pages: an iframe and Bokeh's server_document script tag, from a page on another port."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest
from bokeh.embed import server_document
from playwright.sync_api import Browser, expect

from blocktrace.explorables.components.embed import iframe_snippet
from tests.conftest import free_port, start_server, stop_server

pytestmark = pytest.mark.browser
ROUTE = "/explorables/transformer-block-trace"


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
    (folder / "iframe.html").write_text(
        '<!doctype html><html><head><title>Host</title><link rel="icon" href="data:,"></head><body>'
        f"<h1>Course page</h1>{iframe_snippet(base, ROUTE, state, 'Block trace')}</body></html>")
    typed = {"attention_scale": "0", "predict": "off"}  # what an author could type: the gate stays
    (folder / "gated.html").write_text(
        '<!doctype html><html><head><title>Host</title><link rel="icon" href="data:,"></head><body>'
        f"<h1>Course page</h1>{iframe_snippet(base, ROUTE, typed, 'Block trace')}</body></html>")
    script = server_document(url=f"{base}{ROUTE}", arguments={**state, "embed": "1"})
    (folder / "script.html").write_text(
        '<!doctype html><html><head><title>Host</title><link rel="icon" href="data:,"></head><body>'
        f'<h1>Course page</h1><div id="embedded">{script}</div></body></html>')
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


def test_iframe_embed_renders_and_responds(browser: Browser, host_page: str) -> None:
    """The iframe snippet shows the explorable with the link's state, and a control still works inside it."""
    page = browser.new_page()
    errors, outside = _watch(page)
    page.goto(f"{host_page}/iframe.html")
    frame = page.frame_locator("iframe")
    table = frame.locator("table.stage-table")
    expect(table.locator("tr", has_text="Attention update").locator("td.num").first).to_have_text("0.000")
    frame.get_by_role("button", name="Constant 2, 2, 2, 2").click()
    expect(table.locator("tr", has_text="Input residual stream").locator("td.num").first).to_have_text("+2.000")
    expect(frame.locator(".bk-Canvas")).to_have_count(3)  # the plots, sent once the page is up
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
    expect(embedded.locator(".bk-Canvas")).to_have_count(3)  # the plots, sent once the page is up
    assert page.url == f"{host_page}/script.html", "the embed must not rewrite the host page's address"
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
