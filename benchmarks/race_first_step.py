"""Play to the first step on the page: how long a student waits, in headless Chromium, after pressing Play on
train-the-block until the page shows the race's first step (issue 38: it took 2.4-5 s; the aim is 0.5 s).

usage: python benchmarks/race_first_step.py [--servers 3] [--pages 3] [--think 2] [--query QUERY]

Starts --servers fresh `python -m blocktrace.app.cli serve` in turn (its default settings: one race worker per
core), and on each opens --pages pages of /explorables/train-the-block?QUERY one after the other (each in a
fresh browser context, closed before the next). On each page, as a student would: pick "A reaches 90 % ...",
press "Commit prediction", read for --think seconds, press Play. Measured with the page's own clock
(performance.now()): from the click on Play to the first change in the page's text that says "Step N of 1,000."
(a MutationObserver on every shadow root of the page, set up before the click), that is, the first step shown.

Also noted, in the page's clock: when the websocket message that carries that step arrives (a wrapper of the
page's WebSocket, installed before the page loads): up to then the time is the server's and the network's, after
it the browser's, drawing the step (on a student's laptop, not on the server's cores).

Printed: the medians (and each "shown" sample) for a fresh server's first page, whose race may wait for the
server's training workers to start, and for the later pages, whose workers are running; and over all. This prints
figures; it never asserts them. Other work on the machine (2 cores here, the browser among it) slows every
figure: compare runs made side by side.

Measured 2026-12-07 on this project's 2-core machine with other work on it (load average 6-10), --servers 3
--pages 3 --think 2. Before (the page as issue 38 found it): the step shown after a median 3.79 s (a fresh
server's first page 3.89 s, later pages 2.72 s), its message arriving after 3.11 s: a worker started at the first
Play and imported Panel and Bokeh, a race was built and its first slice asked for at the next tick, and the three
figures were laid out in the browser with the first step. After (workers started when a page opens, without
Panel; the race built and its first step taken at the commit and shown at Play at once; the figures laid out,
hidden, at the commit): 0.15 s (0.10 s / 0.16 s), the message at 0.11 s; with --think 0, 0.11 s.
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import sys
import tempfile
from pathlib import Path

from classroom import start_server, stop_server  # the server start and stop the other benchmarks use
from playwright.sync_api import expect, sync_playwright

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
ROUTE = "/explorables/train-the-block"
ANSWER = "A reaches 90 % held-out accuracy first."

# Before the page loads: note when a websocket message that carries a step's "Step N of 1,000." arrives (the
# server's work and the network are then over; the browser's drawing of it is not).
ARRIVAL = r"""(() => {
  const Native = window.WebSocket;
  window.WebSocket = function (...args) {
    const ws = new Native(...args);
    ws.addEventListener("message", (event) => {
      const seen = window.__firstStep;
      if (seen && seen.click !== null && seen.arrived === null && typeof event.data === "string"
          && /Step [\d,]+ of [\d,]+\./.test(event.data)) seen.arrived = performance.now();
    });
    return ws;
  };
  window.WebSocket.prototype = Native.prototype;
  Object.assign(window.WebSocket, {CONNECTING: 0, OPEN: 1, CLOSING: 2, CLOSED: 3});
})();"""

# Watches every shadow root for the progress line; records the click on Play and the first "Step N of 1,000."
WATCH = r"""() => {
  const seen = {click: null, arrived: null, step: null};
  window.__firstStep = seen;
  const pattern = /Step [\d,]+ of [\d,]+\./;
  const check = () => { if (seen.click !== null && seen.step === null) seen.step = performance.now(); };
  const observe = (root) => {
    new MutationObserver((records) => {
      for (const r of records) {
        const text = r.type === "characterData" ? r.target.data : r.target.textContent;
        if (text && pattern.test(text)) { check(); return; }
      }
    }).observe(root, {subtree: true, childList: true, characterData: true});
    for (const el of root.querySelectorAll("*")) if (el.shadowRoot) observe(el.shadowRoot);
  };
  observe(document);
  document.addEventListener("click", () => { if (seen.click === null) seen.click = performance.now(); }, true);
}"""


def one_page(browser, base: str, query: str, think: float) -> tuple[float, float]:
    """Seconds from the click on Play to the message with the first step, and to that step shown, on a new page."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.add_init_script(ARRIVAL)
    try:
        page = context.new_page()
        page.goto(f"{base}{ROUTE}?{query}", wait_until="networkidle")
        page.get_by_label(ANSWER).check()
        page.get_by_role("button", name="Commit prediction").click()
        play = page.get_by_role("button", name="Play")
        expect(play).to_be_enabled(timeout=60_000)
        page.wait_for_timeout(1000 * think)  # the student reads before pressing Play
        page.evaluate(WATCH)
        play.click()
        page.wait_for_function("() => window.__firstStep.step !== null", timeout=120_000)
        seen = page.evaluate("() => window.__firstStep")
        return (seen["arrived"] - seen["click"]) / 1000, (seen["step"] - seen["click"]) / 1000
    finally:
        context.close()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--servers", type=int, default=3, help="fresh servers, one after the other (default 3)")
    p.add_argument("--pages", type=int, default=3, help="pages opened on each server, one after the other")
    p.add_argument("--think", type=float, default=2.0,
                   help="seconds between the commit and Play, as a student reads (default 2)")
    p.add_argument("--query", default="", help="the race's set-up in the address (default: the page's own)")
    p.add_argument("--url", help="an already running server, e.g. http://127.0.0.1:5006 (default: start --servers)")
    a = p.parse_args()
    load = os.getloadavg()
    first, later = [], []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        for _ in range(0 if a.url else a.servers):
            with tempfile.TemporaryDirectory() as folder:
                server = start_server(Path(folder), 1, secrets.token_urlsafe(32), None)
                try:
                    base = f"http://127.0.0.1:{server.port}"
                    for i in range(a.pages):
                        (first if i == 0 else later).append(one_page(browser, base, a.query, a.think))
                finally:
                    stop_server(server)
        for _ in range(a.pages if a.url else 0):
            later.append(one_page(browser, a.url.rstrip("/"), a.query, a.think))
        browser.close()
    print(f"Play -> first step shown, train-the-block{'?' + a.query if a.query else ''} (the default race: "
          f"{'as set' if a.query else 'copy, pre-norm vs post-norm, 12 floors'}), headless Chromium, "
          f"{a.think:g} s between the commit and Play")
    print(f"machine: {os.cpu_count()} cores, load average {load[0]:.2f} before, {os.getloadavg()[0]:.2f} after")
    print(f"{'':<28} {'message with it':>22}   {'shown':>22}")
    for name, samples in (("a fresh server's first page", first), ("later pages", later),
                          ("all", first + later)):
        if samples:
            columns = []
            for part in (0, 1):
                values = [sample[part] for sample in samples]
                columns.append(f"median {statistics.median(values):5.2f} s (n={len(values)})")
            print(f"{name:<28} {columns[0]:>22}   {columns[1]:>22}   each shown: "
                  + " ".join(f"{shown:.2f}" for _, shown in samples))
    return 0


if __name__ == "__main__":
    sys.exit(main())
