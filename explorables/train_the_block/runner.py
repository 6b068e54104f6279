"""Races train in worker processes, off the server's event loop, a bounded slice of work at a time.

Training is CPU-bound NumPy: on the loop's thread (or any thread of the server's process, which shares its
interpreter lock) one student's race would hold up every other student's slider. So each race lives in one
worker process for its whole life: its weights and optimiser state stay there, and the page's session asks
it to advance a slice at a time and gets back what the slice measured (small: the step records and one
held-out reading). There is one worker per core by default, each a single-process executor of
concurrent.futures, so the race's calls always reach the process that holds it; a new race goes to the
worker with the fewest.

The server decides the work, whatever a page asks for: a slice ends after `slice_steps` steps or after the
step that takes it past its CPU budget (`slice_cpu_s`, shared by the races of its worker), whichever comes
first; a race takes at most training.MAX_STEPS steps; at most `max_races` races live at once (a new one beyond
that is refused with a message a student can read); and `drop` (a closed page) frees the race at once. The
workers run nicer than the server (os.nice), so its event loop, and every student's slider, comes first. A
worker that dies takes its races with it: their next call raises RaceLost, and the runner starts a fresh worker
in its place.

Kept races (kept.py). With a store, what a race computed is kept on disk (every KEEP_EVERY computed steps, when
it stops, when its last page lets go and when the server shuts down; a race of fewer than keep_least steps,
EVALUATE_EVERY by default, is not worth a file), written by a thread of the runner's own,
never by the event loop. A page that starts a set-up nobody computes now gets the kept race, if there is one: its
steps and held-out readings are served at once, each page at its own pace, with no worker computing them (and no
place among max_races taken). Looks inside the models (look, weights, cut_floor) need the model itself, which
only a computation has. The choice here: such a race gets a worker race only when a look is asked (or a step
beyond what is kept), and the worker recomputes the race from step 0 toward the step the page is at, within the
usual slice budget; a look shows the model where that recomputation is, and says so (`SideLook.steps`, the
weights' and the floor cut's steps), so a look may trail the curves for a while, never pretend to be their step
(a page whose race stands still asks again while the recomputation moves on: view.py's _free). Weights and floor
cuts (a download, a link to the lab) wait until the recomputation reaches the page's step. The
recomputed steps are compared with the kept ones, bit for bit; a difference (which the engine's version check
should make impossible) is logged and the kept file removed.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import ctypes
import itertools
import logging
import multiprocessing
import os
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field, replace
from functools import lru_cache
from multiprocessing.connection import wait

import numpy as np

from blocktrace.explorables.components.trained_floors import MAX_EXAMPLES, FloorCut, cut_floor
from blocktrace.explorables.engine import language_model as lm
from blocktrace.explorables.engine.config import MAX_LAYERS, BlockConfig, ConfigError
from blocktrace.explorables.engine.params import Params
from blocktrace.explorables.engine.stacked import StackedRace, stackable
from blocktrace.explorables.engine.stages import Stage
from blocktrace.explorables.engine.tasks import Task
from blocktrace.explorables.engine.training import Race, Run, StepRecord, TrainSettings
from blocktrace.explorables.train_the_block.kept import EVALUATE_EVERY, KeptRace, RaceStore

__all__ = ["EVALUATE_EVERY", "EXAMPLES", "KEEP_EVERY", "SESSION_WORK", "SLICE_CPU_S", "SLICE_STEPS", "Look", "LookAt",
           "RaceLost", "RaceRunner", "RaceSpec", "Reading", "SideLook", "Slice", "keep_freed_memory"]

log = logging.getLogger(__name__)

SLICE_STEPS = 50  # the most steps one slice takes ...
SLICE_CPU_S = 0.08  # ... or the CPU time after which it ends (checked between steps)
MAX_RACES = 64  # races alive at once, per server process
SESSION_WORK = 480_000  # floor-steps (a step of an n-floor model costs n) one page may train: 20 races of 12 floors
NICENESS = 10  # how much nicer than the server a worker runs (os.nice): the event loop comes first
EXAMPLES = 8  # the held-out sequences a student can look inside (the first of the held-out set)
KEEP_EVERY = 100  # computed steps after which a race is kept again (with a store)


class RaceLost(RuntimeError):
    """The race is gone: dropped, or its worker process died. Start it again."""


@dataclass(frozen=True)
class RaceSpec:
    """Everything that decides a race: its task, data seed, and each model's set-up."""

    task: Task
    data_seed: int
    config_a: BlockConfig
    config_b: BlockConfig
    settings_a: TrainSettings
    settings_b: TrainSettings

    def build(self) -> StackedRace | Race:
        """The race as the workers train it: both models stepped together (engine/stacked.py) where they can be and
        where, on this machine, that gives the same curves as one model after the other, bit for bit; else one
        after the other."""
        return self._stacked() if self.stacks() else self.build_reference()

    def stacks(self) -> bool:
        """Whether build() steps both models together (asked of this machine once per shape: _stacking_agrees)."""
        return stackable([self.config_a, self.config_b], [self.settings_a, self.settings_b]) and _stacking_agrees(
            self.task, replace(self.config_a, seed=0), replace(self.config_b, seed=0), self.settings_a,
            self.settings_b)

    def _stacked(self) -> StackedRace:
        return StackedRace([self.config_a, self.config_b], self.task, [self.settings_a, self.settings_b],
                           self.data_seed)

    def build_reference(self) -> Race:
        """The race as two training.Runs, each stepped on its own: what build() must equal."""
        return Race(Run(self.config_a, self.task, self.settings_a, self.data_seed),
                    Run(self.config_b, self.task, self.settings_b, self.data_seed))


PROBE_STEPS = 3  # steps of a race's shape stepped both ways, once per process, before its models are stacked


@lru_cache(maxsize=128)
def _stacking_agrees(task: Task, config_a: BlockConfig, config_b: BlockConfig, settings_a: TrainSettings,
                     settings_b: TrainSettings) -> bool:
    """Whether a race of this shape (its seeds aside) stepped together gives what its models give one after the
    other: PROBE_STEPS steps, the weights after them and a held-out reading, compared bit for bit. Stacking
    merges small products; whether the merged product rounds as the separate ones do is a property of the BLAS
    kernel this machine's NumPy picks (engine/stacked.py checks the forward products; this checks the rest), so
    it is asked of the machine once per shape rather than assumed. A shape that disagrees runs one model after
    the other, with one log line."""
    spec = RaceSpec(task, 0, config_a, config_b, settings_a, settings_b)
    stacked, reference = spec._stacked(), spec.build_reference()
    with np.errstate(all="ignore"):
        same = all(stacked.step() == reference.step() for _ in range(PROBE_STEPS))
        same = same and all(
            mine.params.keys() == theirs.params.keys()
            and all(np.array_equal(mine.params[name], theirs.params[name]) for name in theirs.params)
            and mine.evaluate() == theirs.evaluate()
            for mine, theirs in ((stacked.a, reference.a), (stacked.b, reference.b)))
    if not same:
        log.warning("races of %d and %d floors step one model after the other here: stepped together they round "
                    "differently on this machine's BLAS", config_a.n_layers, config_b.n_layers)
    return same


Reading = tuple[int, float, float]  # (steps taken, held-out loss, held-out accuracy)


@dataclass(frozen=True)
class Slice:
    """What one slice measured: each model's new step records, the held-out readings taken in it (after every
    EVALUATE_EVERY-th step, so where they fall never depends on how the work was sliced), whether each model
    can go on (not diverged, steps left), and the step at which each diverged (None: it has not)."""

    a: tuple[StepRecord, ...]
    b: tuple[StepRecord, ...]
    held_out_a: tuple[Reading, ...]
    held_out_b: tuple[Reading, ...]
    running_a: bool
    running_b: bool
    diverged_a: int | None = None
    diverged_b: int | None = None
    look: Look | None = None  # both models on the example asked for, after the slice (see RaceRunner.advance)


@dataclass(frozen=True)
class SideLook:
    """One model on one held-out sequence, at its current weights: the attention weights of one floor (every
    head), that floor's stages (the engine's trace, as the other explorables show it) and the model's answer at
    each position. A floor the model does not have gives no weights and no stages."""

    steps: int  # the steps the model had taken
    pattern: np.ndarray | None  # [n_heads, pos, pos]
    stages: tuple[Stage, ...]  # the floor's stages in forward order, each [pos, ...]
    answers: np.ndarray  # [pos] the most likely token at each position


@dataclass(frozen=True)
class LookAt:
    """What a page looks at inside the models: which held-out example and which floor; `always` asks for a look
    after this slice, else one comes only with a slice that took a held-out reading (every EVALUATE_EVERY steps)."""

    example: int
    floor: int
    always: bool = False

    def __post_init__(self) -> None:
        if not (isinstance(self.example, int) and isinstance(self.floor, int)
                and 0 <= self.example < EXAMPLES and 0 <= self.floor < MAX_LAYERS):
            raise ConfigError(f"there is no example {self.example!r} or floor {self.floor!r} to look at")


@dataclass(frozen=True)
class Look:
    """Both models on the same held-out sequence: its tokens, targets and which positions are scored."""

    example: int  # which held-out sequence
    floor: int  # which floor the patterns and stages are of
    tokens: np.ndarray  # [pos]
    targets: np.ndarray  # [pos]
    scored: np.ndarray  # [pos] bool
    a: SideLook
    b: SideLook


# --- in the worker process ---------------------------------------------------------------------

_RACES: dict[int, Race] = {}  # this worker's races, by id


def _race(race_id: int) -> Race:
    """This worker's race `race_id`; RaceLost if it holds none (dropped, or its worker was replaced)."""
    race = _RACES.get(race_id)
    if race is None:
        raise RaceLost(f"race {race_id} is not running here")
    return race


def _start(race_id: int, spec: RaceSpec) -> None:
    _RACES[race_id] = spec.build()


def _advance(race_id: int, max_steps: int, cpu_s: float, look: LookAt | None = None, known: int = 0) -> Slice:
    """At most `max_steps` steps (fewer once `cpu_s` is spent). Steps up to `known` are recomputed (the race is
    kept): their held-out readings are known already, and are not taken again."""
    race = _race(race_id)
    before_a, before_b = race.a.step_count, race.b.step_count
    readings: tuple[list[Reading], list[Reading]] = ([], [])
    start = time.thread_time()
    for _ in range(max_steps):  # at least one step when asked for any, so every slice makes progress
        if not (race.a.running or race.b.running):
            break
        for run, record, taken in zip((race.a, race.b), race.step(), readings, strict=True):
            if record is not None and run.step_count % EVALUATE_EVERY == 0 and run.step_count > known:
                taken.append((run.step_count, *run.evaluate()))
        if time.thread_time() - start >= cpu_s:
            break
    seen = None
    if look is not None and (look.always or readings[0] or readings[1]):
        seen = _look_inside(race, look.example, look.floor)
    return Slice(tuple(race.a.steps[before_a:]), tuple(race.b.steps[before_b:]), tuple(readings[0]),
                 tuple(readings[1]), race.a.running, race.b.running, race.a.diverged_at, race.b.diverged_at, seen)


def _look_at(run: Run, tokens: np.ndarray, floor: int) -> SideLook:
    trace, logits = lm.trace_sequence(run.config, run.params, tokens, run.task.vocab)
    prefix = f"blocks.{floor}."
    stages = tuple(stage for stage in trace if stage.key.startswith(prefix))
    pattern = trace[prefix + "attn.pattern"] if stages else None
    return SideLook(run.step_count, pattern, stages, logits.argmax(axis=-1))


def _look(race_id: int, example: int, floor: int) -> Look:
    return _look_inside(_race(race_id), example, floor)


def _look_inside(race: Race, example: int, floor: int) -> Look:
    held = race.a.held_out  # both runs of a race read the same held-out set
    tokens = held.tokens[example]
    with np.errstate(all="ignore"):  # a diverged model's numbers are shown as they are
        return Look(example, floor, tokens, held.targets[example], held.scored[example],
                    _look_at(race.a, tokens, floor), _look_at(race.b, tokens, floor))


def _weights(race_id: int) -> tuple[tuple[int, Params], tuple[int, Params]]:
    race = _race(race_id)
    return (race.a.step_count, race.a.params), (race.b.step_count, race.b.params)


def _cut(race_id: int, which: int, floor: int, example: int) -> FloorCut:
    run = (_race(race_id).a, _race(race_id).b)[which]
    sequences = run.held_out.tokens[example:example + MAX_EXAMPLES]
    with np.errstate(all="ignore"):  # a diverged model's numbers are kept as they are
        return cut_floor(run.config, run.params, floor, sequences, run.task.vocab, run.step_count)


def _worker_start(niceness: int) -> None:
    """Worker start-up. Training yields the CPU to the server's event loop: the worker runs `niceness` steps
    nicer (os.nice), so a class's sliders keep their latency while races play (benchmarks/race_class.py). And it
    ends as soon as the server's process is gone, however it ended (a killed server leaves no worker behind);
    multiprocessing gives the child its parent's sentinel for this."""
    if niceness:
        os.nice(niceness)
    keep_freed_memory()
    parent = multiprocessing.parent_process()
    if parent is not None:
        threading.Thread(target=lambda: (wait([parent.sentinel]), os._exit(0)), daemon=True,
                         name="blocktrace-race-worker-parent").start()


def keep_freed_memory() -> None:
    """Let this worker's malloc keep the memory a step frees for the next step (glibc only; elsewhere nothing).

    A step of a race allocates and frees a few hundred arrays of 50–200 KB. glibc serves blocks above its mmap
    threshold (128 KB at first) with fresh pages from the kernel and gives them back on free, so every such
    array pays its page faults again: a third of a stacked step's time (benchmarks/race_speed.py). Raising the
    thresholds keeps the pages in the heap. M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD are malloc.h's -1, -2,
    -3.
    """
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc: its allocator is left as it is
        return
    for option, value in ((-3, 32 << 20), (-1, 256 << 20), (-2, 64 << 20)):
        mallopt(ctypes.c_int(option), ctypes.c_int(value))


def _bits(record: StepRecord) -> bytes:
    """A step record's numbers as bytes: equal bytes, equal records (NaN included)."""
    return np.array([record.step, record.loss, record.grad_norm, record.lr, *record.floor_grad_norms],
                    dtype=np.float64).tobytes()


def _drop(race_id: int) -> bool:
    return _RACES.pop(race_id, None) is not None


def _count() -> int:
    return len(_RACES)


# --- in the server -----------------------------------------------------------------------------


@dataclass
class _Shared:
    """One computation of a set-up, in one worker, and everything it has computed so far: every page that plays
    the set-up reads it from here, each at its own step (a _Hold)."""

    spec: RaceSpec
    race_id: int | None  # the race's id in its worker (None: a kept race no worker recomputes yet)
    holds: set[int] = field(default_factory=set)
    a: list[StepRecord] = field(default_factory=list)
    b: list[StepRecord] = field(default_factory=list)
    held_out_a: list[Reading] = field(default_factory=list)
    held_out_b: list[Reading] = field(default_factory=list)
    running_a: bool = True  # as the worker's race is at the last step computed
    running_b: bool = True
    diverged_a: int | None = None
    diverged_b: int | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)  # one page computes, the others wait and read
    live: int = 0  # steps the worker's model has taken (fewer than `computed` while a kept race is recomputed)
    kept: int = 0  # steps the store has (or is writing) of this race
    trusted: bool = True  # False once a recomputation differed from what was kept: kept no more

    @classmethod
    def of_kept(cls, spec: RaceSpec, race: KeptRace) -> _Shared:
        return cls(spec, None, a=list(race.a), b=list(race.b), held_out_a=list(race.held_out_a),
                   held_out_b=list(race.held_out_b), running_a=race.running_a, running_b=race.running_b,
                   diverged_a=race.diverged_a, diverged_b=race.diverged_b, kept=race.steps)

    def snapshot(self) -> KeptRace:
        """What the race has computed, to keep (copies: the race goes on while it is written)."""
        return KeptRace(tuple(self.a), tuple(self.b), tuple(self.held_out_a), tuple(self.held_out_b),
                        self.running_a, self.running_b, self.diverged_a, self.diverged_b)

    @property
    def computed(self) -> int:
        """Steps the race has taken (a model that stopped has fewer records than this)."""
        return max(len(self.a), len(self.b))

    def add(self, part: Slice) -> None:
        self.a.extend(part.a)
        self.b.extend(part.b)
        self.held_out_a.extend(part.held_out_a)
        self.held_out_b.extend(part.held_out_b)
        if self.live >= self.computed:  # the worker's race is at the newest step: its state is the race's
            self.running_a, self.running_b = part.running_a, part.running_b
            self.diverged_a, self.diverged_b = part.diverged_a, part.diverged_b

    def part(self, start: int, stop: int, look: Look | None) -> Slice:
        """Steps start … stop - 1 as one slice would have given them, had the race been computed for this page."""
        def side(records: list[StepRecord], readings: list[Reading], running: bool, diverged: int | None):
            return (tuple(records[min(start, len(records)):min(stop, len(records))]),
                    tuple(r for r in readings if start < r[0] <= stop),
                    stop < len(records) or running,
                    diverged if diverged is not None and diverged < stop else None)

        a, held_a, running_a, diverged_a = side(self.a, self.held_out_a, self.running_a, self.diverged_a)
        b, held_b, running_b, diverged_b = side(self.b, self.held_out_b, self.running_b, self.diverged_b)
        return Slice(a, b, held_a, held_b, running_a, running_b, diverged_a, diverged_b, look)


@dataclass
class _Hold:
    """One page's hold on a shared race: the steps it has been given so far."""

    shared: _Shared
    step: int = 0


class RaceRunner:
    """The server's side: starts races in its workers, advances them a slice at a time, drops them.

    A race is a pure function of its set-up, so each distinct set-up is computed once (a _Shared, in one worker)
    and every page that plays it holds it (a _Hold, whose id `start` returns): a page's slice is read from what
    the race has computed, and only the page at the front asks the worker for more. Each page goes at its own
    pace (pausing one stops no other), and a race is freed when its last hold is dropped. The limits count
    computations: max_races distinct races at once, and the CPU of a worker's slices shared among the races it
    computes; each page's share of work (session_work) is counted by the page in steps it is given, computed or
    not, as before. With a `store` (kept.py), computed races are kept, and a kept race is served without computing
    it again (the module's docstring says how its looks stay honest).
    """

    def __init__(self, workers: int | None = None, slice_steps: int = SLICE_STEPS, slice_cpu_s: float = SLICE_CPU_S,
                 max_races: int = MAX_RACES, session_work: int = SESSION_WORK, niceness: int = NICENESS,
                 store: RaceStore | None = None, keep_every: int = KEEP_EVERY,
                 keep_least: int = EVALUATE_EVERY) -> None:
        self.n_workers = max(1, workers or os.cpu_count() or 1)
        self.niceness = niceness
        self.session_work = session_work  # the page's view holds each page to it (view.py)
        self.slice_steps, self.slice_cpu_s, self.max_races = slice_steps, slice_cpu_s, max_races
        self._context = multiprocessing.get_context("spawn")  # never fork a server with threads
        self._workers: list[ProcessPoolExecutor | None] = [None] * self.n_workers
        self._where: dict[int, int] = {}  # worker race id -> worker index
        self._shared: dict[RaceSpec, _Shared] = {}  # set-up -> its one computation
        self._holds: dict[int, _Hold] = {}  # hold id (what pages know) -> its place in a shared race
        self._ids = itertools.count(1)
        self.steps_computed = 0  # race steps the workers have taken, over all races (tests, benchmarks)
        self._making = threading.Lock()  # pages may open (and warm the workers) on other threads than the loop's
        self.store, self.keep_every = store, keep_every
        self.keep_least = keep_least  # steps a race needs to be kept: a page that left after a step is not worth a file
        self._keeper: concurrent.futures.ThreadPoolExecutor | None = None  # writes kept races off the loop
        self._keeping: list[concurrent.futures.Future] = []

    @property
    def races(self) -> int:
        """Races computed at once (each distinct set-up one, however many pages hold it)."""
        return len(self._where)

    @property
    def holds(self) -> int:
        """Pages holding a race."""
        return len(self._holds)

    def worker_steps(self, hold_id: int) -> int:
        """Steps a worker has taken for the hold's race (0 for a kept race served as it was kept)."""
        return self._hold(hold_id).shared.live

    def race_steps(self, hold_id: int) -> int:
        """Steps the hold's race has, kept or computed (for any page)."""
        return self._hold(hold_id).shared.computed

    def warm(self, spec: RaceSpec | None = None) -> None:
        """Start every worker process that is not running yet, without waiting for it: a page calls this when it
        opens, so a worker's start (a new interpreter importing NumPy and the engine, near a second on a busy
        machine) is over long before anyone presses Play. With `spec` (the page's race), each new worker also
        checks once whether races of its shape may be stacked (_stacking_agrees), which a first race would wait
        for."""
        for index, worker in enumerate(self._workers):
            if worker is None:
                try:
                    self._worker(index).submit(_count) if spec is None else self._worker(index).submit(spec.stacks)
                except (BrokenProcessPool, RuntimeError):  # one that cannot start now is started with a race
                    pass

    def _worker(self, index: int) -> ProcessPoolExecutor:
        with self._making:
            worker = self._workers[index]
            if worker is None:
                worker = self._workers[index] = ProcessPoolExecutor(max_workers=1, mp_context=self._context,
                                                                    initializer=_worker_start,
                                                                    initargs=(self.niceness,))
            return worker

    async def _call(self, index: int, fn, *args):
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._worker(index), fn, *args)
        except BrokenProcessPool as error:
            lost = [race for race, where in self._where.items() if where == index]
            for race in lost:
                del self._where[race]
            for spec, shared in list(self._shared.items()):
                if shared.race_id in lost:  # its pages' holds go with it: their next call raises RaceLost
                    del self._shared[spec]
                    for hold in shared.holds:
                        self._holds.pop(hold, None)
            broken, self._workers[index] = self._workers[index], None
            if broken is not None:
                broken.shutdown(wait=False, cancel_futures=True)
            log.warning("a training worker died; %d race(s) lost, a new worker takes its place", len(lost))
            raise RaceLost("the training worker stopped; start the race again") from error

    def _hold(self, hold_id: int) -> _Hold:
        """The hold `hold_id`; RaceLost if there is none (dropped, or its race's worker died)."""
        hold = self._holds.get(hold_id)
        if hold is None:
            raise RaceLost(f"there is no race {hold_id}")
        return hold

    def _index(self, hold_id: int) -> tuple[int, int]:
        """(worker index, worker race id) of the race hold `hold_id` plays; RaceLost if no worker computes it."""
        race_id = self._hold(hold_id).shared.race_id
        index = self._where.get(race_id)
        if index is None:
            raise RaceLost(f"there is no race {hold_id} in a worker")
        return index, race_id

    async def _worker_of(self, shared: _Shared) -> tuple[int, int]:
        """(worker index, worker race id) of the shared race: a kept race gets a worker race from step 0 when it is
        first asked for its models (ConfigError when the server already computes max_races races); RaceLost if
        its worker died."""
        if shared.race_id is None:
            if self._shared.get(shared.spec) is not shared:
                raise RaceLost("the race was let go")
            if self.races >= self.max_races:
                raise ConfigError("This race's curves were kept, but looking inside its models needs the server to "
                                  f"replay the race, and it is busy with {self.max_races} other races: its curves "
                                  "are shown; try the look again in a minute.")
            await self._place(shared)
        index = self._where.get(shared.race_id)
        if index is None:
            raise RaceLost("there is no such race")
        return index, shared.race_id

    async def _place(self, shared: _Shared) -> None:
        """Build the shared race in the least busy worker, from step 0."""
        if self.races >= self.max_races:
            raise ConfigError(f"the server is already training {self.max_races} races; try again in a minute")
        counts = [0] * self.n_workers
        for index in self._where.values():
            counts[index] += 1
        index = counts.index(min(counts))
        race_id = next(self._ids)
        self._where[race_id] = index  # counted at once, so races started together spread out
        shared.race_id, shared.live = race_id, 0
        try:
            await self._call(index, _start, race_id, shared.spec)
        except BaseException:
            self._where.pop(race_id, None)
            shared.race_id = None
            raise

    async def start(self, spec: RaceSpec, replacing: int | None = None) -> int:
        """A hold on the race of `spec`, from step 0: on the race already computed for it if there is one, else on
        a new race built in the least busy worker. `replacing` (the page's previous hold) is dropped; when the
        set-up is the same, its computed steps are kept for the new hold. ConfigError when the server already
        computes max_races races."""
        shared = self._shared.get(spec)
        if shared is None:
            if replacing is not None:
                await self.drop(replacing)
                replacing = None
            kept = None if self.store is None else self.store.load(spec)
            if self._shared.get(spec) is not None:  # another page started it meanwhile
                shared = self._shared[spec]
            elif kept is not None:
                shared = self._shared[spec] = _Shared.of_kept(spec, kept)
            else:
                shared = await self._new_race(spec)
        hold_id = next(self._ids)
        self._holds[hold_id] = _Hold(shared)
        shared.holds.add(hold_id)
        if replacing is not None:
            await self.drop(replacing)
        return hold_id

    async def _new_race(self, spec: RaceSpec) -> _Shared:
        if self.races >= self.max_races:
            raise ConfigError(f"the server is already training {self.max_races} races; try again in a minute")
        shared = self._shared[spec] = _Shared(spec, None)
        try:
            await self._place(shared)
        except BaseException:
            if self._shared.get(spec) is shared:
                del self._shared[spec]
            raise
        return shared

    async def advance(self, hold_id: int, steps: int | None = None, look: LookAt | None = None) -> Slice:
        """The hold's next slice: at most `steps` (never more than slice_steps) steps. Steps the race has already
        computed (for another page) are given at once; at the front, the worker computes a slice within
        slice_cpu_s. With `look`, the slice also brings a look inside both models when it took a held-out reading
        (or always): at the race's newest step (its `steps` say which), in the same call when the page is at
        the front."""
        hold = self._hold(hold_id)
        shared = hold.shared
        limit = self.slice_steps if steps is None else max(0, min(int(steps), self.slice_steps))
        computed_look = None
        if limit and hold.step >= shared.computed and (shared.running_a or shared.running_b):
            async with shared.lock:  # one page at the front computes; the others wait for it, then read
                if self._holds.get(hold_id) is not hold:
                    raise RaceLost(f"there is no race {hold_id}")
                if hold.step >= shared.computed and (shared.running_a or shared.running_b):
                    computed_look = await self._compute(shared, shared.computed + limit, look)
        # Steps already computed are read at once, never waiting behind the page that computes the next ones.
        start = hold.step
        hold.step = min(start + limit, shared.computed)
        served = shared.part(start, hold.step, None)
        if look is not None and (look.always or served.held_out_a or served.held_out_b):
            if computed_look is None or hold.step != shared.computed or shared.live != shared.computed:
                try:
                    computed_look = await self._look_toward(hold_id, hold.step, look)
                except ConfigError:  # a kept race, and no room to recompute it: its curves come without a look
                    computed_look = None
            served = replace(served, look=computed_look)
        return served

    async def _compute(self, shared: _Shared, stop: int, look: LookAt | None) -> Look | None:
        """One slice of the worker's race toward step `stop` (its lock held): steps the race has not computed are
        added, steps recomputed (a kept race) are checked against what was kept. The slice's look, if any."""
        index, race_id = await self._worker_of(shared)
        part = await self._call(index, _advance, race_id, max(1, stop - shared.live), self.slice_cpu(index), look,
                                shared.computed)
        taken = max(len(part.a), len(part.b))
        self.steps_computed += taken
        shared.live += taken
        fresh = []
        for records, mine in ((part.a, shared.a), (part.b, shared.b)):
            known = [r for r in records if r.step < len(mine)]
            if shared.trusted and any(_bits(r) != _bits(mine[r.step]) for r in known):
                shared.trusted = False
                log.warning("a kept race differs from its recomputation; it is kept no more")
                if self.store is not None:
                    self.store.forget(shared.spec)
            fresh.append(records[len(known):])
        shared.add(replace(part, a=fresh[0], b=fresh[1]))
        if shared.computed - shared.kept >= self.keep_every or not (shared.running_a or shared.running_b):
            self._keep(shared)
        return part.look

    async def _catch_up(self, hold_id: int, step: int, slices: int | None) -> tuple[_Shared, int, int]:
        """The hold's race in its worker, its model brought toward step `step` of a kept race it recomputes (at most
        `slices` slices; None: until it is there): (shared race, worker index, worker race id)."""
        shared = self._hold(hold_id).shared
        done, before = 0, -1
        while True:
            async with shared.lock:
                if self._holds.get(hold_id) is None:
                    raise RaceLost(f"there is no race {hold_id}")
                index, race_id = await self._worker_of(shared)
                if (shared.live >= min(step, shared.computed) or shared.live == before
                        or (slices is not None and done >= slices)):  # there, stopped, or as far as asked
                    return shared, index, race_id
                before = shared.live
                await self._compute(shared, step, None)
                done += 1

    async def _look_toward(self, hold_id: int, step: int, look: LookAt) -> Look:
        """Both models, at the race's newest step, or for a kept race, where its recomputation got to after one
        more slice toward `step` (the look says which)."""
        shared, index, race_id = await self._catch_up(hold_id, step, 1)
        return await self._call(index, _look, race_id, look.example, look.floor)

    def slice_cpu(self, index: int) -> float:
        """The CPU budget of a slice in worker `index`: slice_cpu_s shared by the races it trains, so that with
        many races each page's turn comes round as often as the work allows (a slice still takes one step)."""
        sharing = sum(where == index for where in self._where.values())
        return self.slice_cpu_s / max(1, sharing)

    async def look(self, hold_id: int, look: LookAt) -> Look:
        """Both models of the race as they are now, on the example and floor `look` names (no step taken; a kept
        race's recomputation takes a slice toward the page's step first)."""
        return await self._look_toward(hold_id, self._hold(hold_id).step, look)

    async def weights(self, hold_id: int) -> tuple[tuple[int, Params], tuple[int, Params]]:
        """Each model's steps taken and current parameters (a kept race recomputed up to the page's step first)."""
        _, index, race_id = await self._catch_up(hold_id, self._hold(hold_id).step, None)
        return await self._call(index, _weights, race_id)

    async def cut_floor(self, hold_id: int, which: int, floor: int, example: int) -> FloorCut:
        """Floor `floor` of model A (which 0) or B (1) as it is now, with the stream entering it on held-out
        sequences `example` onwards (components/trained_floors.py); ValueError if the model has no such floor. A
        kept race is recomputed up to the page's step first."""
        _, index, race_id = await self._catch_up(hold_id, self._hold(hold_id).step, None)
        return await self._call(index, _cut, race_id, which, floor, example)

    def _release(self, hold_id: int) -> tuple[int, int] | None:
        """Forget the hold; (worker index, race id) of its race when that was the race's last hold, to free."""
        hold = self._holds.pop(hold_id, None)
        if hold is None:
            return None
        shared = hold.shared
        shared.holds.discard(hold_id)
        if shared.holds:
            return None
        if self._shared.get(shared.spec) is shared:
            del self._shared[shared.spec]
        self._keep(shared)
        index = self._where.pop(shared.race_id, None)
        return None if index is None else (index, shared.race_id)

    async def drop(self, hold_id: int) -> None:
        """Let go of the hold (its page closed, or a new race replaces it); the race is freed at once when no page
        holds it any more. Nothing if the hold is gone."""
        freed = self._release(hold_id)
        if freed is not None:
            try:
                await self._call(freed[0], _drop, freed[1])
            except RaceLost:
                pass

    def forget(self, hold_id: int) -> None:
        """Let go of the hold without waiting (a closed page, from whatever thread its end runs on): a race no
        page holds any more is dropped through its worker's queue, which needs no event loop."""
        freed = self._release(hold_id)
        worker = None if freed is None else self._workers[freed[0]]
        if worker is not None:
            try:
                worker.submit(_drop, freed[1])
            except (BrokenProcessPool, RuntimeError):  # the worker died or was shut down: the race went with it
                pass

    async def held_in_workers(self) -> int:
        """How many races the workers hold (for tests and /health: it must equal `races`)."""
        held = 0
        for index, worker in enumerate(self._workers):
            if worker is not None:
                held += await self._call(index, _count)
        return held

    def _keep(self, shared: _Shared) -> None:
        """Keep what the race computed, if the store has less of it and it has keep_least steps, in the writer
        thread (from any thread)."""
        if (self.store is None or not shared.trusted or shared.computed <= shared.kept
                or shared.computed < self.keep_least):
            return
        shared.kept = shared.computed
        with self._making:
            if self._keeper is None:
                self._keeper = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="blocktrace-race-keeper")
            self._keeping = [future for future in self._keeping if not future.done()]
            self._keeping.append(self._keeper.submit(self._write, shared.spec, shared.snapshot()))

    def _write(self, spec: RaceSpec, race: KeptRace) -> None:
        """The writer thread's task: the store logs what it expects to fail (a full disk); anything else is logged
        here, in one line, rather than kept unread in a future."""
        try:
            self.store.keep(spec, race)
        except Exception as error:
            log.warning("a computed race could not be kept (%s: %s)", type(error).__name__, error)

    def flush(self) -> None:
        """Wait until every race handed to the store is written (or has failed to be)."""
        with self._making:
            pending = list(self._keeping)
        concurrent.futures.wait(pending)

    def shutdown(self) -> None:
        for shared in list(self._shared.values()):  # what was computed since the last keep
            self._keep(shared)
        self.flush()
        if self._keeper is not None:
            self._keeper.shutdown(wait=True)
            self._keeper = None
        for index, worker in enumerate(self._workers):
            if worker is not None:
                worker.shutdown(wait=True, cancel_futures=True)
                self._workers[index] = None
        self._where.clear()
        self._shared.clear()
        self._holds.clear()
