"""What each way of reclaiming closed sessions' memory costs and returns, in one process (no server).

usage: python benchmarks/session_gc.py [--sessions 100] [--closed 30] [--repeat 3]

Builds N block-trace pages as the server does (the app's own route through Panel's `server_doc`,
each on its own Bokeh Document: about as many tracked objects as a served session), frozen as
app/server/session_memory.py freezes them, then closes K of them as Bokeh discards a session (its
destroy callbacks, Panel's clean-up among them, then `Document.destroy`, which runs a full
`gc.collect()` of its own) and tries each way of getting their memory back:

- discard: what Bokeh's own collection costs per closed session (the longest) and for all K (Bokeh
  discards every session that expired in one pass of the event loop), on the frozen heap; and, last,
  on an unfrozen heap (a server that freezes nothing): there each one walks the whole heap;
- young: `gc.collect(0)` then `gc.collect(1)`, frozen or thawed: cheap, but the closed sessions'
  objects are in none of the generations they walk, so nothing comes back;
- full: `gc.unfreeze(); gc.collect(); gc.freeze()` (what session_memory's Reclaimer does once the
  class is quiet): everything comes back; the pause is the walk of the whole heap.
- own (--own): as the server does now, each closed session's own cycles taken apart as it closes
  (app/server/session_reclaim.py, from its Document and root models): the longest step and all K;
  then the full collection above shows what that left (its "found" is the objects it still freed).

Figures are medians over --repeat runs, in milliseconds of wall time and of this thread's CPU time
(the CPU figure is the one least disturbed by other work on the machine). "back" is how many of the
closed sessions' Documents had been freed (a weak reference to each) after each way, in the order shown.
Last, the process's RSS: with the N pages, after the reclaim, and once K new pages were built (the
closed students opening the page again), which reuse the memory the reclaim gave back.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
import weakref
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bokeh.document import Document  # noqa: E402

from blocktrace.app.server import session_memory, session_reclaim  # noqa: E402
from blocktrace.app.server.routes import routes  # noqa: E402

ROUTE = "/explorables/transformer-block-trace"
UNFROZEN_CLOSES = 3  # sessions closed on an unfrozen heap (each a walk of the whole heap)


class Connection:
    """Stands in for Bokeh's ServerSession: what Document.destroy() unsubscribes."""

    def _document_patched(self, event) -> None:
        pass


def open_page(page) -> tuple[Document, Connection]:
    """A page as the server builds it (Panel's server_doc), with a subscriber as a session has."""
    doc, connection = Document(), Connection()
    viewable = page()
    viewable.server_doc(doc)
    doc.on_change_dispatch_to(connection)
    OPEN[id(doc)] = session_memory.OpenPage(doc, viewable)  # what the server notes for each page
    return doc, connection


OPEN: dict[int, session_memory.OpenPage] = {}


def close_page(doc: Document, connection: Connection) -> None:
    """As Bokeh discards a session: its destroy callbacks (Panel's clean-up), then Document.destroy()."""
    OPEN.pop(id(doc), None)  # (close_and_take_apart has taken it already)
    context = SimpleNamespace(id="closed", _document=doc)
    for callback in list(doc.session_destroyed_callbacks):
        callback(context)
    doc.destroy(connection)


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def timed(step) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.thread_time()
    step()
    return 1000 * (time.perf_counter() - wall), 1000 * (time.thread_time() - cpu)


def close_and_take_apart(pages: list, index: int) -> tuple[session_reclaim.Reclaimed, float]:
    """Close pages[index] as Bokeh discards a session, then take its own cycles apart as the server does:
    what that step returned, and its CPU milliseconds."""
    doc, connection = pages[index]
    pages[index] = None
    page = OPEN[id(doc)]
    close_page(doc, connection)
    page.closed()
    del doc, connection
    cpu = time.thread_time()
    roots = page.take()
    outcome = session_reclaim.reclaim(roots, shared=session_memory.shared_types())
    return outcome, 1000 * (time.thread_time() - cpu)


def one_run(sessions: int, closed: int, own: bool = False, route: str = ROUTE) -> dict[str, tuple]:
    """{way: (wall ms, CPU ms, closed sessions freed so far)} for one set of pages."""
    gc.unfreeze()
    gc.collect()
    page = routes()[route]
    empty = rss_mb()
    pages = [open_page(page) for _ in range(sessions)]
    for open_ in OPEN.values():
        open_.note()
    gc.collect()
    gc.freeze()
    built = rss_mb()
    out: dict[str, tuple] = {"(frozen objects)": (gc.get_freeze_count(), 0, 0)}
    gone = [weakref.ref(doc) for doc, _ in pages[:closed]]

    def back() -> int:
        return sum(ref() is None for ref in gone)

    if own:
        steps = [close_and_take_apart(pages, i) for i in range(closed)]
        del pages[:closed]
        out["own: one closed session"] = (max(s.ms for s, _ in steps), max(c for _, c in steps), back())
        out[f"own: all {closed}, one at a time"] = (sum(s.ms for s, _ in steps), sum(c for _, c in steps), back())
        out["(objects freed by own, per session)"] = (statistics.median(s.freed for s, _ in steps), 0, 0)
        reclaimed = rss_mb()
        pages += [open_page(page) for _ in range(closed)]  # the closed students open the page again
        gc.collect()
        gc.freeze()
        out["(RSS MB: empty, N pages, reclaimed, reopened)"] = (empty, built, reclaimed, rss_mb())
        gc.unfreeze()
        out["(objects a full collection still found)"] = (gc.collect(), 0, 0)
        del pages
        OPEN.clear()
        gc.unfreeze()
        gc.collect()
        return out
    closes = [timed(lambda p=p: close_page(*p)) for p in pages[:closed]]
    del pages[:closed]
    out["discard one session, frozen heap"] = (max(w for w, _ in closes), max(c for _, c in closes), back())
    out[f"discard all {closed}, frozen heap"] = (sum(w for w, _ in closes), sum(c for _, c in closes), back())
    wall, cpu = timed(lambda: (gc.collect(0), gc.collect(1)))
    out["young collections, frozen heap"] = (wall, cpu, back())
    gc.unfreeze()
    wall, cpu = timed(lambda: (gc.collect(0), gc.collect(1)))
    out["young collections, thawed heap"] = (wall, cpu, back())
    gc.freeze()
    wall, cpu = timed(lambda: (gc.unfreeze(), gc.collect(), gc.freeze()))
    out["full: thaw, collect, freeze"] = (wall, cpu, back())
    reclaimed = rss_mb()
    pages += [open_page(page) for _ in range(closed)]  # the closed students open the page again
    gc.collect(1)
    gc.freeze()
    out["(RSS MB: empty, N pages, reclaimed, reopened)"] = (empty, built, reclaimed, rss_mb())
    gc.unfreeze()
    closes = [timed(lambda p=p: close_page(*p)) for p in pages[:UNFROZEN_CLOSES]]
    out["discard one session, unfrozen heap"] = (max(w for w, _ in closes), max(c for _, c in closes), -1)
    del pages
    gc.collect()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--closed", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--own", action="store_true", help="each closed session taken apart as it closes")
    parser.add_argument("--route", default=ROUTE, help=f"the page to build (default {ROUTE})")
    a = parser.parse_args()
    runs = [one_run(a.sessions, a.closed, a.own, a.route) for _ in range(a.repeat)]
    print(f"{a.sessions} pages of {a.route}, {a.closed} closed; medians of {a.repeat} runs")
    print(f"{'way':<34} {'wall ms':>8} {'CPU ms':>8} {'back':>9}")
    for way in runs[0]:
        wall = statistics.median(r[way][0] for r in runs)
        cpu = statistics.median(r[way][1] for r in runs)
        freed = statistics.median(r[way][2] for r in runs)
        if way.startswith("(RSS"):
            continue
        if way.startswith("("):
            print(f"{way:<34} {wall:>8.0f}")
            continue
        shown = f"{freed:>4.0f} / {a.closed}" if freed >= 0 else "-"
        print(f"{way:<34} {wall:>8.0f} {cpu:>8.0f} {shown:>9}")
    empty, built, reclaimed, reopened = (statistics.median(r["(RSS MB: empty, N pages, reclaimed, reopened)"][i]
                                                           for r in runs) for i in range(4))
    per_page = (built - empty) / a.sessions
    print(f"\nRSS: {empty:.0f} MB before the pages, {built:.0f} MB with {a.sessions} ({per_page:.1f} MB a page); "
          f"{reclaimed:.0f} MB once {a.closed} closed and were reclaimed; {reopened:.0f} MB once they opened the page "
          f"again: {reopened - built:+.0f} MB on {built:.0f} (with nothing reclaimed, about "
          f"{a.closed * per_page:+.0f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
