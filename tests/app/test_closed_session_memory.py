"""A closed tab's memory comes back in its own short step on a real server, through Bokeh's own discard of
the session, and the students still on their pages carry on."""

from __future__ import annotations

import asyncio
import json
import re
import time
import urllib.request

import pytest

from tests.app.bokeh_ws_client import Session, fetch_token, models
from tests.conftest import module_server

TRACE = "/explorables/transformer-block-trace"
LIFETIME_MS = 300  # a closed tab's session is discarded this soon after (Bokeh's default is 15 s)
LEAVING = 3
TAKEN_APART = re.compile(r"a closed session's memory came back in (\d+) ms \(the longest step (\d+) ms\): "
                         r"(\d+) of the (\d+) objects")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    yield from module_server(tmp_path_factory, "closed-memory", "--unused-session-lifetime", str(LIFETIME_MS))


def memory(server) -> dict:
    with urllib.request.urlopen(server.url("/health/memory"), timeout=10) as response:
        return json.loads(response.read())


def trace_ws(server) -> str:
    return server.url(TRACE).replace("http://", "ws://") + "/ws"


def until(condition, what: str, timeout_s: float = 30.0):
    """Poll `condition()` until it gives something true (bounded); the assertions are on what it gave."""
    deadline = time.monotonic() + timeout_s
    while not (found := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} within {timeout_s:.0f} s")
        time.sleep(0.05)
    return found


def test_closed_tabs_are_taken_apart_and_an_open_one_keeps_working(server) -> None:
    """Students close their tabs after their pages were frozen (as any page open for a few seconds is):
    each page's own cycles are freed in a step of their own (thousands of objects, nothing left for the
    quiet-time full collection), and a student still on the page has a slider change answered."""
    base = server.url(TRACE)
    ws = base.replace("http://", "ws://") + "/ws"

    async def scenario() -> list[str]:
        staying = await Session.open(ws, await fetch_token(server.url(server.teacher_link(TRACE))))
        leaving = [await Session.open(ws, await fetch_token(base)) for _ in range(LEAVING)]
        opened = await asyncio.to_thread(until, lambda: (m := memory(server))["pages_open"] == LEAVING + 1 and m,
                                         "pages open")
        await asyncio.to_thread(until, lambda: memory(server)["frozen_objects"] > opened["frozen_objects"],
                                "freeze after the pages were built")
        for session in (staying, *leaving):
            await session.filled()  # no build step of the page still waits in the queue when it closes
        for session in leaving:
            await session.close_and_wait()
        await asyncio.to_thread(until, lambda: memory(server)["closed_taken_apart"] == LEAVING,
                                "closed pages taken apart")
        drawing = next(m for m in models(staying.document) if {"spec", "meta"} <= set(m.get("attributes", {})))
        await staying.set(drawing["id"], "sent", json.dumps({"name": "attention_scale", "value": 0.5, "n": 1}))
        kinds = []
        while "PATCH-DOC" not in kinds:
            kinds.append((await staying.read()).msgtype)
        await staying.close_and_wait()
        return kinds

    assert "PATCH-DOC" in asyncio.run(scenario())
    steps = list(TAKEN_APART.finditer(server.log()))
    assert len(steps) == LEAVING, server.log()[-3000:]
    for step in steps:
        freed, walked = int(step.group(3)), int(step.group(4))
        assert 5_000 < freed <= walked, step.group(0)
    after = memory(server)
    assert after["closed_left_for_full_reclaim"] == 0 and after["full_reclaims"] == 0
    assert "still held elsewhere" not in server.log()


def test_the_serving_loop_runs_the_periodic_checks_and_the_pause_probe(server) -> None:
    """Once a page is open, the memory checks and the loop-pause probe run on the loop that serves it, with
    Bokeh 3.9 (pages built on that loop) and Bokeh 3.10 (built on worker threads, where no loop runs)."""

    async def scenario() -> tuple[dict, dict]:
        page = await Session.open(trace_ws(server), await fetch_token(server.url(TRACE)))
        first = await asyncio.to_thread(until, lambda: (m := memory(server))["loop_probes"] > 0 and m,
                                        "probe of the event loop")
        later = await asyncio.to_thread(
            until, lambda: (m := memory(server))["memory_checks"] > first["memory_checks"]
            and m["loop_probes"] > first["loop_probes"] and m, "periodic memory check")
        await page.close_and_wait()
        return first, later

    first, later = asyncio.run(scenario())
    assert later["memory_checks"] > first["memory_checks"] and later["loop_probes"] > first["loop_probes"]
