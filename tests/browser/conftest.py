"""Playwright with Debian's Chromium: one browser for the session, a fresh context per page opened.

Every opened page records its requests, console errors, page errors and dialogs, so a test can
assert that nothing left the server and nothing went wrong.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Browser, Page, WebSocket, expect, sync_playwright

from tests.smoke import CHROMIUM, CHROMIUM_ARGS  # one launch set-up for the suite and the smoke script

LOCAL_HOSTS = {"127.0.0.1", "localhost"}

expect.set_options(timeout=15_000)  # a 2-core machine serving several sessions at once


@pytest.fixture(scope="package", autouse=True)
def servers_start_without_warm_up() -> Iterator[None]:
    """The servers these tests start skip Panel's start-up build of every page (BLOCKTRACE_WARM_UP=0): it is 6 s
    of each of their starts, and the browser builds what it opens. (tests/app keeps it: its Python clients
    read the documents with the model types the warm-up registered.)"""
    patch = pytest.MonkeyPatch()
    patch.setenv("BLOCKTRACE_WARM_UP", "0")
    yield
    patch.undo()


@dataclass
class Opened:
    """A page in its own browser context (its own cookies: a separate session) and what it recorded."""

    page: Page
    requests: list[str] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)
    sent: list[str | bytes] = field(default_factory=list)  # with record=True: the page's HTML, then each frame
    sockets: list[WebSocket] = field(default_factory=list)  # with record=True

    def outside_requests(self) -> list[str]:
        """Requests to anything but this machine (data: and blob: URLs never leave the page)."""
        return [u for u in self.requests
                if urlsplit(u).scheme not in ("data", "blob") and urlsplit(u).hostname not in LOCAL_HOSTS]

    def assert_clean(self) -> None:
        assert self.outside_requests() == [], "requests left the server"
        assert self.console_errors == [], "console errors"
        assert self.dialogs == [], "a dialog opened"


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """One Chromium per test module. Playwright's sync API keeps its event loop marked as running in this
    thread while it is open, so a later test's `asyncio.run()` (the unit tests) would fail: it closes with
    the module."""
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield chromium
        chromium.close()


@pytest.fixture
def open_page(browser: Browser, server) -> Iterator[Callable[..., Opened]]:
    """open_page(path) -> Opened: a new context (a new server session) on the server's `path`.

    open_page(path, teacher_link=True) opens it as the teacher's signed link without the prediction step.
    open_page(path, record=True) keeps everything the server sent it in `sent`: its HTML and every frame its
    websocket received, in order.
    """
    contexts = []

    def open_(path: str, teacher_link: bool = False, record: bool = False) -> Opened:
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        contexts.append(context)
        page = context.new_page()
        opened = Opened(page)
        page.on("request", lambda r: opened.requests.append(r.url))
        page.on("websocket", lambda ws: opened.requests.append(ws.url))
        page.on("console", lambda m: opened.console_errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda err: opened.console_errors.append(f"page error: {err}"))

        def on_dialog(dialog) -> None:
            opened.dialogs.append(f"{dialog.type}: {dialog.message}")
            dialog.dismiss()

        page.on("dialog", on_dialog)
        if record:
            def on_socket(ws: WebSocket) -> None:
                opened.sockets.append(ws)
                ws.on("framereceived", lambda payload: opened.sent.append(payload))

            page.on("websocket", on_socket)
        response = page.goto(server.url(server.teacher_link(path) if teacher_link else path))
        if record and response is not None:
            opened.sent.insert(0, response.text())
        return opened

    yield open_
    for context in contexts:
        context.close()
