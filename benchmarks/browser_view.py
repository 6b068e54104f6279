"""An explorable's cost per session and per change (the block trace, or --page floor, or --page lab: the decoder
lab's T, which its depth panel's 48-block stacks follow): this tree's view, and another tree's for before/after.

usage: python benchmarks/browser_view.py [--page trace|floor|lab] [--variants tuned,stock|each] [--repeat 1]
                                         [--changes 240] [--sessions 40] [--browser] [--loads 3]
                                         [--browser-changes 30] [--before-python PATH]

--before-python: an interpreter whose blocktrace is another tree (e.g. a venv with main installed editable);
its rows are measured by this same script in that interpreter, so both trees are measured in one run, with the
same method. The script reads either kind of page: Panel widgets (a Bokeh Slider) or the browser-drawn
component (explorables/components/drawn_view, changes arrive as its `sent`).

Each variant runs in a process of its own (the tuning layer's patches apply to a whole process, and the memory
figures must not leak from one variant into the next) and prints one row:

- models: Bokeh models in one page's document (the explorable alone, gate included, no page shell);
- doc KB: the page's document as the browser first receives it (Bokeh's JSON of the whole document);
- CPU ms warm / cold: server CPU per slider change (this thread's CPU time, median), driven as a served
  session is: the browser's PATCH-DOC (a new `value` of the "Attention update scale" slider, or the
  component's `sent` text) is applied to the page's Document with Bokeh's own `patch_doc.apply_to_document`;
  Panel handles it (outside a served session it does so at once); every model change that follows is
  collected (as Bokeh's ServerSession receives them, the browser's own echo left out) and serialized into one
  PATCH-DOC as Panel's `unlocked()` sends it. "warm": the settings were seen before in this process (the shared
  caches answer, a class on the lesson's vector); "cold": every shared cache is emptied before each change.
- bytes/change: the size of that one message (header, metadata, content JSON and buffers), median;
- MB/session: RSS of the process after building --sessions pages (each its own Document), minus before,
  over --sessions; objects/session: objects the collector tracks, the same way.

Variants: tuned and stock (with and without app/tuning), and "-name" for tuned without the patch `name`
(`--variants tuned,-early_page,-socket_tuning,stock`; `--variants each` is tuned, every patch left out in turn,
and stock).

--browser then measures slider -> drawn in headless Chromium (one browser, one `panel serve` at a time, with
the app's public settings, app/server/routes.py `configure()`, and app/tuning/socket_tuning.py or not;
?predict=off): the keydown of an ArrowRight on the slider to the stage table's output row changing, and to the
next animation frame after it; median of --browser-changes over --loads page loads. Also the time to the first
drawn result from navigation start, and the server process's CPU time over the changes divided by their number
(the whole served path: websocket, Tornado, Bokeh's session, Panel; one browser, so little else).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

SLIDER_TITLE = "Attention update scale"
VARIANTS = {"tuned": True, "stock": False}  # name: app/tuning applied
SCALES = [round(0.05 * i, 2) for i in range(1, 61)]  # 0.05 … 3.0: every step of the slider


# --- one variant, in its own process ----------------------------------------------------------------------

class Connection:
    """Stands in for Bokeh's ServerSession: receives the document's change events as it does."""

    def __init__(self) -> None:
        self.events: list = []

    def _document_patched(self, event) -> None:
        if event.setter is not self:  # the browser's own change is not sent back to it
            self.events.append(event)


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


# --page: the explorable built, the drawn control a change moves and the values it steps through
PAGES = {
    "trace": ("blocktrace.explorables.transformer_block_trace.view", "TraceExplorable", "attention_scale", SCALES),
    "floor": ("blocktrace.explorables.block_floor.view", "FloorExplorable", "stage", list(range(1, 9))),
    # up and down: the cold round steps 7 at a time, so the number of values must not be a multiple of 7
    "lab": ("blocktrace.explorables.decoder_block_lab.view", "DecoderLabExplorable", "T",
            [2, 3, 4, 5, 6, 7, 8, 7, 6, 5, 4, 3]),
}
# --page: the shared caches "cold" empties, (module, name); trees differ in which they have
TRACE_CACHES = [("transformer_block_trace.state", "TRACES"), ("transformer_block_trace.renderings", "RENDERINGS"),
                ("transformer_block_trace.diagram", "VIEWS"), ("transformer_block_trace.payload", "PAYLOADS")]
CACHES = {"trace": TRACE_CACHES, "floor": TRACE_CACHES,
          "lab": [("decoder_block_lab.state", "RUNS"), ("decoder_block_lab.state", "CORRUPTIONS"),
                  ("decoder_block_lab.state", "DEPTHS"), ("decoder_block_lab.payload", "RESULTS"),
                  ("decoder_block_lab.diagram", "VIEWS")]}
PAGE = "trace"


def build():
    import importlib

    import panel as pn

    module, name, _control, _values = PAGES[PAGE]
    return pn.panel(getattr(importlib.import_module(module), name)(predict=False))


def open_page():
    from bokeh.document import Document
    from panel.io.state import set_curdoc, state

    doc, connection = Document(), Connection()
    viewable = build()
    viewable.server_doc(doc)
    doc.on_change_dispatch_to(connection)
    # As a served session once its websocket is open: Panel then dispatches the events it held (a hold that
    # ends on a document not connected drops its model changes: the document is sent whole later).
    with set_curdoc(doc):
        state._thread_id = threading.get_ident()
    state._connected[doc] = True
    return doc, connection, viewable


def target(doc) -> tuple[str, str]:
    """(model id, property) the browser changes when the student moves the attention slider."""
    from bokeh.models import Slider

    slider = next((m for m in doc.models if isinstance(m, Slider) and m.title == SLIDER_TITLE), None)
    if slider is not None:  # Panel's widget
        return slider.id, "value"
    host = next(m for m in doc.models if "sent" in getattr(getattr(m, "data", None), "properties", lambda: ())())
    return host.data.id, "sent"  # the browser-drawn component's data


def clear_caches() -> None:
    """Empty every shared cache of the page's explorable this tree has (trees differ in which they have)."""
    import importlib

    for module, name in CACHES[PAGE]:
        try:
            found = importlib.import_module(f"blocktrace.explorables.{module}")
        except ImportError:
            continue
        cache = getattr(found, name, None)
        if cache is not None:
            cache.clear()


def one_change(doc, connection: Connection, model_id: str, attr: str, value, n: int) -> tuple[float, int, int]:
    """(CPU ms, message bytes, events) of one browser change, from its PATCH-DOC to the reply's bytes."""
    from bokeh.protocol.messages.patch_doc import patch_doc

    new = value if attr == "value" else json.dumps({"name": PAGES[PAGE][2], "value": value, "n": n})
    incoming = patch_doc(patch_doc.create_header(), {},
                         {"events": [{"kind": "ModelChanged", "model": {"id": model_id}, "attr": attr, "new": new}]})
    connection.events.clear()
    start = time.thread_time()
    incoming.apply_to_document(doc, connection)
    events = list(connection.events)
    size = 0
    if events:
        reply = patch_doc.create(events)
        size = (len(reply.header_json) + len(reply.metadata_json) + len(reply.content_json)
                + sum(len(b.to_bytes()) for b in reply.buffers))
    ms = 1000 * (time.thread_time() - start)
    return ms, size, len(events)


def measure(name: str, changes: int, sessions: int) -> dict:
    """One variant: "tuned", "stock", or "-name": tuned without the patch `name` (what that patch buys)."""
    from blocktrace.app import tuning
    from blocktrace.app.server import routes

    routes.configure()
    if name.startswith("-"):
        tuning.apply(True, without=(name[1:],))
    else:
        tuning.apply(VARIANTS[name])
    from bokeh.core.json_encoder import serialize_json
    from panel.io.state import set_curdoc

    doc, connection, viewable = open_page()
    models = len(doc.models)
    doc_kb = len(serialize_json(doc.to_json(deferred=False))) / 1024
    model_id, attr = target(doc)
    warm, cold, sizes, counts = [], [], [], []
    steps = PAGES[PAGE][3]
    with set_curdoc(doc):
        for n in range(changes):
            scale = steps[n % len(steps)]
            ms, size, count = one_change(doc, connection, model_id, attr, scale, n + 1)
            if n >= len(steps):  # after one pass every setting is in the shared caches
                warm.append(ms)
                sizes.append(size)
                counts.append(count)
        for n in range(min(changes, 2 * len(steps))):
            clear_caches()
            scale = steps[(n * 7) % len(steps)]
            ms, size, count = one_change(doc, connection, model_id, attr, scale, changes + n + 1)
            cold.append(ms)
    del doc, connection, viewable
    gc.collect()
    objects, before = len(gc.get_objects()), rss_mb()
    pages = [open_page() for _ in range(sessions)]
    gc.collect()
    per_mb = (rss_mb() - before) / sessions
    per_objects = (len(gc.get_objects()) - objects) / sessions
    del pages
    import panel
    return {
        "variant": name, "python": sys.version.split()[0], "panel": panel.__version__, "models": models,
        "doc_kb": doc_kb, "cpu_warm": statistics.median(warm), "cpu_cold": statistics.median(cold),
        "bytes": statistics.median(sizes), "events": statistics.median(counts), "mb": per_mb,
        "objects": per_objects,
    }


# --- slider -> drawn in Chromium ------------------------------------------------------------------------

APP = """
import os
import panel as pn
from blocktrace.app.server.routes import configure
configure()  # the app's public settings, on with --no-tuning too (no Bokeh error diagnostics, no BrowserInfo)
if os.environ.get("BENCH_SOCKET_TUNING") == "1":  # TCP_NODELAY and corked frames (app/tuning/socket_tuning.py)
    from blocktrace.app.tuning import socket_tuning
    socket_tuning.apply()
from blocktrace.explorables.transformer_block_trace.view import TraceExplorable
pn.panel(TraceExplorable(predict=False)).servable()
"""

PAGE_JS = """
(() => {
  const walk = (root, visit) => {
    for (const el of root.querySelectorAll('*')) {
      if (visit(el)) return el;
      if (el.shadowRoot) { const hit = walk(el.shadowRoot, visit); if (hit) return hit; }
    }
    return null;
  };
  const bt = window.__bt = {walk, keydown: null, drawMs: [], sentAt: null, replyAt: null};
  document.addEventListener('keydown', () => { bt.keydown = performance.now(); bt.sentAt = bt.replyAt = null; }, true);
  // where a change's time goes: keydown -> the websocket's send -> the first frame back
  const send = WebSocket.prototype.send;
  WebSocket.prototype.send = function (data) {
    if (bt.keydown !== null && bt.sentAt === null) bt.sentAt = performance.now();
    if (!this.__btSeen) {
      this.__btSeen = true;
      this.addEventListener('message', () => {
        if (bt.sentAt !== null && bt.replyAt === null) bt.replyAt = performance.now();
      });
    }
    return send.call(this, data);
  };
  document.addEventListener('dv-drawn', e => { bt.drawMs.push(e.detail.ms); }, true);
  const outputRow = () => {
    const t = walk(document, el => el.matches('table.stage-table'));
    return t && t.querySelector('tbody tr:last-child');
  };
  bt.outputRow = outputRow;
  const poll = () => {  // the first drawn result: the output row holds numbers
    const r = outputRow();
    if (r && r.textContent.includes('.')) { bt.ready = performance.now(); } else { requestAnimationFrame(poll); }
  };
  requestAnimationFrame(poll);
})();
"""

ARM = """
() => {
  const bt = window.__bt;
  const before = bt.outputRow().textContent;
  bt.keydown = null;
  bt.done = new Promise(resolve => {
    const timer = setTimeout(() => resolve({timeout: true}), 10000);
    const check = () => {
      const row = bt.outputRow();
      if (row && row.textContent !== before) {
        const changed = performance.now();
        requestAnimationFrame(() => { clearTimeout(timer); resolve({changed, frame: performance.now()}); });
        return true;
      }
      return false;
    };
    const loop = () => { if (!check()) bt.raf = requestAnimationFrame(loop); };
    // a MutationObserver on every shadow root is what latency.py does; polling each frame adds at most one frame,
    // so the changed time is taken by an observer below and the loop is only the fallback.
    const root = bt.outputRow().getRootNode();
    const observer = new MutationObserver(() => { if (check()) observer.disconnect(); });
    observer.observe(root, {subtree: true, childList: true, characterData: true});
    loop();
  });
  return true;
}
"""


def is_script(response) -> bool:
    """A script the page loads: a <script>, or a module fetched by es-module-shims (a .js URL)."""
    return response.request.resource_type == "script" or response.url.split("?")[0].endswith(".js")


DONE = ("() => window.__bt.done.then(r => ({...r, key: window.__bt.keydown, sent: window.__bt.sentAt, "
        "reply: window.__bt.replyAt}))")


def median_or_nan(found: list[float]) -> float:
    return statistics.median(found) if found else float("nan")


def cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system) a process has used."""
    columns = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(columns[11]) + int(columns[12])) / os.sysconf("SC_CLK_TCK")


def wait_for_port(port: int, timeout: float = 60.0) -> None:
    """Return once a server listens on the loopback port (or after `timeout`; the page load then fails)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.2)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def browser_run(trees: dict[str, str], loads: int, changes: int, socket_tuned: bool = False) -> dict[str, dict]:
    """Per tree (name -> the Python whose blocktrace it is), its figures in Chromium."""
    return {tree: _browser_tree(python, loads, changes, socket_tuned) for tree, python in trees.items()}


def _browser_tree(python: str, loads: int, changes: int, socket_tuned: bool) -> dict:
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        app = Path(tmp) / "bench_app.py"
        app.write_text(APP)
        port = free_port()
        server = subprocess.Popen(
            [python, "-m", "panel", "serve", str(app), "--port", str(port), "--address", "127.0.0.1",
             "--allow-websocket-origin", f"127.0.0.1:{port}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp,
            env={**os.environ, "BENCH_SOCKET_TUNING": "1" if socket_tuned else "0"})
        try:
            base = f"http://127.0.0.1:{port}/bench_app"
            wait_for_port(port)
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path="/usr/bin/chromium",
                                            args=["--no-sandbox", "--disable-gpu", "--no-first-run"])
                for _tree in ("this",):
                    drawn, framed, firsts, cpu, counted, scripts, outside = [], [], [], 0.0, 0, {}, set()
                    to_send, round_trip, after_reply = [], [], []
                    draws: list[float] = []
                    for _ in range(loads):
                        context = browser.new_context(viewport={"width": 1200, "height": 900})
                        page = context.new_page()
                        page.add_init_script(PAGE_JS)

                        def seen(response, scripts=scripts, outside=outside) -> None:
                            if response.url.split(":")[0] in ("blob", "data"):
                                return  # made in the page, nothing fetched
                            if not response.url.startswith("http://127.0.0.1"):
                                outside.add(response.url[:80])
                            elif is_script(response) and response.url not in scripts:
                                try:
                                    scripts[response.url] = len(response.body())
                                except Exception:  # noqa: BLE001  (a body gone with its page: not counted)
                                    pass

                        page.on("response", seen)
                        page.goto(base, wait_until="load")
                        page.wait_for_function("() => window.__bt && window.__bt.ready", timeout=30000)
                        firsts.append(page.evaluate("() => window.__bt.ready"))
                        native = page.locator("#dv-attention_scale")  # the browser-drawn range input
                        handle = native if native.count() else page.locator(".noUi-handle").first  # Panel's
                        handle.focus()
                        before = cpu_seconds(server.pid)
                        for n in range(changes):
                            page.evaluate(ARM)
                            handle.press("ArrowRight" if (n // 10) % 2 == 0 else "ArrowLeft")
                            result = page.evaluate(DONE)
                            if result.get("timeout") or result.get("key") is None:
                                continue
                            drawn.append(result["changed"] - result["key"])
                            framed.append(result["frame"] - result["key"])
                            if result.get("sent") is not None and result.get("reply") is not None:
                                to_send.append(result["sent"] - result["key"])
                                round_trip.append(result["reply"] - result["sent"])
                                after_reply.append(result["changed"] - result["reply"])
                        cpu += cpu_seconds(server.pid) - before
                        draws += page.evaluate("() => window.__bt.drawMs")
                        counted += changes
                        context.close()
                    result_row = {"drawn": statistics.median(drawn) if drawn else float("nan"),
                                 "frame": statistics.median(framed) if framed else float("nan"),
                                 "first": statistics.median(firsts), "n": len(drawn),
                                 "server_ms": 1000 * cpu / max(counted, 1), "script_kb": sum(scripts.values()) / 1024,
                                 "shims": any("es-module-shims" in u for u in scripts), "outside": len(outside),
                                 "outside_urls": sorted(outside),
                                 "draw_ms": statistics.median(draws) if draws else float("nan"),
                                 "to_send": median_or_nan(to_send), "round_trip": median_or_nan(round_trip),
                                 "after_reply": median_or_nan(after_reply)}
                browser.close()
        finally:
            server.terminate()
            server.wait(timeout=20)
    return result_row


# --- the run --------------------------------------------------------------------------------------------

def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--changes", type=int, default=240)
    parser.add_argument("--sessions", type=int, default=40)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--repeat", type=int, default=1, help="rounds of every variant; each figure's median")
    parser.add_argument("--page", choices=sorted(PAGES), default="trace", help="the explorable measured in process")
    parser.add_argument("--before-python", help="a Python whose blocktrace is the tree to compare with")
    parser.add_argument("--variant", help=argparse.SUPPRESS)  # one variant, in this process, as JSON
    parser.add_argument("--browser", action="store_true", help="also slider -> drawn in Chromium")
    parser.add_argument("--browser-only", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--loads", type=int, default=3)
    parser.add_argument("--browser-changes", type=int, default=30)
    args = parser.parse_args()
    global PAGE
    PAGE = args.page
    if args.variant:
        print(json.dumps(measure(args.variant, args.changes, args.sessions)))
        return 0
    trees = {"this": sys.executable, **({"before": args.before_python} if args.before_python else {})}
    if not args.browser_only:
        runs: dict[tuple[str, str], list[dict]] = {}
        for _ in range(args.repeat):  # rounds of every variant in turn: the machine's drift falls on all alike
            for tree, python in trees.items():
                for name in variant_names(args.variants):
                    done = subprocess.run([python, __file__, f"--variant={name}", "--page", args.page,
                                           "--changes", str(args.changes), "--sessions", str(args.sessions)],
                                          capture_output=True, text=True, cwd=tempfile.gettempdir(),
                                          env={**os.environ, "PYTHONWARNINGS": "ignore"})
                    if done.returncode:
                        print(done.stderr[-2000:], file=sys.stderr)
                        return 1
                    runs.setdefault((tree, name), []).append(json.loads(done.stdout.strip().splitlines()[-1]))
        rows = [median_row(found, tree) for (tree, _name), found in runs.items()]
        first = rows[0]
        print(f"Python {first['python']}, Panel {first['panel']}; {args.page}: {args.changes} changes, "
              f"{args.sessions} sessions; median of {args.repeat} rounds")
        print(f"{'tree':7} {'variant':20} {'models':>6} {'doc KB':>7} {'CPU ms warm':>11} {'cold':>6} {'bytes/chg':>9} "
              f"{'events':>6} {'MB/sess':>7} {'objs/sess':>9}")
        for r in rows:
            print(f"{r['tree']:7} {r['variant']:20} {r['models']:>6} {r['doc_kb']:>7.1f} {r['cpu_warm']:>11.2f} "
                  f"{r['cpu_cold']:>6.2f} {r['bytes']:>9.0f} {r['events']:>6.0f} {r['mb']:>7.2f} {r['objects']:>9.0f}")
    if args.browser or args.browser_only:
        for socket_tuned in (False, True):
            found = browser_run(trees, args.loads, args.browser_changes, socket_tuned)
            print_browser(found, args, "with app/tuning/socket_tuning.py only" if socket_tuned else "stock")
    return 0


def median_row(found: list[dict], tree: str) -> dict:
    """One variant's row over its rounds: each figure's median."""
    row = {**found[0], "tree": tree}
    for key, value in found[0].items():
        if isinstance(value, float | int) and not isinstance(value, bool):
            row[key] = statistics.median(r[key] for r in found)
    return row


def variant_names(text: str) -> list[str]:
    if text != "each":
        return text.split(",")
    from blocktrace.app.tuning import PATCHES

    return ["tuned", *(f"-{patch.name}" for patch in PATCHES), "stock"]


def print_browser(found: dict[str, dict], args, how: str) -> None:
    print(f"\nslider -> drawn in Chromium, `panel serve` {how}, median of {args.browser_changes} x {args.loads}")
    print(f"{'tree':8} {'drawn ms':>9} {'+frame ms':>9} {'first drawn ms':>14} {'server CPU ms':>13} {'n':>4} "
          f"{'script KB':>9} {'outside':>7} {'JS draw ms':>10} {'key>send':>8} {'send>reply':>10} {'reply>drawn':>11}")
    for tree, r in found.items():
        print(f"{tree:8} {r['drawn']:>9.1f} {r['frame']:>9.1f} {r['first']:>14.0f} {r['server_ms']:>13.2f} "
              f"{r['n']:>4} {r['script_kb']:>9.0f} {r['outside']:>7} {r['draw_ms']:>10.1f} {r['to_send']:>8.1f} "
              f"{r['round_trip']:>10.1f} {r['after_reply']:>11.1f}")
        for url in r["outside_urls"]:
            print(f"    not from this server: {url}")


if __name__ == "__main__":
    sys.exit(main())
