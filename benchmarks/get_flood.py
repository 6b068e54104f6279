"""Another student's change while one client sends ten heavy GETs of the decoder-block lab.

usage: python benchmarks/get_flood.py [--rounds 5] [--gets 10] [--no-tuning] [--edge-only]

Starts `python -m blocktrace.app.cli serve` on a free port (as the tests do), opens one student's lab
over a real websocket (the page's own token, the teacher's signed link so the controls are unlocked),
and then, each round:

1. quiet: the student moves the T slider; the time until the server's answer (the PATCH-DOC that ends
   with the address bar's new query) arrives;
2. flood: one client GETs `/explorables/decoder-block-lab?B=4&T=8&d=512&heads=8&expansion=8&mlp=gelu&blocks=48`
   ten times in a row (each answer read, no websocket opened, as issue 16 did), and right after the
   last answer the student moves the slider again: the time until that answer arrives;
3. the server is left to finish what the flood started (its CPU time stops growing) before the next round.

Prints the median and the largest of each, and the server CPU seconds one flood cost. Then, in this
process (no server), what one change costs at the edge of the lab's budget (budget.py): the three
allowed sizes with the most estimated work, and the lesson's own largest (d = 512, GELU), each reached
from the defaults by one change; median of three. Issue 16's
figure before this change: 23.6 s for the student's change, 18 s of CPU for the ten GETs.

Measured on 2026-12-01 on the shared 2-core machine (load average 6-10 from other work, so every figure
is slow and noisy), tuned server, medians: before (commit 57412b0) the student waited 21.3 s (max 25.0 s)
and the flood cost 43 s of CPU; after, 0.96 s (max 1.9 s) against 0.57 s with no flood, and 0.65 s of
CPU. A change at the budget's edge took 0.2-0.9 s (0.3 s or less with OPENBLAS_NUM_THREADS=1 in one run).
Again on 2026-12-01 with the machine quiet (load average under 1), 5 rounds, medians: with build turns
(explorables/components/build_turns.py) the student's change took 291 ms (max 300 ms) right after the ten
GETs and 292 ms with none; before them (commit 82d73fd) 260 ms (max 312 ms) and 241 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tornado.httpclient import AsyncHTTPClient, HTTPRequest  # noqa: E402

from blocktrace.app.serve import SECRET_ENV  # noqa: E402
from blocktrace.app.server.predict_links import teacher_arguments  # noqa: E402
from tests.app import bokeh_ws_client  # noqa: E402
from tests.app.bokeh_ws_client import Session, models, token_in  # noqa: E402
from tests.conftest import start_server, stop_server  # noqa: E402

LAB = "/explorables/decoder-block-lab"
HEAVY = "?B=4&T=8&d=512&heads=8&expansion=8&mlp=gelu&blocks=48&predict=off"
SECRET = "get-flood-benchmark-secret"
# The server reads the client's address from X-Forwarded-For (--use-xheaders), so the flood and the student
# come from two classroom laptops, as on a LAN (requests from loopback itself are never limited).
FLOODER = {"X-Forwarded-For": "192.168.16.66"}
STUDENT = {"X-Forwarded-For": "192.168.16.23"}
ANSWER_TIMEOUT_S = 180.0
bokeh_ws_client.READ_TIMEOUT_S = ANSWER_TIMEOUT_S  # before issue 16, one answer took longer than the tests wait


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def settle(pid: int, quiet_s: float = 0.6, limit_s: float = 120.0) -> None:
    """Wait until the server's CPU time stops growing (what a flood started is done)."""
    deadline = time.monotonic() + limit_s
    last = cpu_seconds(pid)
    while time.monotonic() < deadline:
        time.sleep(quiet_s)
        now = cpu_seconds(pid)
        if now - last < 0.02:
            return
        last = now


class Student:
    """One student's lab over a real websocket: moves the T slider (drawn in the browser: its change is the
    drawing's `sent`), waits for the answer."""

    def __init__(self, session: Session, drawing_id: str) -> None:
        self.session, self.drawing_id, self.value, self.sent = session, drawing_id, 4, 0

    @classmethod
    async def open(cls, base: str) -> Student:
        page = base + LAB + "?" + urlencode(teacher_arguments(LAB, SECRET.encode("utf-8")))
        response = await AsyncHTTPClient().fetch(HTTPRequest(page, headers=STUDENT, request_timeout=60))
        session = await Session.open(base.replace("http://", "ws://") + LAB + "/ws",
                                     token_in(response.body.decode("utf-8")))
        seen = [session.document]
        # the lab is built once the page is up: its first full payload names the shape table
        while "Shape of every tensor" not in json.dumps(seen[-1], ensure_ascii=False):
            message = await session.read()
            if message.msgtype == "PATCH-DOC":
                seen.append(message.content)
        drawing = next(m for content in seen for m in models(content)
                       if {"spec", "meta"} <= set(m.get("attributes", {})))
        return cls(session, drawing["id"])

    async def change(self) -> float:
        """Seconds from sending a new T to the server's answer carrying the new address bar query."""
        self.value = 5 if self.value == 4 else 4
        self.sent += 1
        start = time.perf_counter()
        await self.session.set(self.drawing_id, "sent", json.dumps({"name": "T", "value": self.value, "n": self.sent}))
        while True:
            message = await asyncio.wait_for(self.session.read(), ANSWER_TIMEOUT_S)
            if message.msgtype == "PATCH-DOC" and any(
                    e.get("attr") == "search" and f"T={self.value}" in str(e.get("new"))
                    for e in message.content["events"]):
                return time.perf_counter() - start


async def flood(base: str, gets: int) -> None:
    client = AsyncHTTPClient(force_instance=True)
    try:
        for _ in range(gets):
            await client.fetch(HTTPRequest(base + LAB + HEAVY, headers=FLOODER, request_timeout=120),
                               raise_error=False)
    finally:
        client.close()


def edge_configurations() -> list[dict]:
    """The three allowed sizes with the most estimated work, and the lesson's largest step."""
    from itertools import product

    from blocktrace.explorables.decoder_block_lab import budget, state

    allowed = []
    for B, T, d, e, mlp, blocks in product(range(1, state.MAX_B + 1), range(state.MIN_T, state.MAX_T + 1),
                                           state.D_CHOICES, state.EXPANSIONS, ("swiglu", "gelu"), (1, 12, 24, 48)):
        sizes = {"B": B, "T": T, "d": d, "heads": 1, "expansion": e, "mlp": mlp, "blocks": blocks}
        cost = budget.cost(**sizes)
        if cost.within():
            allowed.append((cost.work, sizes))
    allowed.sort(key=lambda pair: pair[0], reverse=True)
    lesson = {"B": 1, "T": 4, "d": 512, "heads": 2, "expansion": 4, "mlp": "gelu", "blocks": 48}
    return [sizes for _, sizes in allowed[:3]] + [lesson]


def edge_changes() -> list[tuple[dict, float, float]]:
    """(sizes, estimated G multiply-adds, median seconds of the change from the defaults to them)."""
    from blocktrace.explorables.decoder_block_lab import budget
    from blocktrace.explorables.decoder_block_lab.state import LabState

    out = []
    for sizes in edge_configurations():
        times = []
        for _ in range(3):
            state = LabState()
            start = time.perf_counter()
            state.param.update(**sizes)
            times.append(time.perf_counter() - start)
            assert state.budget_error == "", sizes
        out.append((sizes, budget.cost(**sizes).work / 1e9, statistics.median(times)))
    return out


async def run(base: str, pid: int, rounds: int, gets: int) -> dict[str, list[float]]:
    student = await Student.open(base)
    figures: dict[str, list[float]] = {"quiet": [], "flood": [], "cpu": []}
    await student.change()  # warm
    for _ in range(rounds):
        figures["quiet"].append(await student.change())
        before = cpu_seconds(pid)
        await flood(base, gets)
        figures["flood"].append(await student.change())
        await asyncio.get_running_loop().run_in_executor(None, settle, pid)
        figures["cpu"].append(cpu_seconds(pid) - before)
    student.session.close()
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--gets", type=int, default=10)
    parser.add_argument("--no-tuning", action="store_true", help="serve with --no-tuning (stock Panel and Bokeh)")
    parser.add_argument("--edge-only", action="store_true", help="only the changes at the budget's edge")
    args = parser.parse_args()
    if not args.edge_only:
        flood_figures(args)
    for sizes, work, seconds in edge_changes():
        shown = ", ".join(f"{k}={v}" for k, v in sizes.items())
        print(f"change to {shown}: {work:.2f} G multiply-adds (estimated), median {seconds * 1000:.0f} ms")
    return 0


def flood_figures(args: argparse.Namespace) -> None:
    os.environ[SECRET_ENV] = SECRET
    with tempfile.TemporaryDirectory() as folder:
        extra = ("--use-xheaders", *(("--no-tuning",) if args.no_tuning else ()))
        server = start_server(Path(folder) / "server.log", *extra)
        try:
            figures = asyncio.run(run(server.base_url, server.process.pid, args.rounds, args.gets))
        finally:
            stop_server(server)
    for name, label in (("quiet", "student's change, no flood"),
                        ("flood", f"student's change right after {args.gets} heavy GETs")):
        values = figures[name]
        print(f"{label:>48}: median {statistics.median(values) * 1000:7.0f} ms, max {max(values) * 1000:7.0f} ms")
    print(f"{'server CPU per flood (until settled)':>48}: median {statistics.median(figures['cpu']):7.2f} s")


if __name__ == "__main__":
    sys.exit(main())
