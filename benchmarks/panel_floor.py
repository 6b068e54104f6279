"""What one control change costs on a served Panel page that does nothing: the floor under the block trace.

usage: python benchmarks/panel_floor.py [--changes 300] [--sessions 30] [--rounds 2] [--only NAME,...]

Issue 39 asks a slider change of the block trace for at most 1.5 ms of server CPU and a session for at most
0.6 MB. This measures, in one run and by one method, what Panel's own custom components cost with no work
behind them, beside the block trace's explorable:

- reactivehtml: a pn.reactive.ReactiveHTML with a range input; the browser sets a text parameter, the server
  answers with a JSON text and 85 float64 numbers as two parameters (as explorables/components/drawn_view did
  before and does now);
- jscomponent: a pn.custom.JSComponent with the same input; the change goes up and the answer comes back as
  a message (`model.send_msg`, `_send_msg`), outside Panel's parameter sync;
- trace: the block trace's explorable alone (TraceExplorable, no prediction gate; its diagram, URL state and
  payload), as benchmarks/browser_view.py serves it.

Each is served by plain `panel serve` with the app's public settings (app/server/routes.py `configure()`) and
app/tuning/socket_tuning.py, one at a time. In headless Chromium one page sets the input to a new value
--changes times, each after the last was drawn; figures: the server process's CPU time over the changes
divided by their number, and the median from the input event to the answer drawn. Then --sessions websocket
sessions are opened beside it with tests/app/bokeh_ws_client.py (each GETs the page and pulls its document, as
a browser does) and held open: the server's RSS after, minus before, over --sessions.

Measured 2026-12-07 on this 2-core machine, shared with other work (figures in the issue-39 closing note).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from browser_view import cpu_seconds, free_port, wait_for_port  # benchmarks/, this script's own folder

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run from a checkout: tests.app.bokeh_ws_client
    sys.path.insert(0, str(ROOT))

COMMON = """
import json
import numpy as np
import panel as pn
import param
from blocktrace.app.server.routes import configure
from blocktrace.app.tuning import socket_tuning
configure()
socket_tuning.apply()

def answer(v):
    return json.dumps({"v": v, "rows": [f"row {i}" for i in range(40)]}), np.linspace(0.0, v, 85)
"""

APPS = {
    "reactivehtml": COMMON + '''
class Floor(pn.reactive.ReactiveHTML):
    meta = param.String(default="")
    values = param.Array(default=np.zeros(0))
    sent = param.String(default="")
    _template = '<div id="root"><input id="inp" type="range" min="0" max="100" value="0"/><span id="out"></span></div>'
    _busy__ignore = ["sent"]
    _priority_changes = ["sent"]
    _scripts = {
        "render": "inp.addEventListener('input', () => { data.sent = JSON.stringify({v: +inp.value}); });",
        "meta": "out.textContent = JSON.parse(data.meta).v + ':' + data.values.length;"
                " root.dispatchEvent(new CustomEvent('dv-drawn', {bubbles: true, composed: true}));",
    }

    def __init__(self, **params):
        super().__init__(**params)
        self.param.watch(self._answer, ["sent"])

    def _answer(self, event):
        meta, values = answer(json.loads(event.new)["v"])
        self.param.update(meta=meta, values=values)

Floor().servable()
''',
    "jscomponent": COMMON + '''
class Floor(pn.custom.JSComponent):
    _esm = """
export function render({ model, el }) {
  const inp = document.createElement('input');
  Object.assign(inp, {type: 'range', id: 'inp', min: 0, max: 100, value: 0});
  const out = document.createElement('span');
  inp.addEventListener('input', () => model.send_msg({v: +inp.value}));
  model.on('msg:custom', (m) => {
    out.textContent = JSON.parse(m.meta).v + ':' + m.values.length;
    el.dispatchEvent(new CustomEvent('dv-drawn', {bubbles: true, composed: true}));
  });
  el.append(inp, out);
}
"""

    def _handle_msg(self, data):
        meta, values = answer(data["v"])
        self._send_msg({"meta": meta, "values": values})

Floor().servable()
''',
    "trace": COMMON + '''
from blocktrace.explorables.transformer_block_trace.view import TraceExplorable
pn.panel(TraceExplorable(predict=False)).servable()
''',
}

# The page's range input (the trivial ones' "inp", the block trace's attention scale), wherever its shadow root
# is; one change: set a new value, fire "input", wait for the next drawing.
FIND = """
window.__floorInput = () => {
  const walk = (root) => {
    for (const el of root.querySelectorAll('*')) {
      if (el.id === 'dv-attention_scale' || el.id === 'inp' || el.id.startsWith('inp-')) return el;
      if (el.shadowRoot) { const hit = walk(el.shadowRoot); if (hit) return hit; }
    }
    return null;
  };
  return walk(document);
};
document.addEventListener('dv-drawn', () => { if (window.__floorDrawn) window.__floorDrawn(); }, true);
"""
STEP = """async (k) => {
  const input = window.__floorInput();
  const lo = Number(input.min), hi = Number(input.max), step = Number(input.step) || 1;
  const n = Math.round((hi - lo) / step);
  const value = lo + step * (1 + (k % (n - 1)));
  const drawn = new Promise((resolve) => { window.__floorDrawn = resolve; });
  const t0 = performance.now();
  input.value = String(value);
  input.dispatchEvent(new Event('input', {bubbles: true}));
  const timeout = new Promise((resolve) => setTimeout(() => resolve('timeout'), 10000));
  const result = await Promise.race([drawn, timeout]);
  return result === 'timeout' ? null : performance.now() - t0;
}"""


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def hold_sessions(page_url: str, count: int, pid: int) -> float:
    """Open `count` sessions (one at a time, as a class arriving), keep them open: MB of RSS each."""
    from tests.app.bokeh_ws_client import Session, ws_of

    ws_url = ws_of(page_url)
    first = await Session.open(ws_url)  # the first session's imports and caches are not a session's cost
    before = rss_mb(pid)
    sessions = [await Session.open(ws_url) for _ in range(count)]
    after = rss_mb(pid)
    for s in [first, *sessions]:
        s.close()
    return (after - before) / count


def measure(name: str, changes: int, sessions: int) -> dict:
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        app = Path(tmp) / "floor_app.py"
        app.write_text(APPS[name])
        port = free_port()
        server = subprocess.Popen(
            [sys.executable, "-m", "panel", "serve", str(app), "--port", str(port), "--address", "127.0.0.1",
             "--allow-websocket-origin", f"127.0.0.1:{port}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp)
        url = f"http://127.0.0.1:{port}/floor_app"
        try:
            wait_for_port(port)
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path="/usr/bin/chromium",
                                            args=["--no-sandbox", "--disable-gpu", "--no-first-run"])
                page = browser.new_page(viewport={"width": 1200, "height": 900})
                page.add_init_script(FIND)
                page.goto(url, wait_until="load")
                page.wait_for_function("() => !!window.__floorInput()", timeout=60000)
                for k in range(10):  # warm: the first changes fill caches and compile
                    page.evaluate(STEP, k)
                before = cpu_seconds(server.pid)
                drawn = [page.evaluate(STEP, k) for k in range(changes)]
                cpu = cpu_seconds(server.pid) - before
                browser.close()
            mb = asyncio.run(hold_sessions(url, sessions, server.pid))
        finally:
            server.terminate()
            server.wait(timeout=20)
    done = [d for d in drawn if d is not None]
    return {"cpu_ms": 1000 * cpu / changes, "drawn_ms": statistics.median(done) if done else float("nan"),
            "lost": changes - len(done), "mb": mb}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--changes", type=int, default=300)
    parser.add_argument("--sessions", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--only", default=",".join(APPS))
    args = parser.parse_args()
    names = [n for n in args.only.split(",") if n]
    unknown = sorted(set(names) - set(APPS))
    if unknown:
        parser.error(f"unknown page {unknown[0]!r}; choose from {', '.join(APPS)}")
    import bokeh
    import panel

    print(f"Python {sys.version.split()[0]}, Panel {panel.__version__}, Bokeh {bokeh.__version__}; "
          f"{args.changes} changes, {args.sessions} sessions, median of {args.rounds} rounds "
          f"(rounds interleaved); load average {os.getloadavg()[0]:.1f}")
    found: dict[str, list[dict]] = {n: [] for n in names}
    for _ in range(args.rounds):
        for name in names:
            found[name].append(measure(name, args.changes, args.sessions))
    print(f"{'page':<14}{'CPU ms/change':>14}{'drawn ms':>10}{'MB/session':>12}{'lost':>6}")
    for name, rows in found.items():
        med = {k: statistics.median(r[k] for r in rows) for k in ("cpu_ms", "drawn_ms", "mb")}
        print(f"{name:<14}{med['cpu_ms']:>14.2f}{med['drawn_ms']:>10.1f}{med['mb']:>12.2f}"
              f"{sum(r['lost'] for r in rows):>6}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
