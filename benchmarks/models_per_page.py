"""Bokeh models and server memory a session, page by page: the index, each lesson, each explorable.

usage: python benchmarks/models_per_page.py [--sessions 20] [--warmup 2] [--page PATH ...] [--no-tuning]

Starts `python -m blocktrace.app.cli serve` on a free port (as benchmarks/classroom.py does: its
start_server, a SQLite store in a temporary directory) and, for every route the app serves (its
`routes()`, or the --page paths), opens sessions as a student's browser does, with Bokeh's own protocol
classes (tests/app/bokeh_ws_client.py): GET the page, open its websocket, pull the document, report it
drawn (document_ready), and read on until every place the first document left for after load is filled
(the figures). Each session stays open until the run ends, so no page's memory is given back and reused by
the next page's sessions. The student's own page: a first visit with no class, the prediction gate on.

Per page it prints:

- models: the Bokeh models in the session's document once filled (the document the browser holds: the
  PULL-DOC reply, then the patches applied, counted from the document's roots), by type, the top 5;
- MB a session: the server's VmRSS after --sessions more sessions of that page, minus before, over
  --sessions (classroom.py's measure, per page); --warmup unmeasured sessions of each page come first
  (a route's first sessions import modules and fill caches that every later session shares);
- build CPU ms a session: the server's CPU time (user + system) over those sessions, over --sessions:
  building, serializing and sending each document.

The server is idle (under 10 % of a core over a second) before each reading. Figures, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]  # tests/, and classroom.py beside this file (no package)

from classroom import Server, start_server, stop_server, wait_until_idle  # noqa: E402
from latency import versions  # noqa: E402

from tests.app.bokeh_ws_client import Session, models  # noqa: E402

TOP = 5  # model types shown per page


def top(types: Counter) -> str:
    """The TOP most frequent types, ties by name (the same order on every run)."""
    return ", ".join(f"{name} {n}" for name, n in sorted(types.items(), key=lambda item: (-item[1], item[0]))[:TOP])


@dataclass(frozen=True)
class PageFigures:
    """One page's row: its models by type, and the server's memory and CPU a session."""

    path: str
    types: Counter
    mb_per_session: float
    cpu_ms_per_session: float


def document_models(document: dict, patches: list[dict]) -> Counter:
    """The models of the document a browser holds after the PULL-DOC reply `document` and the PATCH-DOC contents
    `patches`, counted by type (the last part of the model's qualified name): every model reachable from the
    document's roots once each patch's changes are applied (a model a patch replaced is no longer counted)."""
    known: dict[str, dict] = {}

    def learn(node: Any) -> None:
        for model in models(node):
            known.setdefault(model["id"], model)

    learn(document)
    roots = [root["id"] for root in document["doc"]["roots"]]
    changed: dict[tuple[str, str], Any] = {}
    for patch in patches:
        learn(patch)
        for event in patch["events"]:
            if event.get("kind") == "ModelChanged":
                changed[(event["model"]["id"], event["attr"])] = event["new"]
            elif event.get("kind") == "RootAdded":
                roots.append(event["model"]["id"])
            elif event.get("kind") == "RootRemoved":
                roots.remove(event["model"]["id"])

    def references(node: Any) -> list[str]:
        """The ids of the models a serialized value refers to (a full model or a bare {"id": ...})."""
        if isinstance(node, dict):
            if "id" in node and node.get("type", "object") == "object" and set(node) <= {"type", "name", "id",
                                                                                       "attributes"}:
                return [node["id"]]
            return [found for value in node.values() for found in references(value)]
        if isinstance(node, list):
            return [found for value in node for found in references(value)]
        return []

    seen: set[str] = set()
    todo = list(roots)
    while todo:
        model_id = todo.pop()
        if model_id in seen or model_id not in known:
            continue
        seen.add(model_id)
        attributes = dict(known[model_id].get("attributes", {}))
        attributes.update({attr: new for (changed_id, attr), new in changed.items() if changed_id == model_id})
        todo += references(attributes)
    return Counter(known[model_id]["name"].rsplit(".", 1)[-1] for model_id in seen)


async def open_filled(base: str, path: str) -> tuple[Session, Counter]:
    """One student's session of `path`, open and filled; its document's models by type."""
    ws_url = base.replace("http://", "ws://", 1) + path.rstrip("/") + "/ws"
    session = await Session.open(ws_url)
    patches = await session.filled()
    return session, document_models(session.document, patches)


async def measure(server: Server, pages: list[str], sessions_n: int, warmup: int) -> list[PageFigures]:
    base = f"http://127.0.0.1:{server.port}"
    kept: list[Session] = []
    rows = []
    try:
        for path in pages:
            for _ in range(warmup):
                session, _types = await open_filled(base, path)
                kept.append(session)
            await wait_until_idle(server)
            rss, cpu = server.rss_mb(), server.cpu_seconds()
            counts = []
            for _ in range(sessions_n):
                session, types = await open_filled(base, path)
                kept.append(session)
                counts.append(types)
            await wait_until_idle(server)
            mb = (server.rss_mb() - rss) / sessions_n
            cpu_ms = 1000 * (server.cpu_seconds() - cpu) / sessions_n
            if any(c != counts[0] for c in counts):  # every session of a route should build the same document
                totals = sorted({sum(c.values()) for c in counts})
                print(f"note: {path}: the sessions' documents differ (model counts {totals}); the first is shown")
            rows.append(PageFigures(path, counts[0], mb, cpu_ms))
    finally:
        for session in kept:
            session.close()
    return rows


def print_rows(rows: list[PageFigures], sessions_n: int, warmup: int, tuned: bool, load: tuple) -> None:
    print(f"blocktrace models and memory a session, page by page ({'tuned' if tuned else 'stock: --no-tuning'})")
    print(versions())
    print(f"machine: {os.cpu_count()} cores, load average {load[0]:.2f} before, {os.getloadavg()[0]:.2f} after")
    print(f"{sessions_n} sessions a page, after {warmup} unmeasured; every session kept open to the end\n")
    width = max(len("all pages"), *(len(r.path) for r in rows))
    print(f"{'page':<{width}} {'models':>6} {'MB/sess':>7} {'CPU ms':>7}  top {TOP} model types")
    for r in rows:
        print(f"{r.path:<{width}} {sum(r.types.values()):>6} {r.mb_per_session:>7.2f} {r.cpu_ms_per_session:>7.0f}  "
              f"{top(r.types)}")
    total = Counter()
    for r in rows:
        total += r.types
    print(f"{'all pages':<{width}} {sum(total.values()):>6} {'':>7} {'':>7}  {top(total)}")
    print("\nmodels: Bokeh models in one session's document once its figures are placed (PULL-DOC, then the "
          "patches\napplied, counted from the roots); MB/sess: server VmRSS after the page's sessions minus "
          "before, over\nthe sessions (server idle at both readings); CPU ms: server CPU time (user + system) "
          "over those\nsessions, over the sessions (build, serialize, send). A small page's MB/sess near 0 is "
          "below what\nan RSS difference resolves: the process reuses memory it freed earlier before it grows.")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sessions", type=int, default=20, help="measured sessions a page (default 20)")
    p.add_argument("--warmup", type=int, default=2, help="unmeasured sessions a page first (default 2)")
    p.add_argument("--page", action="append", help="a route to measure (repeatable; default: every route)")
    p.add_argument("--no-tuning", action="store_true", help="serve with --no-tuning (stock Panel, Bokeh, Tornado)")
    a = p.parse_args()
    if a.sessions < 1:
        p.error("--sessions must be at least 1")
    if a.page:
        pages = a.page
    else:
        from blocktrace.app.server.routes import routes

        found = routes(tuned=False)  # only its keys: the pages are built in the server, not here
        pages = ["/", *sorted(path for path in found if path != "/")]
    load = os.getloadavg()
    with tempfile.TemporaryDirectory() as folder:
        server = start_server(Path(folder), 1, secrets.token_hex(32), None, tuned=not a.no_tuning)
        started = time.monotonic()
        try:
            rows = asyncio.run(measure(server, pages, a.sessions, a.warmup))
        finally:
            stop_server(server)
    print_rows(rows, a.sessions, a.warmup, not a.no_tuning, load)
    print(f"({time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
