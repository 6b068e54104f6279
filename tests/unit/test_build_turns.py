"""The process's queue of page-build steps: one at a time, in order, other work in between, never stuck."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from panel.io.state import set_curdoc, state

from blocktrace.explorables.components.build_turns import Pacer

GAP_S = 0.001


class LoopDocument:
    """What the pacer uses of a session's document: next-tick callbacks, run by the event loop.

    Like Panel's own callbacks, each runs with this document as Panel's current one when `marks` is set."""

    def __init__(self, name: str, marks: bool = False, gone: bool = False) -> None:
        self.name, self.marks, self.gone = name, marks, gone
        self.seen_current: list[object] = []  # Panel's current document when each callback began

    def add_next_tick_callback(self, callback: Callable[[], None]) -> None:
        if self.gone:
            raise RuntimeError("the session was destroyed")

        def run() -> None:
            self.seen_current.append(state._curdoc.get())
            if self.marks:
                with set_curdoc(self):
                    callback()
            else:
                callback()

        asyncio.get_running_loop().call_soon(run)


def run_until(condition: Callable[[], bool]) -> None:
    async def main() -> None:
        while not condition():
            await asyncio.sleep(0.001)

    asyncio.run(asyncio.wait_for(main(), 20))


def test_steps_run_one_at_a_time_in_the_order_asked_with_other_work_between_them() -> None:
    pacer, log = Pacer(gap_s=GAP_S), []

    def work(name: str) -> Callable[[], None]:
        def step() -> None:
            log.append(f"{name} starts")
            # a student's message arriving while this step runs: handled before the next step
            asyncio.get_running_loop().call_soon(log.append, f"message during {name}")
            log.append(f"{name} ends")
        return step

    async def main() -> None:
        docs = [LoopDocument(f"doc{i}") for i in range(4)]
        for i, doc in enumerate(docs):
            pacer.step(doc, work(f"step{i}"))
        while len(log) < 12:
            await asyncio.sleep(0.001)

    asyncio.run(asyncio.wait_for(main(), 20))
    assert log == [entry for i in range(4) for entry in
                   (f"step{i} starts", f"step{i} ends", f"message during step{i}")]
    assert pacer.steps == 4 and pacer.waiting == 0


def test_a_turn_covers_the_synchronous_work_after_it_and_waiters_go_in_order() -> None:
    pacer, log = Pacer(gap_s=GAP_S), []

    async def build(name: str) -> None:
        await pacer.turn()
        log.append(f"{name} starts")
        asyncio.get_running_loop().call_soon(log.append, f"message during {name}")
        log.append(f"{name} ends")  # nothing awaited in between: one step

    async def main() -> None:
        await asyncio.gather(*(build(f"build{i}") for i in range(3)))
        while len(log) < 9:
            await asyncio.sleep(0.001)

    asyncio.run(asyncio.wait_for(main(), 20))
    assert log == [entry for i in range(3) for entry in
                   (f"build{i} starts", f"build{i} ends", f"message during build{i}")]


def test_turns_and_steps_share_one_queue() -> None:
    pacer, log = Pacer(gap_s=GAP_S), []

    async def build() -> None:
        await pacer.turn()
        log.append("build")

    async def main() -> None:
        pacer.step(LoopDocument("a"), lambda: log.append("figure a"))
        waiter = asyncio.ensure_future(build())
        await asyncio.sleep(0)
        pacer.step(LoopDocument("b"), lambda: log.append("figure b"))
        await waiter
        while len(log) < 3:
            await asyncio.sleep(0.001)

    asyncio.run(asyncio.wait_for(main(), 20))
    assert log == ["figure a", "build", "figure b"]


def test_a_step_of_a_closed_session_or_one_that_never_runs_does_not_stop_the_queue() -> None:
    pacer, log = Pacer(gap_s=GAP_S, stuck_s=0.05), []

    class Dropping(LoopDocument):
        def add_next_tick_callback(self, callback) -> None:  # accepted, then thrown away with its session
            pass

    async def main() -> None:
        pacer.step(LoopDocument("closed", gone=True), lambda: log.append("never"))
        pacer.step(Dropping("dropped"), lambda: log.append("never either"))
        pacer.step(LoopDocument("open"), lambda: log.append("ran"))
        while not log:
            await asyncio.sleep(0.001)

    asyncio.run(asyncio.wait_for(main(), 20))
    assert log == ["ran"]


def test_a_failing_step_ends_its_turn() -> None:
    pacer, log = Pacer(gap_s=GAP_S), []

    def fails() -> None:
        raise ValueError("a bug in one page")

    async def main() -> None:
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(lambda _loop, context: log.append(type(context.get("exception")).__name__))
        pacer.step(LoopDocument("a"), fails)
        pacer.step(LoopDocument("b"), lambda: log.append("next"))
        while "next" not in log:
            await asyncio.sleep(0.001)

    asyncio.run(asyncio.wait_for(main(), 20))
    assert log == ["ValueError", "next"]


def test_the_next_step_does_not_start_inside_the_previous_sessions_context() -> None:
    """Panel reads the current document from the context first; a step started from the context of another
    session's callback would build its models into that session's stylesheet cache."""
    pacer = Pacer(gap_s=GAP_S)
    first, second = LoopDocument("first", marks=True), LoopDocument("second")
    ran: list[str] = []

    async def main() -> None:
        pacer.step(first, lambda: ran.append("first"))
        pacer.step(second, lambda: ran.append("second"))
        while len(ran) < 2:
            await asyncio.sleep(0.001)

    asyncio.run(asyncio.wait_for(main(), 20))
    assert ran == ["first", "second"]
    assert second.seen_current == [None]


class LoopCpu:
    """The loop thread's CPU clock for a Pacer, moved by the test: the work the test does counts as the loop's
    own whatever share of the machine this process gets (CI runs some stages at nice 10 beside others)."""

    def __init__(self) -> None:
        self.used = 0.0

    def __call__(self) -> float:
        return self.used


def queued_messages(log: list[str], cpu: LoopCpu | None) -> Callable[[], None]:
    """A first step after which ten students' messages are queued one behind the other, each 20 ms of work (the
    loop's own when `cpu` is given, else other programs' time as far as the pacer can tell)."""
    import time

    def message(n: int) -> None:
        began = time.perf_counter()
        while time.perf_counter() < began + 0.02:
            pass
        if cpu is not None:  # all of it, however much of it this process spent waiting for a core
            cpu.used += time.perf_counter() - began
        log.append(f"message {n}")
        if n < 10:
            asyncio.get_running_loop().call_soon(message, n + 1)

    def first() -> None:
        log.append("step 1")
        asyncio.get_running_loop().call_soon(message, 1)

    return first


def test_while_the_loop_is_behind_with_other_work_the_next_step_waits_for_it() -> None:
    """Students' messages queued up during a step all go before the next step (up to max_rest_s)."""
    cpu, log = LoopCpu(), []
    pacer = Pacer(gap_s=0.001, behind_s=0.005, max_rest_s=30.0, cpu_clock=cpu)
    two_steps(pacer, queued_messages(log, cpu), log)
    assert log == ["step 1", *(f"message {n}" for n in range(1, 11)), "step 2"]


def test_a_rest_late_because_other_programs_had_the_cpu_does_not_hold_the_next_step() -> None:
    """Late timers while the loop's thread used little CPU mean the machine, not the loop, was busy: the next
    step starts without waiting for the loop to catch up."""
    log: list[str] = []
    pacer = Pacer(gap_s=0.001, behind_s=0.005, max_rest_s=30.0, cpu_clock=LoopCpu())
    two_steps(pacer, queued_messages(log, None), log)
    assert log.index("step 2") < len(log) - 1  # before the last message


def two_steps(pacer: Pacer, first: Callable[[], None], log: list[str]) -> None:
    """Queue `first` (of one page) and a step that logs "step 2" (of another), and run until it has."""

    async def main() -> None:
        pacer.step(LoopDocument("a"), first)
        pacer.step(LoopDocument("b"), lambda: log.append("step 2"))
        while "step 2" not in log:
            await asyncio.sleep(0.001)

    asyncio.run(asyncio.wait_for(main(), 20))


def test_a_step_whose_page_closes_before_it_runs_is_let_go():
    """The document's callback calls a step weakly: if the page closes first (Bokeh drops its callbacks,
    which may have been frozen meanwhile), the stuck-step timer lets the step go, and what it would have
    built with (a page's view) is not kept by the queue."""
    import gc
    import weakref

    class Dropping:
        """A document whose session closes before its next-tick callbacks run: it keeps them, never runs them."""

        def __init__(self) -> None:
            self.kept: list[Callable[[], None]] = []

        def add_next_tick_callback(self, callback: Callable[[], None]) -> None:
            self.kept.append(callback)

    class View:
        def build(self) -> None:
            raise AssertionError("a closed page's step ran")

    pacer = Pacer(gap_s=GAP_S, stuck_s=0.02)
    doc, views = Dropping(), [View()]
    gone = weakref.ref(views[0])

    async def main() -> None:
        pacer.step(doc, views[0].build)
        await asyncio.sleep(0)
        assert len(doc.kept) == 1
        while pacer._steps:  # the stuck-step timer ends the turn and lets the step go
            await asyncio.sleep(0.01)

    asyncio.run(main())
    views.clear()
    gc.collect()
    assert gone() is None, "the queue kept the closed page's view"
    assert doc.kept[0]() is None  # the document's callback, run late, does nothing


def test_a_timer_late_while_the_loop_was_idle_is_no_reason_to_wait() -> None:
    """When the rest's timer fires late but the loop's thread did no work meanwhile (the machine's CPU went
    to other programs; here the thread is blocked), the next step starts at once instead of resting on."""
    import time

    rests: list[float] = []

    class Counting(Pacer):
        def _rest(self, loop, turn, for_s, latest):  # noqa: ANN001 - the pacer's own signature
            rests.append(for_s)
            super()._rest(loop, turn, for_s, latest)

    pacer, log = Counting(gap_s=0.001, behind_s=0.005, max_rest_s=30.0), []

    def first() -> None:
        log.append("step 1")
        asyncio.get_running_loop().call_soon(time.sleep, 0.05)  # late timers, no work of the loop's own

    two_steps(pacer, first, log)
    assert log == ["step 1", "step 2"] and len(rests) == 2, rests  # the one after each step, none more


class ClosingDocument:
    """A served session's document whose session is destroyed before its next-tick callbacks run: it keeps
    them without running them, and `destroy()` calls its session-destroyed hooks as Bokeh's discard does."""

    def __init__(self) -> None:
        self.kept: list[Callable[[], None]] = []
        self.session_destroyed_callbacks: set = set()
        self.session_context: object | None = object()  # None once destroyed, as Bokeh's Document does

    def add_next_tick_callback(self, callback: Callable[[], None]) -> None:
        self.kept.append(callback)

    def on_session_destroyed(self, callback) -> None:
        self.session_destroyed_callbacks.add(callback)

    def destroy(self) -> None:
        self.session_context = None
        callbacks, self.session_destroyed_callbacks = self.session_destroyed_callbacks, set()
        for callback in callbacks:
            callback(object())


def test_a_destroyed_sessions_pending_step_releases_the_queue_at_once() -> None:
    """When Bokeh destroys a session whose step was handed to its document but never ran, the next step runs
    then, not after the stuck-step timer (set here far beyond the test's own time limit)."""
    pacer, log = Pacer(gap_s=GAP_S, stuck_s=3600.0), []
    closing = ClosingDocument()

    async def main() -> None:
        pacer.step(closing, lambda: log.append("never"))
        pacer.step(LoopDocument("open"), lambda: log.append("next page"))
        while not closing.kept:
            await asyncio.sleep(0)
        log.append("destroyed")
        closing.destroy()
        while "next page" not in log:
            await asyncio.sleep(0.001)

    asyncio.run(asyncio.wait_for(main(), 20))
    assert log == ["destroyed", "next page"]
    assert pacer._steps == {} and closing.kept[0]() is None


def test_a_step_that_ran_takes_its_destroyed_hook_back() -> None:
    """A step that ran leaves no hook on its document: a long-lived page does not gather one per step."""
    pacer, log = Pacer(gap_s=GAP_S, stuck_s=3600.0), []
    closing = ClosingDocument()

    async def main() -> None:
        pacer.step(closing, lambda: log.append("ran"))
        while not closing.kept:
            await asyncio.sleep(0)
        assert len(closing.session_destroyed_callbacks) == 1
        closing.kept[0]()

    asyncio.run(asyncio.wait_for(main(), 20))
    assert log == ["ran"] and closing.session_destroyed_callbacks == set()


def test_closed_pages_reclaim_steps_wait_for_every_page_build() -> None:
    """A reclaim step asked for before page builds still runs after them: builds go first, in their order."""
    pacer, log = Pacer(gap_s=GAP_S), []

    async def reclaim(name: str) -> None:
        await pacer.turn_after_builds()
        log.append(name)

    async def build(name: str) -> None:
        await pacer.turn()
        log.append(name)

    async def main() -> None:
        first = ClosingDocument()  # its step holds the queue until it is run by hand, once the rest have asked
        pacer.step(first, lambda: log.append("build 0"))
        waiters = [asyncio.ensure_future(reclaim("reclaim 1"))]
        await asyncio.sleep(0)
        waiters.append(asyncio.ensure_future(build("build 1")))
        await asyncio.sleep(0)
        waiters.append(asyncio.ensure_future(reclaim("reclaim 2")))
        await asyncio.sleep(0)
        pacer.step(LoopDocument("second"), lambda: log.append("build 2"))
        assert log == [] and pacer.waiting == 4
        first.kept[0]()
        await asyncio.gather(*waiters)

    asyncio.run(asyncio.wait_for(main(), 20))
    assert log == ["build 0", "build 1", "build 2", "reclaim 1", "reclaim 2"]


def test_a_step_whose_session_went_while_it_waited_ends_its_turn_as_it_begins() -> None:
    """A queued step whose session Bokeh destroyed before its turn (its hooks already called) is passed over
    when its turn comes, not left holding the queue until the stuck-step timer."""
    pacer, log = Pacer(gap_s=GAP_S, stuck_s=3600.0), []
    first, gone = ClosingDocument(), ClosingDocument()

    async def main() -> None:
        pacer.step(first, lambda: log.append("first"))
        pacer.step(gone, lambda: log.append("never"))
        pacer.step(LoopDocument("open"), lambda: log.append("next page"))
        while not first.kept:
            await asyncio.sleep(0)
        gone.destroy()
        first.kept[0]()
        while "next page" not in log:
            await asyncio.sleep(0.001)

    asyncio.run(asyncio.wait_for(main(), 20))
    assert log == ["first", "next page"] and gone.kept == []


def test_configure_sets_the_numbers_a_pacer_was_made_with_and_no_others() -> None:
    """The server sets its queue's numbers after it was made; a name the pacer has no number for is refused."""
    import pytest

    pacer = Pacer()
    pacer.configure(gap_s=0.5, busy_share=0.9, stuck_s=7.0)
    assert (pacer.gap_s, pacer.busy_share, pacer.stuck_s, pacer.share) == (0.5, 0.9, 7.0, 1.0)
    with pytest.raises(TypeError, match="gap"):
        pacer.configure(gap=0.1)
