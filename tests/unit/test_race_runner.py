"""Races in worker processes: the same curves as in-process, the server's limits, drops and dead workers."""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import select
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from blocktrace.explorables.engine import ConfigError
from blocktrace.explorables.engine import language_model as lm
from blocktrace.explorables.engine import tasks as task_data
from blocktrace.explorables.engine.training import DEFAULT_SETUPS, TrainSettings
from blocktrace.explorables.train_the_block.kept import RaceStore
from blocktrace.explorables.train_the_block.runner import EVALUATE_EVERY, LookAt, RaceLost, RaceRunner, RaceSpec


def _spec(seed: int = 0) -> RaceSpec:
    setup = DEFAULT_SETUPS["copy"]
    return RaceSpec(task_data.make_task("copy"), seed, setup.config.with_(placement="pre"),
                    setup.config.with_(placement="post"), setup.settings, TrainSettings(lr=0.01, warmup=10))


@pytest.fixture
def runner():
    r = RaceRunner(workers=2, slice_steps=7)
    yield r
    r.shutdown()


@pytest.fixture
def steady():
    """One worker whose slices always take their 7 steps (a CPU budget no step reaches)."""
    r = RaceRunner(workers=1, slice_steps=7, slice_cpu_s=60.0)
    yield r
    r.shutdown()


def test_a_race_in_a_worker_gives_the_curves_it_gives_here(runner: RaceRunner) -> None:
    """Slices from the worker carry exactly the step records an in-process race of the same spec records."""
    async def go():
        race = await runner.start(_spec(3))
        slices = [await runner.advance(race) for _ in range(3)]
        return slices

    slices = asyncio.run(go())
    here = _spec(3).build_reference()
    for _ in range(sum(len(s.a) for s in slices)):
        here.step()
    assert [r for s in slices for r in s.a] == here.a.steps
    assert [r for s in slices for r in s.b] == here.b.steps
    assert slices[-1].running_a and slices[-1].running_b


def test_held_out_readings_fall_on_the_same_steps_however_the_race_is_sliced() -> None:
    """Readings come after every EVALUATE_EVERY-th step, with the values an in-process run reads there, whether
    the race goes in slices of 7 steps or of 50."""
    readings = []
    for slice_steps in (7, 50):
        r = RaceRunner(workers=1, slice_steps=slice_steps)
        try:
            async def go(r: RaceRunner = r) -> list:
                race, taken, steps = await r.start(_spec(2)), [], 0
                while steps < 2 * EVALUATE_EVERY + 3:
                    part = await r.advance(race)
                    steps += len(part.a)
                    taken.extend(part.held_out_a)
                return taken

            readings.append(asyncio.run(go())[:2])
        finally:
            r.shutdown()
    assert readings[0] == readings[1]
    assert [step for step, _, _ in readings[0]] == [EVALUATE_EVERY, 2 * EVALUATE_EVERY]
    here = _spec(2).build_reference().a
    for _ in range(EVALUATE_EVERY):
        here.step()
    assert readings[0][0][1:] == here.evaluate()


def test_a_slice_never_takes_more_steps_than_the_server_allows(runner: RaceRunner) -> None:
    """Whatever a page asks for, a slice takes at most slice_steps steps; asking for 0 takes none."""
    async def go():
        race = await runner.start(_spec())
        return await runner.advance(race, 10_000), await runner.advance(race, 0), await runner.advance(race, 2)

    big, none, two = asyncio.run(go())
    assert len(big.a) == 7 and len(none.a) == 0 and len(two.a) == 2


def test_a_slice_ends_after_its_cpu_budget() -> None:
    """With a CPU budget smaller than one step, every slice takes exactly one step: progress, but bounded."""
    r = RaceRunner(workers=1, slice_steps=50, slice_cpu_s=1e-9)
    try:
        async def go():
            race = await r.start(_spec())
            return [await r.advance(race) for _ in range(3)]
        assert [len(s.a) for s in asyncio.run(go())] == [1, 1, 1]
    finally:
        r.shutdown()


def test_races_spread_over_the_workers_and_the_server_caps_them() -> None:
    """Races started together go to different workers; beyond max_races a start is refused, saying why."""
    r = RaceRunner(workers=2, max_races=2)
    try:
        async def go():
            ids = await asyncio.gather(r.start(_spec(1)), r.start(_spec(2)))
            with pytest.raises(ConfigError, match="already training 2 races"):
                await r.start(_spec(3))
            return ids

        ids = asyncio.run(go())
        assert sorted(r._index(i)[0] for i in ids) == [0, 1]
    finally:
        r.shutdown()


def test_a_dropped_race_is_freed_in_its_worker(runner: RaceRunner) -> None:
    """Dropping a race frees it in the worker at once; advancing it afterwards raises RaceLost."""
    async def go():
        keep, gone = await runner.start(_spec(1)), await runner.start(_spec(2))
        await runner.advance(gone)
        await runner.drop(gone)
        held = await runner.held_in_workers()
        with pytest.raises(RaceLost):
            await runner.advance(gone)
        await runner.drop(gone)  # twice: nothing
        return keep, held

    keep, held = asyncio.run(go())
    assert held == 1 == runner.races and keep in runner._holds


def test_a_dead_worker_loses_its_races_and_is_replaced() -> None:
    """A worker killed mid-lesson: its race's next slice raises RaceLost, and a new race runs in a new worker."""
    r = RaceRunner(workers=1)
    try:
        async def go():
            race = await r.start(_spec())
            pid = await r._call(0, os.getpid)
            os.kill(pid, signal.SIGKILL)
            with pytest.raises(RaceLost, match="start the race again"):
                await r.advance(race)
            assert r.races == 0
            again = await r.start(_spec())
            return len((await r.advance(again)).a), await r._call(0, os.getpid) != pid

        steps, new_process = asyncio.run(go())
        assert steps > 0 and new_process
    finally:
        r.shutdown()


def test_workers_end_when_the_server_process_is_killed(tmp_path) -> None:
    """A server killed outright (no shutdown, no atexit) leaves no training worker behind."""
    script = tmp_path / "server.py"
    script.write_text(
        "import asyncio, os\n"
        "from tests.unit.test_race_runner import _spec\n"
        "from blocktrace.explorables.train_the_block.runner import RaceRunner\n"
        "async def go():\n"
        "    r = RaceRunner(workers=1)\n"
        "    await r.start(_spec())\n"
        "    print(await r._call(0, os.getpid), flush=True)\n"
        "    await asyncio.sleep(3600)\n"
        "if __name__ == '__main__':  # spawned workers import this module again\n"
        "    asyncio.run(go())\n")
    root = str(Path(__file__).resolve().parents[2])
    server = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, cwd=root,
                              env={**os.environ, "PYTHONPATH": os.pathsep.join(
                                      filter(None, [root, os.environ.get("PYTHONPATH")]))})
    worker = int(server.stdout.readline())
    exited = os.pidfd_open(worker)  # readable once the worker process has ended
    try:
        server.kill()
        server.wait()
        readable, _, _ = select.select([exited], [], [], 60)
    finally:
        os.close(exited)
    assert readable == [exited], "the worker outlived its server by a minute"


def test_workers_run_nicer_than_the_server(runner: RaceRunner) -> None:
    """The training yields the CPU to the server's loop: each worker's nice value is the server's plus NICENESS."""
    async def go():
        await runner.start(_spec())
        return await runner._call(0, os.getpid)

    worker = asyncio.run(go())
    assert os.getpriority(os.PRIO_PROCESS, worker) == min(19, os.getpriority(os.PRIO_PROCESS, 0) + runner.niceness)


def test_a_look_comes_with_the_slice_that_took_a_reading_or_when_asked(runner: RaceRunner) -> None:
    """With a LookAt, a slice brings both models on the example after its last step: always when asked, else only
    when it took a held-out reading; a LookAt out of range is refused before anything is sent."""
    want = LookAt(example=2, floor=0)

    async def go():
        race = await runner.start(_spec(1))
        first = await runner.advance(race, 3, LookAt(2, 0, always=True))
        quiet = await runner.advance(race, 7, want)  # steps 4–10: no reading
        parts = [await runner.advance(race, 7, want) for _ in range(3)]  # through step 31: the reading at 25
        return first, quiet, parts

    first, quiet, parts = asyncio.run(go())
    assert first.look is not None and first.look.a.steps == 3 and quiet.look is None
    with_reading = [p for p in parts if p.held_out_a]
    assert len(with_reading) == 1 and with_reading[0].look is not None
    assert all(p.look is None for p in parts if not p.held_out_a)
    here = _spec(1).build_reference()
    for _ in range(with_reading[0].look.a.steps):
        here.step()
    look = with_reading[0].look
    trace, logits = lm.trace_sequence(here.b.config, here.b.params, look.tokens, here.b.task.vocab)
    assert np.array_equal(look.b.pattern, trace["blocks.0.attn.pattern"]) and look.example == 2
    assert np.array_equal(look.b.answers, logits.argmax(-1))
    for bad in ({"example": 8, "floor": 0}, {"example": 0, "floor": -1}, {"example": "0", "floor": 0}):
        with pytest.raises(ConfigError, match="to look at"):
            LookAt(**bad)


def test_races_of_one_worker_share_its_slice_budget() -> None:
    """Each slice's CPU budget is slice_cpu_s over the races its worker trains: a page's turn comes round sooner."""
    r = RaceRunner(workers=2, slice_cpu_s=0.08)
    try:
        async def go():
            races = [await r.start(_spec(seed)) for seed in range(3)]  # two in one worker, one in the other
            return [r.slice_cpu(r._index(race)[0]) for race in races]

        assert sorted(asyncio.run(go())) == [0.04, 0.04, 0.08]
    finally:
        r.shutdown()


def test_warm_starts_every_worker_before_any_race() -> None:
    """A page that opens starts the workers (without waiting for them): by the first Play they are running."""
    r = RaceRunner(workers=2)
    before = set(multiprocessing.active_children())
    try:
        r.warm()
        assert len(set(multiprocessing.active_children()) - before) == 2 and r.races == 0
        r.warm()  # the next page's: nothing more starts
        assert len(set(multiprocessing.active_children()) - before) == 2
    finally:
        r.shutdown()


def test_a_worker_imports_neither_panel_nor_bokeh() -> None:
    """What a worker imports to run its races (runner.py, through its package) leaves the page's libraries out:
    importing them was most of a new worker's start-up."""
    code = ("import sys, blocktrace.explorables.train_the_block.runner\n"
            "print(sorted(m for m in ('panel', 'bokeh', 'param') if m in sys.modules))")
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert found.strip() == "[]"


def test_pages_on_one_setup_share_one_computation(steady: RaceRunner) -> None:
    """Two pages playing the same set-up get the same slices, bit for bit, while the workers compute each step
    once; the race counts once against the server's limit."""
    async def go():
        first, second = await steady.start(_spec(4)), await steady.start(_spec(4))
        ones = [await steady.advance(first) for _ in range(4)]
        twos = [await steady.advance(second) for _ in range(4)]
        return ones, twos, steady.races, steady.steps_computed

    ones, twos, races, computed = asyncio.run(go())
    assert ones == twos and races == 1 and computed == 4 * 7
    assert [step for s in ones for step, _, _ in s.held_out_a] == [EVALUATE_EVERY]


def test_one_pages_pause_stops_no_other_and_a_closed_page_drops_only_its_hold(steady: RaceRunner) -> None:
    """While one page is paused the other goes on computing; the paused page then plays the same steps from
    where it stopped; closing one page keeps the race for the other, closing both frees it in its worker."""
    async def go():
        paused, playing = await steady.start(_spec(5)), await steady.start(_spec(5))
        before = await steady.advance(paused)
        going = [len((await steady.advance(playing)).a) for _ in range(3)]
        after = await steady.advance(paused)
        await steady.drop(playing)
        kept = (steady.races, len((await steady.advance(paused)).a))
        steady.forget(paused)
        return before, going, after, kept, steady.races, await steady.held_in_workers()

    before, going, after, kept, races, held = asyncio.run(go())
    assert going == [7, 7, 7] and [r.step for r in after.a] == list(range(7, 14))
    assert before.a[0].step == 0 and kept == (1, 7) and races == 0 and held == 0


def test_a_reset_replays_the_computed_steps_and_new_setups_count_against_the_limit() -> None:
    """A page's reset (a new hold on the same set-up, replacing its old one) replays what was computed without
    computing it again; a second set-up beyond max_races is refused, whoever asks."""
    r = RaceRunner(workers=1, slice_steps=5, slice_cpu_s=60.0, max_races=1)
    try:
        async def go():
            hold = await r.start(_spec(6))
            first = [await r.advance(hold) for _ in range(2)]
            again = await r.start(_spec(6), replacing=hold)
            replayed = [await r.advance(again) for _ in range(2)]
            other = await r.start(_spec(6))
            with pytest.raises(ConfigError, match="already training 1 races"):
                await r.start(_spec(7))
            return first, replayed, r.steps_computed, r.holds, other

        first, replayed, computed, holds, _ = asyncio.run(go())
        assert first == replayed and computed == 10 and holds == 2
    finally:
        r.shutdown()


def _steady(store_dir: Path | None, **numbers) -> RaceRunner:
    """One worker whose slices take their 7 steps, keeping its races in `store_dir`."""
    numbers = {"slice_steps": 7, "slice_cpu_s": 60.0, **numbers}
    return RaceRunner(workers=1, store=None if store_dir is None else RaceStore(store_dir, 10), **numbers)


async def _play(runner: RaceRunner, spec: RaceSpec, slices: int, look: LookAt | None = None) -> list:
    hold = await runner.start(spec)
    return [await runner.advance(hold, look=look) for _ in range(slices)]


def _records(parts: list) -> list[bytes]:
    """Every record and reading of the slices as bytes: equal bytes, equal curves, bit for bit."""
    return [np.array([r.step, r.loss, r.grad_norm, r.lr, *r.floor_grad_norms]).tobytes()
            for part in parts for r in part.a + part.b] + [
        repr((part.held_out_a, part.held_out_b, part.running_a, part.running_b, part.diverged_a,
              part.diverged_b)).encode() for part in parts]


@pytest.mark.parametrize("ended", ["shutdown", "drop"])
def test_a_restarted_server_serves_a_kept_race_without_computing_it(tmp_path: Path, ended: str) -> None:
    """A race kept by one runner (when its last page lets go, or when the server shuts down) is served by the next
    on the same folder (a restart) at once, equal to the fresh computation bit for bit, without its worker taking
    a step or a place among max_races."""
    first = _steady(tmp_path)
    try:
        async def fresh():
            hold = await first.start(_spec(8))
            parts = [await first.advance(hold) for _ in range(5)]
            if ended == "drop":
                await first.drop(hold)
            return parts

        computed = asyncio.run(fresh())
    finally:
        first.shutdown()
    second = _steady(tmp_path, max_races=1)
    try:
        kept = asyncio.run(_play(second, _spec(8), 5))
        taken, races = second.steps_computed, second.races
    finally:
        second.shutdown()
    assert _records(kept) == _records(computed) and len(kept[-1].a) == 7
    assert [step for part in kept for step, _, _ in part.held_out_a] == [EVALUATE_EVERY]
    assert taken == 0 and races == 0


def test_a_kept_races_looks_say_the_step_their_recomputation_reached(tmp_path: Path) -> None:
    """Looks inside a kept race come from a worker that recomputes it toward the page's step, a slice at a time,
    and say the step they show; weights wait until it is the page's step, and equal a fresh run's there."""
    first = _steady(tmp_path)
    try:
        asyncio.run(_play(first, _spec(9), 4))  # 28 steps: enough to be kept
    finally:
        first.shutdown()
    second = _steady(tmp_path, slice_cpu_s=1e-9)  # a slice of recomputation is one step
    try:
        async def go():
            hold = await second.start(_spec(9))
            part = await second.advance(hold, look=LookAt(0, 0, always=True))
            return part, await second.look(hold, LookAt(1, 0)), await second.weights(hold), second.steps_computed

        part, again, ((steps_a, weights_a), (steps_b, _)), taken = asyncio.run(go())
    finally:
        second.shutdown()
    reference = _spec(9).build_reference()
    for _ in range(7):
        reference.step()
    assert len(part.a) == 7 and (part.look.a.steps, part.look.b.steps) == (1, 1) and again.a.steps == 2
    assert (steps_a, steps_b) == (7, 7) and taken == 7
    assert all(np.array_equal(weights_a[name], reference.a.params[name]) for name in reference.a.params)
    assert RaceStore(tmp_path, 10).load(_spec(9)) is not None  # the recomputation agreed with what was kept


def test_a_race_plays_on_when_its_store_cannot_keep_it(tmp_path: Path) -> None:
    """A store that cannot write (its folder is a file) keeps nothing, and the race plays as without a store."""
    (tmp_path / "races").write_text("not a folder")
    r = _steady(tmp_path / "races")
    try:
        parts = asyncio.run(_play(r, _spec(10), 3))
        r.flush()
    finally:
        r.shutdown()
    assert [len(part.a) for part in parts] == [7, 7, 7] and r.store.size() == 0


@pytest.mark.parametrize(("slices", "kept"), [(1, False), (4, True)])
def test_a_race_is_kept_once_it_has_evaluate_every_steps(tmp_path: Path, slices: int, kept: bool) -> None:
    """A race a page left after a slice (7 steps) is not worth a file; one of 28 steps, past EVALUATE_EVERY, is."""
    r = _steady(tmp_path)
    try:
        async def go():
            hold = await r.start(_spec(11))
            for _ in range(slices):
                await r.advance(hold)
            await r.drop(hold)

        asyncio.run(go())
        r.flush()
    finally:
        r.shutdown()
    assert (RaceStore(tmp_path, 10).load(_spec(11)) is not None) is kept


def test_a_write_that_raises_is_logged_in_one_line(tmp_path: Path, monkeypatch, caplog) -> None:
    """An unexpected error in the writer thread is logged (one line, no traceback), not lost in its future."""
    r = _steady(tmp_path)

    def broken(*_args) -> bool:
        raise RuntimeError("the store broke")

    monkeypatch.setattr(r.store, "keep", broken)
    try:
        with caplog.at_level(logging.WARNING):
            asyncio.run(_play(r, _spec(12), 4))
            r.shutdown()  # keeps what was computed: the write raises
    finally:
        r.shutdown()
    assert len(caplog.records) == 1 and caplog.records[0].exc_info is None and "the store broke" in caplog.text


def test_a_look_inside_a_kept_race_on_a_busy_server_says_why_it_waits(tmp_path: Path) -> None:
    """With max_races races computing, a look inside a kept race (which needs a replay) is refused with words a
    student reads (the curves are there; the server is busy replaying), and its slices still come, without a look."""
    first = _steady(tmp_path)
    try:
        asyncio.run(_play(first, _spec(13), 4))
    finally:
        first.shutdown()
    second = _steady(tmp_path, max_races=1)
    try:
        async def go():
            kept = await second.start(_spec(13))
            await second.start(_spec(14))  # the one place, taken
            part = await second.advance(kept, look=LookAt(0, 0, always=True))
            with pytest.raises(ConfigError, match="replay the race") as refused:
                await second.look(kept, LookAt(0, 0))
            return part, str(refused.value)

        part, message = asyncio.run(go())
    finally:
        second.shutdown()
    assert len(part.a) == 7 and part.look is None and "curves" in message
