"""Computed races kept on disk: a race is a pure function of its set-up, so what a worker computed once is kept in
the server's data folder, and a preset is instant after its first run and after a restart.

One file a set-up, `race-<digest of the set-up>.npz` (NumPy's plain zip of arrays, read with allow_pickle=False:
no pickle of a file someone else may have written). It holds every step record and held-out reading the race
computed, whether each model was still running and where it diverged, and beside them the set-up itself (as
canonical JSON) and the engine's version: a digest of the engine's source files (which decide the numbers), with
the runner's reading interval, the file's format, NumPy's version and the machine. A file is used only when its
set-up and version are this race's and its arrays are whole and consistent; any other file under that name
(corrupt, truncated, of another version or another set-up) is removed and the race computed afresh.

A file is measured before NumPy reads it: its size, and each member's, within what a race of training.MAX_STEPS
steps of config.MAX_LAYERS floors can take, its members exactly the arrays below, stored uncompressed (as np.savez
writes them: a deflated member, a possible zip bomb, is refused).

The store is a cache. It is bounded (`limit_mb`): after a write that takes the folder past it the least recently
used files go, oldest first, until the rest fit in nine tenths of it (a load counts as a use). A store keeps an
index of the folder's sizes, so a write lists the folder only when the index says it is full or is a minute old
(other servers on the folder write too). Writes go to a temporary file in the same folder and then
`os.replace`, so a reader sees a whole file or none, also across --num-procs servers; a race never replaces a
file of its set-up that holds as many steps or more (another server's longer race), and a temporary file an
hour old (its writer died) is removed when the folder is listed. A write that fails (a full
disk, a read-only folder, no permission) keeps nothing and logs one line, once until a write works again; it
never fails the race.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import platform
import tempfile
import threading
import time
import zipfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

from blocktrace.explorables.engine.config import MAX_LAYERS
from blocktrace.explorables.engine.stacked import StackedRace
from blocktrace.explorables.engine.tasks import make_task
from blocktrace.explorables.engine.training import DEFAULT_SETUPS, MAX_STEPS, Race, Run, StepRecord, TrainSettings

__all__ = ["EVALUATE_EVERY", "FORMAT", "RACES_DIR", "KeptRace", "RaceStore", "engine_version", "races_dir", "spec_text"]

log = logging.getLogger(__name__)

EVALUATE_EVERY = 25  # steps between held-out readings (the runner takes them; a kept race's readings fall there)
FORMAT = "blocktrace-race-1"  # the layout of the arrays below; a new layout is a new name
RACES_DIR = "races"  # the store's folder, in the server's data folder
_SIDES = ("a", "b")
_ENGINE = Path(__file__).resolve().parent.parent / "engine"  # its sources decide a race's numbers
_STALE_S = 3600  # a temporary file this old is a write that died with its server: eviction removes it
_RESCAN_S = 60.0  # a store's index of the folder is rebuilt when this old (other --num-procs servers write there)
_LOW_WATER = 0.9  # eviction leaves the folder at this share of its limit, so a full store is not rescanned each write
# The most bytes each array of a file may hold: a race takes at most MAX_STEPS steps of at most MAX_LAYERS floors
# (a text at most _TEXT_CHARS characters, 4 bytes each), plus its .npy header. np.savez stores its members
# uncompressed, so a member's size is what it unpacks to (a deflated member, a possible zip bomb, is refused).
_HEADER = 4096
_TEXT_CHARS = 65_536
_MEMBER_BYTES = {"format": 4 * _TEXT_CHARS, "engine": 4 * _TEXT_CHARS, "spec": 4 * _TEXT_CHARS,
                 **{f"{side}_{name}": 8 * MAX_STEPS * width + 16 for side in _SIDES for name, width in
                    (("step", 1), ("numbers", 3), ("floors", MAX_LAYERS + 1), ("held_steps", 1), ("held", 2),
                     ("state", 0))}}
_MEMBERS = {f"{name}.npy": size + _HEADER for name, size in _MEMBER_BYTES.items()}
_FILE_BYTES = sum(_MEMBERS.values()) + 1024 * len(_MEMBERS)  # with each member's zip headers

Reading = tuple[int, float, float]  # (steps taken, held-out loss, held-out accuracy), as runner.Reading


@dataclass(frozen=True)
class KeptRace:
    """What a race computed from step 0: each model's step records and held-out readings, whether it could go on
    after its last step, and the step at which it diverged (None: it has not)."""

    a: tuple[StepRecord, ...]
    b: tuple[StepRecord, ...]
    held_out_a: tuple[Reading, ...]
    held_out_b: tuple[Reading, ...]
    running_a: bool
    running_b: bool
    diverged_a: int | None
    diverged_b: int | None

    @property
    def steps(self) -> int:
        """Steps the race took (a model that stopped has fewer records)."""
        return max(len(self.a), len(self.b))


def races_dir(data_dir: Path | str) -> Path:
    """The folder of the kept races of the server whose data folder is `data_dir`."""
    return Path(data_dir) / RACES_DIR


@cache
def engine_version() -> str:
    """A digest of the engine's source files, where the runner takes its held-out readings, the file's format,
    NumPy's version, the architecture and what this machine's arithmetic makes of a small race: a kept race made by
    any other is not this engine's."""
    digest = hashlib.sha256(f"{FORMAT} every {EVALUATE_EVERY} numpy {np.__version__} {platform.machine()}".encode())
    for path in sorted(_ENGINE.glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    digest.update(_arithmetic())
    return digest.hexdigest()


def _arithmetic() -> bytes:
    """Two steps of a small race, stepped together and one model after the other, as exact decimal text: the same
    source and NumPy give other last bits on another BLAS kernel (OpenBLAS picks one by processor), and a data
    folder copied to such a machine must not serve curves a fresh computation there would not give."""
    config = DEFAULT_SETUPS["copy"].config.with_(n_layers=2)
    configs = [config, config.with_(placement="post")]
    settings = [TrainSettings(), TrainSettings()]
    task = make_task("copy")
    reference = Race(*(Run(c, task, s, 0) for c, s in zip(configs, settings, strict=True)))
    stacked = StackedRace(configs, task, settings, 0)
    with np.errstate(all="ignore"):
        records = [race.step() for race in (stacked, reference) for _ in range(2)]
    return repr(records).encode()


def spec_text(spec) -> str:
    """The set-up (a runner.RaceSpec) as canonical JSON: equal texts, equal races."""
    sides = {name: dataclasses.asdict(getattr(spec, name))
             for name in ("config_a", "config_b", "settings_a", "settings_b")}
    return json.dumps({"task": [spec.task.id, [list(option) for option in spec.task.options]],
                       "data_seed": spec.data_seed, **sides}, sort_keys=True)


class RaceStore:
    """Kept races in one folder, at most `limit_mb` megabytes of them; `version` is the engine's (tests pass
    another to make a file of another engine)."""

    def __init__(self, directory: Path | str, limit_mb: float, version: str | None = None) -> None:
        self.directory = Path(directory)
        self.limit_bytes = int(limit_mb * 1_000_000)
        self.version = engine_version() if version is None else version
        self._failing = False  # a write failed: the next failure is not logged again
        self._lock = threading.Lock()  # writes and evictions one at a time (a server's writer thread, or a test)
        # The folder's kept races and their sizes as this store last saw them, plus its own writes since: a write
        # need not list and measure the folder while it fits (only the writer touches it, under _lock).
        self._sizes: dict[str, int] | None = None
        self._scanned = 0.0  # time.monotonic() of the last scan

    def path(self, spec) -> Path:
        """The file of this set-up's race."""
        return self.directory / f"race-{hashlib.sha256(spec_text(spec).encode()).hexdigest()[:40]}.npz"

    def load(self, spec) -> KeptRace | None:
        """The kept race of `spec`, or None: none kept, or a file that is not this set-up's, of this engine, whole
        and within a race's bounds (such a file is removed)."""
        path = self.path(spec)
        try:
            kept = self._open(path, spec)
        except OSError:  # none kept, or a folder it cannot read: nothing to say of the file
            return None
        except Exception as error:  # whatever is wrong with the file, it is not trusted
            kept, why = None, f"{type(error).__name__}: {error}"
        else:
            why = "another set-up or engine version"
        if kept is None:
            log.warning("kept race %s not used (%s); it is removed", path.name, why)
            self._remove(path)
            return None
        try:
            os.utime(path)  # a use: the least recently used go first
        except OSError:
            pass
        return kept

    def keep(self, spec, race: KeptRace) -> bool:
        """Keep `race` as the race of `spec` (replacing a file of it with fewer steps: a shorter race, say from
        another --num-procs server, never replaces a longer one), then evict the least recently used until the
        folder fits the limit; False (and one log line) if it could not be kept."""
        if self.limit_bytes <= 0:
            return False
        path = self.path(spec)
        with self._lock:
            kept = self._kept_steps(path, spec)
            if kept is not None and kept >= race.steps:
                try:
                    os.utime(path)  # as good as written: a use
                except OSError:
                    pass
                return True
            temp = None
            try:
                self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
                handle, temp = tempfile.mkstemp(prefix=".race-", suffix=".tmp", dir=self.directory)
                with os.fdopen(handle, "wb") as file:
                    np.savez(file, **self._arrays(spec, race))
                    written = file.tell()
                os.replace(temp, path)
                temp = None
            except (OSError, ValueError) as error:
                if not self._failing:
                    log.warning("a computed race could not be kept in %s (%s: %s); races still run, uncached",
                                self.directory, type(error).__name__, error)
                self._failing = True
                return False
            finally:
                if temp is not None:
                    self._remove(Path(temp))
            self._failing = False
            if self._sizes is not None:
                self._sizes[path.name] = written
            self._evict()
        return path.exists()

    def forget(self, spec) -> None:
        """Remove the kept race of `spec`, if any."""
        self._remove(self.path(spec))

    def size(self) -> int:
        """Bytes of kept races in the folder."""
        return sum(size for _, size, _ in self._files())

    # Private API

    def _open(self, path: Path, spec) -> KeptRace | None:
        """The race in the file at `path` if it is of `spec` and this engine (else None); ValueError (or another
        error of reading) if it is not a whole race within a race's bounds. The file is measured, and its members
        listed, before NumPy reads any of it."""
        with open(path, "rb") as file:
            size = os.fstat(file.fileno()).st_size
            if size > _FILE_BYTES:
                raise ValueError(f"{size:,} bytes, more than a race can take ({_FILE_BYTES:,})")
            with zipfile.ZipFile(file) as archive:
                members = archive.infolist()
            if sorted(member.filename for member in members) != sorted(_MEMBERS):
                raise ValueError("not the arrays of a kept race")
            for member in members:
                if member.compress_type != zipfile.ZIP_STORED:
                    raise ValueError(f"{member.filename} is compressed (a kept race's arrays are stored as they are)")
                if member.file_size > _MEMBERS[member.filename]:
                    raise ValueError(f"{member.filename} holds {member.file_size:,} bytes, more than a race can")
            file.seek(0)
            with np.load(file, allow_pickle=False) as arrays:
                return self._read(arrays, spec)

    def _kept_steps(self, path: Path, spec) -> int | None:
        """Steps of the race of `spec` kept at `path`; None if there is none this store would use."""
        try:
            kept = self._open(path, spec)
        except Exception:  # none, or one that load will remove
            return None
        return None if kept is None else kept.steps

    def _arrays(self, spec, race: KeptRace) -> dict[str, np.ndarray]:
        arrays = {"format": np.array(FORMAT), "engine": np.array(self.version), "spec": np.array(spec_text(spec))}
        for side in _SIDES:
            records: tuple[StepRecord, ...] = getattr(race, side)
            readings: tuple[Reading, ...] = getattr(race, f"held_out_{side}")
            diverged = getattr(race, f"diverged_{side}")
            arrays[f"{side}_step"] = np.array([r.step for r in records], dtype=np.int64)
            arrays[f"{side}_numbers"] = np.array([(r.loss, r.grad_norm, r.lr) for r in records],
                                                 dtype=np.float64).reshape(len(records), 3)
            arrays[f"{side}_floors"] = (np.array([r.floor_grad_norms for r in records], dtype=np.float64)
                                        if records else np.zeros((0, 0)))
            arrays[f"{side}_held_steps"] = np.array([r[0] for r in readings], dtype=np.int64)
            arrays[f"{side}_held"] = np.array([r[1:] for r in readings], dtype=np.float64).reshape(len(readings), 2)
            arrays[f"{side}_state"] = np.array([int(getattr(race, f"running_{side}")),
                                                -1 if diverged is None else diverged], dtype=np.int64)
        return arrays

    def _read(self, arrays, spec) -> KeptRace | None:
        """The race in `arrays` if it is of `spec`, this engine and whole; else None."""
        if (str(arrays["format"]) != FORMAT or str(arrays["engine"]) != self.version
                or str(arrays["spec"]) != spec_text(spec)):
            return None
        found = {}
        for side in _SIDES:
            steps, numbers, floors = (arrays[f"{side}_{name}"] for name in ("step", "numbers", "floors"))
            held_steps, held, state = (arrays[f"{side}_{name}"] for name in ("held_steps", "held", "state"))
            n, m = len(steps), len(held_steps)
            floors_shape = (n, getattr(spec, f"config_{side}").n_layers + 1) if n else (0, 0)  # each floor, the top
            if (n > MAX_STEPS or steps.dtype != np.int64 or not np.array_equal(steps, np.arange(n))
                    or numbers.shape != (n, 3) or floors.shape != floors_shape or held.shape != (m, 2)
                    or state.shape != (2,) or numbers.dtype != np.float64 or floors.dtype != np.float64
                    or held.dtype != np.float64 or held_steps.dtype != np.int64 or held_steps.shape != (m,)
                    or (m and (held_steps[0] < 1 or held_steps[-1] > n or np.any(np.diff(held_steps) <= 0)))):
                raise ValueError(f"the arrays of model {side.upper()} do not fit together")
            found[side] = tuple(StepRecord(int(step), float(loss), float(grad), float(lr), tuple(map(float, row)))
                                for step, (loss, grad, lr), row in zip(steps, numbers.tolist(), floors.tolist(),
                                                                       strict=True))
            found[f"held_out_{side}"] = tuple((int(s), float(loss), float(accuracy))
                                              for s, (loss, accuracy) in zip(held_steps, held.tolist(), strict=True))
            found[f"running_{side}"] = bool(state[0])
            found[f"diverged_{side}"] = None if state[1] < 0 else int(state[1])
        return KeptRace(**found)

    def _files(self) -> list[tuple[float, int, Path]]:
        """(last use, bytes, path) of every kept race in the folder."""
        files = []
        try:
            paths = list(self.directory.glob("race-*.npz"))
        except OSError:
            return []
        for path in paths:
            try:
                info = path.stat()
            except OSError:  # gone meanwhile (another server's eviction)
                continue
            files.append((info.st_mtime, info.st_size, path))
        return files

    def _evict(self) -> None:
        """When the index says the folder is over its limit (or the index is _RESCAN_S old), look at the folder
        itself: remove temporary files of writes that died with their server (older than _STALE_S: a live write is
        never that slow), then the least recently used races until the rest fit _LOW_WATER of the limit."""
        if (self._sizes is not None and time.monotonic() - self._scanned < _RESCAN_S
                and sum(self._sizes.values()) <= self.limit_bytes):
            return
        now = time.time()
        try:
            temps = list(self.directory.glob(".race-*.tmp"))
        except OSError:
            temps = []
        for temp in temps:
            try:
                if now - temp.stat().st_mtime > _STALE_S:
                    self._remove(temp)
            except OSError:  # gone meanwhile
                continue
        files = sorted(self._files(), key=lambda f: (f[0], f[2].name))
        self._sizes, self._scanned = {path.name: size for _, size, path in files}, time.monotonic()
        total = sum(self._sizes.values())
        if total <= self.limit_bytes:
            return
        for _, size, path in files:
            if total <= _LOW_WATER * self.limit_bytes:
                break
            self._remove(path)
            del self._sizes[path.name]
            total -= size

    @staticmethod
    def _remove(path: Path) -> None:
        try:
            path.unlink(missing_ok=True)
        except OSError:
            pass
