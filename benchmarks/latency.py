"""Latency of the block-trace explorable in headless Chromium: control change -> updated value on the page.

usage: python benchmarks/latency.py [--changes 30] [--loads 5]
                                   [--url URL | --compare-tuning | --compare-diagram | --compare-without PATCH]
                                   [--wifi MBIT] [--no-baseline]

Starts `python -m blocktrace.app.cli serve` on a free port (unless --url is given), opens the
explorable through the teacher's signed link without the prediction step (the server started here gets
its secret from this script; with --url, pass that server's link from /teacher as --link) and
measures, with the page's own clock (performance.now()):

- interactive: navigation start -> the Input vector field enabled and visible with the stage table drawn
  (each load in a fresh browser context, so nothing is cached; the next load starts once this page
  has drawn its figures, which come after it is interactive);
- per change: the keydown that changes a control -> the stage table's output row showing a new value
  (a MutationObserver on the table's shadow root), and -> the next animation frame after it;
- the baseline (issue 39): the same "interactive" of an empty Panel page, one text field and one table
  (benchmarks/empty_panel_page.py, served by plain `panel serve` started here), its loads alternating with
  the explorable's; the explorable's median is printed as a ratio to the empty page's (--no-baseline: not);
- title and question visible: navigation start -> the page's title (h1) and its first question (the
  prediction gate's, or a checkpoint's) laid out with their text, not hidden (polled every frame, as for
  interactive), on the student's page of the first lesson and of the block trace (not the teacher's link:
  it has no question), each load in a fresh context; printed with how far down the page the question is.

--wifi MBIT loads the pages through Chromium's network throttling (MBIT Mbit/s each way, 20 ms
round trip), as one student's share of a classroom access point might be; changes are then measured
on that network too. The server started here then reads the client's address from X-Forwarded-For
(--use-xheaders) and the browser sends a classroom address, so the scripts come gzipped as they do
to a student's laptop (with --url, that is up to the server given).

The slider is moved with the arrow keys on its handle; the vector field is filled and committed with
Tab (leaving the field). Target from issue 3: median <= 80 ms, p95 <= 150 ms.

--compare-tuning starts two servers from this Python, one as usual (tuned) and one with --no-tuning
(stock Panel, Bokeh and Tornado), and measures both in one browser, interleaved so that the machine's
drift in speed falls on both alike: the loads alternate (empty Panel page, tuned, stock, empty, ...), and
so do the changes, in blocks of a few per server, and the title loads. It prints the median and p95 of
each figure for both, the ratio stock/tuned of the medians, and each one's ratio to the empty page.

--compare-diagram does the same with two servers that differ only in the floor diagram
(explorables/components/floor_diagram.py): one as usual, one started with BLOCKTRACE_DIAGRAM=off, whose
views are built without it. It prints the ratio without/with, and the bytes the diagram adds to the page's
document (its model in a PULL-DOC of the page, as the browser receives it).

--compare-without PATCH[,PATCH] does the same with the tuned server and one started with
BLOCKTRACE_TUNING_WITHOUT=PATCH (app/tuning without those patches): what they buy, figure by figure.
"""

from __future__ import annotations

import argparse
import os
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from urllib.parse import urlencode

import numpy as np
from playwright.sync_api import Browser, BrowserContext, Page, sync_playwright

ROOT = Path(__file__).resolve().parents[1]
PATH = "/explorables/transformer-block-trace"
EMPTY_APP = ROOT / "benchmarks" / "empty_panel_page.py"  # the baseline, served by plain `panel serve`
EMPTY_NAME = "empty Panel page"
SECRET = secrets.token_hex(32)  # the servers started here sign with it (BLOCKTRACE_SECRET)


def title_routes() -> list[str]:
    """The pages timed to their title and question: the first lesson's and the block trace's, as a student opens
    them (with the prediction gate, whose question is the one to see)."""
    from blocktrace.app.lessons.loading import load_lessons

    return [load_lessons()[0].route, PATH]


def teacher_route() -> str:
    """The explorable as the teacher's link without the prediction step, for the servers started here."""
    from blocktrace.app.server.predict_links import teacher_arguments

    return PATH + "?" + urlencode(teacher_arguments(PATH, SECRET.encode("utf-8")))


STUDENT_ADDRESS = "192.168.1.23"  # with --wifi: the address the browser's requests claim to come from
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
CHANGE_BLOCK = 5  # with --compare-tuning: changes measured on one server before switching to the other

# The first element `visit` accepts, looking through open shadow roots, as a person sees the page.
WALK = """
  const walk = (root, visit) => {
    for (const el of root.querySelectorAll('*')) {
      if (visit(el)) return el;
      if (el.shadowRoot) { const hit = walk(el.shadowRoot, visit); if (hit) return hit; }
    }
    return null;
  };
"""

# Shared page-side helpers: find things through open shadow roots, as a person sees them.
HELPERS = """
(() => {""" + WALK + """  const stageTable = () => walk(document, el => el.matches('table.stage-table'));
  const outputRow = () => { const t = stageTable(); return t ? t.querySelector('tbody tr:last-child') : null; };
  const vectorField = () => {
    const label = walk(document, el => el.tagName === 'LABEL' && el.textContent.trim() === 'Input vector');
    return label ? label.getRootNode().getElementById(label.htmlFor) : null;
  };
  window.__bt = {walk, stageTable, outputRow, vectorField, keydown: null};
  // The moment of the input event: every keydown, wherever it lands (keydown is composed).
  document.addEventListener('keydown', () => { window.__bt.keydown = performance.now(); }, true);
  // Time to an interactive page: poll every frame from the start of the document.
  const poll = () => {
    const field = vectorField();
    const ok = field && !field.disabled && field.getBoundingClientRect().width > 0 && outputRow();
    if (ok) { window.__bt.interactive = performance.now(); } else { requestAnimationFrame(poll); }
  };
  requestAnimationFrame(poll);
})();
"""

# Time to the title and the question seen: poll every frame from the start of the document for the page's h1 and
# its first question, each with its text laid out and not hidden (through open shadow roots, as above): those the
# page's HTML shows before its scripts run (app/server/templates/page.html), or the drawn page's.
TITLE_PROBE = """
(() => {""" + WALK + """  const shown = el => {
    if (!el || !el.textContent.trim()) return false;
    const box = el.getBoundingClientRect();
    return box.width > 0 && box.height > 0
      && (!el.checkVisibility || el.checkVisibility({opacityProperty: true, visibilityProperty: true}));
  };
  window.__bt = {};
  const poll = () => {
    const title = walk(document, el => el.matches('h1.bt-title, h1.bt-early-title') && shown(el));
    const question = walk(document, el => el.matches('.bt-question, .bt-early-question') && shown(el));
    if (shown(title) && shown(question)) {
      window.__bt.seen = performance.now();
      window.__bt.questionY = question.getBoundingClientRect().top + window.scrollY;
    } else { requestAnimationFrame(poll); }
  };
  requestAnimationFrame(poll);
})();
"""

# Arm an observer before a change; resolves with the page-clock times once the output row changes.
ARM = """
() => {
  const bt = window.__bt;
  const table = bt.stageTable();
  const root = table.getRootNode();
  const before = bt.outputRow().textContent;
  bt.keydown = null;
  bt.done = new Promise(resolve => {
    const timer = setTimeout(() => { observer.disconnect(); resolve({timeout: true}); }, 10000);
    const observer = new MutationObserver(() => {
      const row = bt.outputRow();
      if (!row || row.textContent === before) return;
      const changed = performance.now();
      observer.disconnect();
      clearTimeout(timer);
      requestAnimationFrame(() => resolve({start: bt.keydown, changed, frame: performance.now()}));
    });
    observer.observe(root, {subtree: true, childList: true, characterData: true});
  });
}
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(log_path: Path, *extra: str, env: dict[str, str] | None = None) -> tuple[subprocess.Popen, str]:
    port = free_port()
    with log_path.open("w") as log:
        process = subprocess.Popen([sys.executable, "-m", "blocktrace.app.cli", "serve", "--port", str(port),
                                    "--data-dir", str(log_path.parent / "data"), *extra], cwd=ROOT,
                                   stdout=log, stderr=subprocess.STDOUT,
                                   env={**os.environ, "PYTHONUNBUFFERED": "1", "BLOCKTRACE_SECRET": SECRET,
                                        **(env or {})})
    base = f"http://127.0.0.1:{port}"
    return process, answering(process, base, base + "/health", log_path, "the server")


def start_empty_page(log_path: Path) -> tuple[subprocess.Popen, str]:
    """`panel serve benchmarks/empty_panel_page.py` on a free port (stock Panel and Bokeh); the page's address."""
    port = free_port()
    with log_path.open("w") as log:
        process = subprocess.Popen([sys.executable, "-m", "panel", "serve", str(EMPTY_APP), "--port", str(port),
                                    "--address", "127.0.0.1", "--allow-websocket-origin", f"127.0.0.1:{port}"],
                                   cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                   env={**os.environ, "PYTHONUNBUFFERED": "1"})
    url = f"http://127.0.0.1:{port}/{EMPTY_APP.stem}"
    return process, answering(process, url, url, log_path, "panel serve")


def answering(process: subprocess.Popen, address: str, probe: str, log_path: Path, what: str) -> str:
    """`address` once `probe` answers 200 (within 60 s); a crash or no answer ends the benchmark with the log."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(probe, timeout=5) as r:
                if r.status == 200:
                    return address
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        try:
            process.wait(timeout=0.2)  # a pause between polls that also notices a crash
            raise SystemExit(f"{what} exited:\n{log_path.read_text()}")
        except subprocess.TimeoutExpired:
            continue
    process.terminate()
    raise SystemExit(f"{what} did not answer {probe} within 60 s")


def stop(process: subprocess.Popen) -> None:
    process.terminate()
    process.wait(timeout=10)


def measure(page: Page, act) -> dict:
    page.evaluate(ARM)
    act()
    result = page.evaluate("window.__bt.done")
    if result.get("timeout") or result.get("start") is None:
        raise RuntimeError(f"no update seen on the page: {result}")
    return {"changed": result["changed"] - result["start"], "frame": result["frame"] - result["start"]}


def slider_changes(page: Page, n: int) -> list[dict]:
    handle = page.get_by_role("slider", name="Attention update scale", exact=True)  # the drawn range input
    handle.focus()
    # Up from 1.0 by one step per press: every press changes the output row.
    return [measure(page, lambda: page.keyboard.press("ArrowRight")) for _ in range(n)]


def vector_changes(page: Page, n: int, start: int = 0) -> list[dict]:
    """n changes of the vector field; the first value is 1.0 + 0.1 * (start + 1), each next one 0.1 up."""
    field = page.get_by_label("Input vector")
    samples = []
    for i in range(start, start + n):
        field.fill(f"{1.0 + 0.1 * (i + 1):.2f}, -0.5, 0.25, 2")  # typing alone changes nothing on the server

        def commit() -> None:
            field.press("Tab")

        samples.append(measure(page, commit))
    return samples


def load_page(browser: Browser, url: str, headers: dict, wifi: float | None,
              probe: str = HELPERS, mark: str = "interactive") -> tuple[BrowserContext, Page, float]:
    """Open url in a fresh browser context; returns it, its page, and the page's time to interactive (ms): the
    `mark` the `probe` (an init script) sets on window.__bt, by default HELPERS' interactive.

    Returns once the page has drawn its figures (they come after it is interactive), so the next load
    meets a server with nothing of this one left to do.
    """
    context = browser.new_context(viewport={"width": 1280, "height": 900}, extra_http_headers=headers)
    page = context.new_page()
    page.add_init_script(probe)
    if wifi:
        bytes_per_s = wifi * 1e6 / 8
        cdp = context.new_cdp_session(page)
        cdp.send("Network.enable")
        cdp.send("Network.emulateNetworkConditions", {
            "offline": False, "latency": 20, "downloadThroughput": bytes_per_s,
            "uploadThroughput": bytes_per_s})
    page.goto(url, wait_until="commit")
    page.wait_for_function(f"window.__bt && window.__bt.{mark} !== undefined", timeout=60_000)
    interactive = page.evaluate(f"window.__bt.{mark}")
    page.locator(".bt-figure-pending").first.wait_for(state="detached", timeout=60_000)
    return context, page, interactive


def title_seen(browser: Browser, url: str, headers: dict, wifi: float | None) -> tuple[float, float]:
    """Load url in a fresh context: ms from navigation start to its title and question seen, and how far down
    the page (px) the question was then."""
    context, page, seen = load_page(browser, url, headers, wifi, probe=TITLE_PROBE, mark="seen")
    y = page.evaluate("window.__bt.questionY")
    context.close()
    return seen, y


def title_kind(route: str) -> str:
    return "lesson" if route.startswith("/lessons/") else "explorable"


def empty_ratio(interactive: list[float], empty: list[float]) -> str:
    return f"{statistics.median(interactive) / statistics.median(empty):.2f}"


def summary(name: str, values: list[float]) -> str:
    a = np.asarray(values)
    return (f"{name:<34} {len(a):>3} {statistics.median(a):>8.1f} {np.percentile(a, 95):>8.1f} "
            f"{a.min():>8.1f} {a.max():>8.1f}")


def compared(name: str, tuned: list[float], stock: list[float]) -> str:
    """One row: the first server's median and p95, the second's, and the ratio second/first of the medians."""
    t, s = np.asarray(tuned), np.asarray(stock)
    ratio = statistics.median(s) / statistics.median(t)
    return (f"{name:<34} {len(t):>3} {statistics.median(t):>8.1f} {np.percentile(t, 95):>8.1f} "
            f"{statistics.median(s):>8.1f} {np.percentile(s, 95):>8.1f} {ratio:>11.2f}")


def versions() -> str:
    found = []
    for name in ("panel", "bokeh", "tornado", "param"):
        try:
            found.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            found.append(f"{name} (not installed)")
    return f"python {sys.version.split()[0]}, " + ", ".join(found)


def tuning_state(log_text: str, tuned: bool) -> str:
    """What a server's log says of its tuning layer: off, every patch applied, or which stood down."""
    if not tuned:
        return "off" if "tuning: off" in log_text else "NOT reported off in its log"
    down = [line.split("tuning: ", 1)[1] for line in log_text.splitlines()
            if "tuning: " in line and "stands down" in line]
    return "every patch applied" if not down else "stood down: " + "; ".join(down)


@dataclass(frozen=True)
class Arm:
    """One of the two servers a comparison starts: its name in the table, and how it differs."""

    name: str
    extra: tuple[str, ...] = ()  # arguments of `blocktrace serve`
    env: tuple[tuple[str, str], ...] = ()  # environment variables


def compare_tuning(a: argparse.Namespace) -> int:
    """Measure a tuned and a stock (--no-tuning) server in one run, interleaved; print both and the ratio."""
    def note(name: str, log_text: str) -> str:
        return f"tuning: {tuning_state(log_text, name == 'tuned')}"

    return compare(a, (Arm("tuned"), Arm("stock", extra=("--no-tuning",))), "tuned vs stock (--no-tuning)", note)


def compare_diagram(a: argparse.Namespace) -> int:
    """Measure a server with the floor diagram and one without it (BLOCKTRACE_DIAGRAM=off), interleaved."""
    from blocktrace.explorables.components.floor_diagram import DIAGRAM_ENV

    weights: dict[str, int] = {}

    def note(name: str, log_text: str) -> str:
        return f"document {weights[name]:,} bytes" if name in weights else ""

    def weigh(name: str, url: str) -> None:
        weights[name] = document_bytes(url)

    arms = (Arm("with"), Arm("without", env=((DIAGRAM_ENV, "off"),)))
    code = compare(a, arms, "with vs without the floor diagram (BLOCKTRACE_DIAGRAM=off)", note, weigh)
    if {"with", "without"} <= set(weights):
        print(f"page weight: the block trace's document is {weights['with']:,} bytes with the diagram, "
              f"{weights['without']:,} without: {weights['with'] - weights['without']:,} bytes for the diagram "
              "(its script, stylesheet, both layouts and the stages' names; uncompressed)")
    return code


def compare_without(a: argparse.Namespace) -> int:
    """Measure the tuned server and one without the named patches (BLOCKTRACE_TUNING_WITHOUT), interleaved:
    what those patches buy on every figure, with the page's document size."""
    weights: dict[str, int] = {}

    def note(name: str, log_text: str) -> str:
        return f"document {weights[name]:,} bytes" if name in weights else ""

    def weigh(name: str, url: str) -> None:
        weights[name] = document_bytes(url)

    arms = (Arm("tuned"), Arm("without", env=(("BLOCKTRACE_TUNING_WITHOUT", a.compare_without),)))
    return compare(a, arms, f"tuned vs tuned without {a.compare_without}", note, weigh)


def document_bytes(url: str) -> int:
    """The size of the page's document as its browser pulls it (PULL-DOC reply, JSON), before the commit."""
    import json

    sys.path.insert(0, str(ROOT))
    from tests.app.bokeh_ws_client import pull_document

    return len(json.dumps(pull_document(url.split("?", 1)[0]), ensure_ascii=False).encode("utf-8"))


def compare(a: argparse.Namespace, arms: tuple[Arm, Arm], title: str, note, before_close=None) -> int:
    """Start a server per arm and measure both in one browser, interleaved; print both and the ratio.

    note(name, log text) -> a few words on that server for the header; before_close(name, url), if given, runs
    while the servers are still up.
    """
    load = os.getloadavg()
    log_dir = tempfile.TemporaryDirectory()
    headers = {"X-Forwarded-For": STUDENT_ADDRESS} if a.wifi else {}  # as in main(): both servers trust it
    names = tuple(arm.name for arm in arms)
    first, second = names
    logs = {name: Path(log_dir.name) / name / "server.log" for name in names}
    processes: dict[str, subprocess.Popen] = {}
    urls: dict[str, str] = {}
    bases: dict[str, str] = {}
    empty_url = None
    titles = title_routes()
    try:
        for arm in arms:
            logs[arm.name].parent.mkdir()
            extra = (["--use-xheaders"] if headers else []) + list(arm.extra)
            processes[arm.name], bases[arm.name] = start_server(logs[arm.name], *extra, env=dict(arm.env))
            urls[arm.name] = bases[arm.name] + teacher_route()
        if a.baseline:
            processes[EMPTY_NAME], empty_url = start_empty_page(Path(log_dir.name) / "empty.log")
        interactive: dict[str, list[float]] = {name: [] for name in names}
        empty: list[float] = []
        slider: dict[str, list[dict]] = {name: [] for name in names}
        vector: dict[str, list[dict]] = {name: [] for name in names}
        seen: dict[tuple[str, str], list[tuple[float, float]]] = {(n, r): [] for n in names for r in titles}
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
            kept: dict[str, tuple[BrowserContext, Page]] = {}
            for i in range(a.loads):
                if empty_url:  # empty, first, second, empty, first, second, ...
                    context, _, t = load_page(browser, empty_url, headers, a.wifi)
                    empty.append(t)
                    context.close()
                for name in names:  # first, second, first, second, ...
                    context, page, t = load_page(browser, urls[name], headers, a.wifi)
                    interactive[name].append(t)
                    if i < a.loads - 1:
                        context.close()
                    else:
                        kept[name] = (context, page)
            # Each server's last page stays open for the changes, with the same unmeasured warm-up and the
            # same sequence of values as a single-server run; the servers take turns, CHANGE_BLOCK at a time.
            for name in names:
                page = kept[name][1]
                page.bring_to_front()
                slider_changes(page, 2)
                vector_changes(page, 2)
            for samples, changes in ((slider, lambda page, n, start: slider_changes(page, n)),
                                     (vector, vector_changes)):
                for start in range(0, a.changes, CHANGE_BLOCK):
                    n = min(CHANGE_BLOCK, a.changes - start)
                    for name in names:
                        page = kept[name][1]
                        page.bring_to_front()
                        samples[name] += changes(page, n, start)
            for context, _ in kept.values():
                context.close()
            for _ in range(a.loads):
                for route in titles:
                    for name in names:
                        seen[(name, route)].append(title_seen(browser, bases[name] + route, headers, a.wifi))
            browser.close()
        if before_close is not None:
            for name in names:
                before_close(name, urls[name])
    finally:
        for process in processes.values():
            process.terminate()
        for process in processes.values():
            process.wait(timeout=10)
        notes = {name: note(name, logs[name].read_text() if logs[name].exists() else "") for name in names}
        log_dir.cleanup()

    network = f", network throttled to {a.wifi:g} Mbit/s and 20 ms" if a.wifi else ""
    print(f"blocktrace latency, {title}, headless Chromium{network}")
    for name in names:
        print(f"{name}: {urls[name]}  ({notes[name]})")
    print(versions())
    print(f"machine: {os.cpu_count()} cores, load average {load[0]:.2f} before, "
          f"{os.getloadavg()[0]:.2f} after (other work on the machine inflates every figure)")
    print(f"interleaved: loads alternate {EMPTY_NAME + ', ' if empty else ''}{first}, {second}, ...; changes "
          f"alternate, {CHANGE_BLOCK} on one server at a time (after 2 unmeasured of each); then the title loads")
    ratio = f"{second}/{first}"
    print(f"\n{'ms':<34} {'n':>3} {first:>8} {first:>8} {second:>8} {second:>8} {ratio:>11}")
    print(f"{'':<34} {'':>3} {'median':>8} {'p95':>8} {'median':>8} {'p95':>8} {'(medians)':>11}")
    print(compared("time to interactive page", interactive[first], interactive[second]))
    for label, samples in (("slider", slider), ("vector (Tab)", vector)):
        for key, what in (("changed", "output row changed"), ("frame", "next frame after it")):
            print(compared(f"{label}: {what}", [s[key] for s in samples[first]],
                           [s[key] for s in samples[second]]))
    for route in titles:
        print(compared(f"title+question: {title_kind(route)}", [t for t, _ in seen[(first, route)]],
                       [t for t, _ in seen[(second, route)]]))
    if empty:
        print(f"\n{EMPTY_NAME} (plain `panel serve` {EMPTY_APP.name}), {len(empty)} loads: median "
              f"{statistics.median(empty):.1f} ms, p95 {np.percentile(empty, 95):.1f} ms; time to interactive "
              f"page / {EMPTY_NAME}: {first} {empty_ratio(interactive[first], empty)}, "
              f"{second} {empty_ratio(interactive[second], empty)} (medians; aim, issue 39: <= 1.1)")
    print("\ntime to interactive page: navigation start -> Input vector enabled and stage table drawn; "
          "changes: ms from keydown")
    print("title+question: navigation start -> the h1 and the first question laid out and not hidden, on the "
          "student's\npage (" + ", ".join(titles) + "); question " + ", ".join(
              f"{title_kind(route)} {statistics.median(y for _, y in seen[(first, route)]):.0f} px"
              for route in titles) + f" down the page ({first}); aim (issue 39): <= 300 ms")
    print("target (issue 3): median <= 80 ms, p95 <= 150 ms")
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--changes", type=int, default=30, help="changes measured per control (default 30)")
    p.add_argument("--loads", type=int, default=5, help="page loads for the time to interactive (default 5)")
    p.add_argument("--url", help="an already running server, e.g. http://127.0.0.1:5006 (default: start one)")
    p.add_argument("--link", default=PATH, help="with --url: the block trace's link from that server's /teacher "
                                                "(without the prediction step)")
    p.add_argument("--compare-tuning", action="store_true",
                   help="start a tuned and a --no-tuning server and measure both, interleaved (not with --url)")
    p.add_argument("--compare-diagram", action="store_true",
                   help="start a server with the floor diagram and one without (BLOCKTRACE_DIAGRAM=off) and "
                        "measure both, interleaved (not with --url)")
    p.add_argument("--compare-without", metavar="PATCH[,PATCH]",
                   help="start a tuned server and one without these app/tuning patches and measure both, "
                        "interleaved (not with --url)")
    p.add_argument("--wifi", type=float, metavar="MBIT",
                   help="throttle the browser's network to MBIT Mbit/s with a 20 ms round trip (default: none)")
    p.add_argument("--baseline", action=argparse.BooleanOptionalAction, default=True,
                   help=f"also time the {EMPTY_NAME} ({EMPTY_APP.name}, plain `panel serve`) (default: yes)")
    a = p.parse_args()
    if a.compare_tuning:
        if a.url:
            p.error("--compare-tuning starts its own two servers; it takes no --url")
        return compare_tuning(a)
    if a.compare_diagram:
        if a.url:
            p.error("--compare-diagram starts its own two servers; it takes no --url")
        return compare_diagram(a)
    if a.compare_without:
        if a.url:
            p.error("--compare-without starts its own two servers; it takes no --url")
        return compare_without(a)

    load = os.getloadavg()
    process = None
    log_dir = tempfile.TemporaryDirectory()
    base = a.url.rstrip("/") if a.url else None
    # Over --wifi the browser poses as a laptop on the classroom network (the server started here
    # takes the client's address from X-Forwarded-For), so it gets the scripts gzipped as a student
    # would; a browser on the server's own machine gets them uncompressed.
    headers = {"X-Forwarded-For": STUDENT_ADDRESS} if a.wifi and base is None else {}
    empty_process = empty_url = None
    titles = title_routes()
    try:
        if base is None:
            process, base = start_server(Path(log_dir.name) / "server.log", *(["--use-xheaders"] if headers else []))
        if a.baseline:
            empty_process, empty_url = start_empty_page(Path(log_dir.name) / "empty.log")
        url = base + (a.link if a.url and a.link else teacher_route())
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
            interactive, empty = [], []
            for _ in range(a.loads):
                if empty_url:  # the loads alternate: empty page, explorable, empty page, ...
                    empty_context, _, t = load_page(browser, empty_url, headers, a.wifi)
                    empty.append(t)
                    empty_context.close()
                context, page, t = load_page(browser, url, headers, a.wifi)
                interactive.append(t)
                if len(interactive) < a.loads:
                    context.close()
            # The last page stays open for the changes; two unmeasured changes warm up each path
            # (the slider then runs 1.10 -> 2.60 in steps of 0.05).
            slider_changes(page, 2)
            vector_changes(page, 2)
            slider = slider_changes(page, a.changes)
            vector = vector_changes(page, a.changes)
            context.close()
            seen: dict[str, list[tuple[float, float]]] = {route: [] for route in titles}
            for _ in range(a.loads):
                for route in titles:
                    seen[route].append(title_seen(browser, base + route, headers, a.wifi))
            browser.close()
    finally:
        for started in (process, empty_process):
            if started is not None:
                stop(started)
        log_dir.cleanup()

    network = f", network throttled to {a.wifi:g} Mbit/s and 20 ms" if a.wifi else ""
    print(f"blocktrace latency, headless Chromium, {url}{network}")
    print(f"machine: {os.cpu_count()} cores, load average {load[0]:.2f} before, "
          f"{os.getloadavg()[0]:.2f} after (other work on the machine inflates every figure)")
    print(f"time to interactive page (navigation start -> Input vector enabled and stage table drawn), "
          f"{a.loads} loads: median {statistics.median(interactive):.0f} ms, "
          f"runs {', '.join(f'{t:.0f}' for t in interactive)} ms")
    if empty:
        print(f"{EMPTY_NAME} (plain `panel serve` {EMPTY_APP.name}, one text field and one table), same probe, "
              f"{len(empty)} loads alternating with the above: median {statistics.median(empty):.0f} ms, "
              f"runs {', '.join(f'{t:.0f}' for t in empty)} ms")
        print(f"time to interactive page / {EMPTY_NAME}: {empty_ratio(interactive, empty)} (medians; aim, "
              "issue 39: <= 1.1)")
    print("title and question visible (navigation start -> the h1 and the first question laid out and not hidden, "
          "the student's page; aim, issue 39: <= 300 ms):")
    for route, samples in seen.items():
        times = [t for t, _ in samples]
        print(f"  {route}: median {statistics.median(times):.0f} ms, runs {', '.join(f'{t:.0f}' for t in times)} "
              f"ms; the question {statistics.median(y for _, y in samples):.0f} px down the page")
    print(f"\n{'ms from keydown to ...':<34} {'n':>3} {'median':>8} {'p95':>8} {'min':>8} {'max':>8}")
    print(summary("slider: output row changed", [s["changed"] for s in slider]))
    print(summary("slider: next frame after it", [s["frame"] for s in slider]))
    print(summary("vector (Tab): output row changed", [s["changed"] for s in vector]))
    print(summary("vector (Tab): next frame after it", [s["frame"] for s in vector]))
    print("\ntarget (issue 3): median <= 80 ms, p95 <= 150 ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
