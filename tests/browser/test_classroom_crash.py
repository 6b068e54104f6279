"""A server killed with SIGKILL while students commit: every answer a student saw as final is stored.

tests/app/test_kill_final.py kills at several moments over the websocket; this is the browser's view:
the page says "final" only once the answer is stored, and the student whose commit was cut off finds,
after the restart, their stored answer final or an open gate, never a page that disagrees with the store.
"""

from __future__ import annotations

import signal

import pytest
from playwright.sync_api import Browser, expect

from blocktrace.app.classroom.identity import load_or_create_secret, verify
from blocktrace.app.classroom.store import EventStore, default_url
from blocktrace.explorables.transformer_block_trace.state import PREDICTION_CHOICES
from tests.browser.test_transformer_block_trace import VECTOR
from tests.conftest import start_server, stop_server

pytestmark = pytest.mark.browser
TRACE = "/explorables/transformer-block-trace?class=crash"
ANSWERS = ["Zero updates return the input unchanged", "Zero updates return a zero vector",
           "The input comes out unchanged either way", "The output is the normalised input"]


def test_acknowledged_predictions_survive_kill_9(browser: Browser, tmp_path) -> None:
    """Students commit, the server is killed mid-stream, and on restart every acknowledged prediction is there."""
    data = tmp_path / "data"
    server = start_server(tmp_path / "first.log", "--data-dir", str(data), "--teacher-password", "pw")
    acknowledged = []
    pages = []
    try:
        for n in range(len(ANSWERS)):  # a student per answer
            page = browser.new_context().new_page()
            pages.append(page)
            page.goto(server.url(TRACE))
            answer = ANSWERS[n % len(ANSWERS)]
            page.get_by_text(answer).click()
            page.get_by_role("button", name="Commit prediction").click()
            expect(page.get_by_text("Your prediction (final)")).to_be_visible()
            cookie = next(c["value"] for c in page.context.cookies() if c["name"] == "bt_learner")
            acknowledged.append((cookie, answer))
        # One more student presses Commit, and the server dies at once, acknowledged or not.
        last = browser.new_context().new_page()
        pages.append(last)
        last.goto(server.url(TRACE))
        last.get_by_text(ANSWERS[0]).click()
        last.get_by_role("button", name="Commit prediction").click()
        server.process.send_signal(signal.SIGKILL)
        server.process.wait(timeout=10)
        last_cookies = last.context.cookies()
        last_was_final = last.get_by_text("Your prediction (final)").is_visible()
        if not last_was_final:  # locked, not final: the experiment's controls never unlocked
            expect(last.get_by_label(VECTOR)).to_be_disabled()
    finally:
        for page in pages:
            page.context.close()
        if server.process.poll() is None:
            stop_server(server)
    restarted = start_server(tmp_path / "second.log", "--data-dir", str(data), "--teacher-password", "pw")
    try:
        secret = load_or_create_secret(data)
        store = EventStore(default_url(data))
        for cookie, answer in acknowledged:
            learner = verify(cookie, secret)
            stored = store.prediction("crash", learner, "transformer-block-trace/prediction")
            assert stored is not None, "an acknowledged prediction was lost"
            assert PREDICTION_CHOICES[stored.choice].startswith(answer)
        counts = store.distribution("crash", "transformer-block-trace/prediction")
        assert len(acknowledged) <= sum(counts.values()) <= len(acknowledged) + 1
        learner = verify(next(c["value"] for c in last_cookies if c["name"] == "bt_learner"), secret)
        stored = store.prediction("crash", learner, "transformer-block-trace/prediction")
        assert stored is not None or not last_was_final, "the last student saw final, and it was lost"
        store.close()
        again = browser.new_context()  # the last student comes back, with their cookie
        try:
            again.add_cookies(last_cookies)
            page = again.new_page()
            page.goto(restarted.url(TRACE))
            if stored is not None:  # their answer stands, final
                expect(page.get_by_text("Your prediction (final)")).to_be_visible()
                # The gate's own line (the choice's text is also its radio label, and the explorable's note)
                expect(page.locator(".bt-committed")).to_contain_text(PREDICTION_CHOICES[stored.choice])
            else:  # nothing stored: the gate is open again, and a commit now becomes final
                page.get_by_text(ANSWERS[1]).click()
                page.get_by_role("button", name="Commit prediction").click()
                expect(page.get_by_text("Your prediction (final)")).to_be_visible()
        finally:
            again.close()
    finally:
        stop_server(restarted)
    assert "Traceback" not in restarted.log()
