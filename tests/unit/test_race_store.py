"""The kept-race store (train_the_block/kept.py): a race read back equals the race kept, bit for bit; the folder
keeps to its size, least recently used out first; a file that is not this set-up's whole race of this engine is
never used; and a store that cannot write never fails the race."""

from __future__ import annotations

import errno
import logging
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

from blocktrace.explorables.engine import tasks as task_data
from blocktrace.explorables.engine.config import MAX_LAYERS
from blocktrace.explorables.engine.training import DEFAULT_SETUPS, MAX_STEPS, StepRecord, TrainSettings
from blocktrace.explorables.train_the_block.kept import KeptRace, RaceStore, engine_version
from blocktrace.explorables.train_the_block.runner import RaceSpec


def _spec(seed: int = 0) -> RaceSpec:
    setup = DEFAULT_SETUPS["copy"]
    return RaceSpec(task_data.make_task("copy"), seed, setup.config.with_(placement="pre", n_layers=2),
                    setup.config.with_(placement="post", n_layers=2), setup.settings, TrainSettings(lr=0.01))


def _race(steps: int = 60, diverged_b: int | None = None) -> KeptRace:
    """A race's records with awkward numbers: negative zero, a tiny subnormal, NaN and infinity where one diverged."""
    rng = np.random.default_rng(steps)

    def side(n: int) -> tuple[StepRecord, ...]:
        return tuple(StepRecord(i, float(rng.normal()), float(rng.random()), 1e-3 / (i + 1),
                                (float(rng.normal()), -0.0, 5e-324)) for i in range(n))

    b = side(steps if diverged_b is None else diverged_b + 1)
    if diverged_b is not None:
        b = (*b[:-1], StepRecord(diverged_b, float("nan"), float("inf"), 0.01, (float("nan"), 0.0, 1.0)))
    return KeptRace(side(steps), b, tuple((s, float(rng.random()), s / 100) for s in range(25, steps + 1, 25)),
                    tuple((s, 1.5, 0.125) for s in (min(25, len(b)),) if s), True, diverged_b is None, None,
                    diverged_b)


def _bits(race: KeptRace) -> list[bytes]:
    return [np.array([r.step, r.loss, r.grad_norm, r.lr, *r.floor_grad_norms]).tobytes() for r in race.a + race.b]


@pytest.mark.parametrize(("steps", "diverged_b"), [(60, None), (60, 7), (0, None)])
def test_a_kept_race_reads_back_bit_for_bit(tmp_path: Path, steps: int, diverged_b: int | None) -> None:
    """Every record, reading and state comes back exactly as kept (NaN, -0.0 and subnormals included)."""
    store, race = RaceStore(tmp_path, 10), _race(steps, diverged_b)
    assert store.keep(_spec(), race)
    back = store.load(_spec())
    assert back is not None and _bits(back) == _bits(race)
    assert (back.held_out_a, back.held_out_b) == (race.held_out_a, race.held_out_b)
    assert (back.running_a, back.running_b, back.diverged_a, back.diverged_b) == (True, diverged_b is None, None,
                                                                                 diverged_b)
    assert store.load(_spec(1)) is None  # another set-up: none kept


def test_the_store_keeps_to_its_size_least_recently_used_out_first(tmp_path: Path) -> None:
    """Past the limit the race used longest ago goes; reading a race counts as a use."""
    size = RaceStore(tmp_path / "probe", 10)
    size.keep(_spec(), _race())
    one = size.size()
    store = RaceStore(tmp_path / "kept", 2.5 * one / 1e6)  # room for two races, not three
    for seed in (0, 1):
        store.keep(_spec(seed), _race())
    os.utime(store.path(_spec(0)), (1_000, 1_000))
    os.utime(store.path(_spec(1)), (2_000, 2_000))
    store.load(_spec(0))  # used now: seed 1's race is the oldest
    store.keep(_spec(2), _race())
    assert [store.load(_spec(seed)) is not None for seed in (0, 1, 2)] == [True, False, True]
    assert store.size() <= store.limit_bytes


def _truncated(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _garbage(path: Path) -> None:
    path.write_bytes(b"not a zip file at all")


def _other_version(path: Path) -> None:
    RaceStore(path.parent, 10, version="an older engine").keep(_spec(), _race())


def _other_spec(path: Path) -> None:
    other = RaceStore(path.parent, 10)
    other.keep(_spec(5), _race())
    os.replace(other.path(_spec(5)), path)


def _inconsistent(path: Path) -> None:
    with np.load(path) as arrays:
        found = dict(arrays)
    found["a_step"] = found["a_step"][::-1].copy()
    np.savez(path, **found)


def _pickled(path: Path) -> None:
    with np.load(path) as arrays:
        found = dict(arrays)
    found["spec"] = np.array([{"a": 1}], dtype=object)
    np.savez(path, **found)


def _changed(name: str, **change):
    """A spoiler, `name`, that rewrites the file's arrays with `change` (array: function of the arrays), as
    np.savez does."""
    def spoil(path: Path) -> None:
        with np.load(path) as arrays:
            found = dict(arrays)
        found.update({name: make(found) for name, make in change.items()})
        np.savez(path, **found)
    spoil.__name__ = name
    return spoil


def _deflated(path: Path) -> None:
    with np.load(path) as arrays:
        found = dict(arrays)
    np.savez_compressed(path, **found)  # a deflated member could unpack to anything: a zip bomb


def _huge(path: Path) -> None:
    os.truncate(path, 8 * MAX_STEPS * (MAX_LAYERS + 1) * 4)  # more than two models' records of the most floors


_SPOILERS = [_truncated, _garbage, _other_version, _other_spec, _inconsistent, _pickled, _deflated, _huge,
             _changed("another_member", extra=lambda found: np.zeros(3)),
             _changed("too_many_steps", a_step=lambda found: np.arange(MAX_STEPS + 1)),
             _changed("oversized_member", a_held=lambda found: np.zeros((2 * MAX_STEPS, 2))),
             _changed("floors_the_model_lacks", a_floors=lambda found: np.zeros((len(found["a_step"]), 3 + 1))),
             _changed("readings_out_of_order", a_held_steps=lambda found: found["a_held_steps"][::-1].copy()),
             _changed("readings_beyond_the_steps", a_held_steps=lambda found: found["a_held_steps"] + 100)]


@pytest.mark.parametrize("spoil", _SPOILERS, ids=[spoil.__name__ for spoil in _SPOILERS])
def test_a_file_that_is_not_this_races_is_ignored_and_removed(tmp_path: Path, spoil, caplog) -> None:
    """A corrupt, truncated, other-engine, other-set-up, inconsistent or pickled file, a deflated or oversized one,
    one with another member, more than MAX_STEPS steps, floors the models lack, or held-out readings out of order
    or beyond its steps is not used, and goes."""
    store = RaceStore(tmp_path, 10)
    store.keep(_spec(), _race())
    spoil(store.path(_spec()))
    with caplog.at_level(logging.WARNING):
        assert store.load(_spec()) is None
    assert not store.path(_spec()).exists()
    assert len(caplog.records) == 1 and caplog.records[0].exc_info is None


def test_the_engine_version_is_a_digest_that_decides_the_file(tmp_path: Path) -> None:
    """The version is a digest of the engine's sources; a store of another version does not read this one's."""
    assert len(engine_version()) == 64
    RaceStore(tmp_path, 10).keep(_spec(), _race())
    assert RaceStore(tmp_path, 10, version="tomorrow's engine").load(_spec()) is None


def _not_a_folder(store: RaceStore, monkeypatch) -> None:
    store.directory.write_text("a file where the folder should be")


def _no_permission(store: RaceStore, monkeypatch) -> None:
    def refused(*_args, **_kwargs):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))

    store.directory.mkdir()
    monkeypatch.setattr(tempfile, "mkstemp", refused)  # a read-only folder, as root cannot make one


def _full_disk(store: RaceStore, monkeypatch) -> None:
    def full(*_args):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "replace", full)


@pytest.mark.parametrize("break_it", [_not_a_folder, _no_permission, _full_disk])
def test_a_store_that_cannot_write_logs_one_line_and_keeps_nothing(tmp_path: Path, break_it, monkeypatch,
                                                                   caplog) -> None:
    """No folder, no permission or a full disk: keep says False, logs one line (no traceback, not again on the
    next failure), leaves no temporary file behind, and the next load finds nothing."""
    store = RaceStore(tmp_path / "races", 10)
    break_it(store, monkeypatch)
    with caplog.at_level(logging.WARNING):
        assert not store.keep(_spec(), _race())
        assert not store.keep(_spec(1), _race())
    monkeypatch.undo()
    assert len(caplog.records) == 1 and caplog.records[0].exc_info is None and "could not be kept" in caplog.text
    assert not list(tmp_path.glob("races/.race-*")) and store.load(_spec()) is None


def test_the_engine_version_follows_the_machines_arithmetic(monkeypatch) -> None:
    """Another BLAS kernel gives a small race other last bits (kept._arithmetic): the version is then another, so a
    data folder copied to that machine is computed afresh there (tests/unit/test_stacked.py runs such kernels)."""
    from blocktrace.explorables.train_the_block import kept

    here = engine_version()
    monkeypatch.setattr(kept, "_arithmetic", lambda: b"a race rounded otherwise")
    engine_version.cache_clear()
    try:
        assert engine_version() != here
    finally:
        monkeypatch.undo()
        engine_version.cache_clear()
    assert engine_version() == here


def test_a_shorter_race_never_replaces_a_longer_one(tmp_path: Path) -> None:
    """Two servers on one folder: the race kept with fewer steps (written last) leaves the longer file as it was;
    a longer one replaces it."""
    store = RaceStore(tmp_path, 10)
    assert store.keep(_spec(), _race(60)) and store.keep(_spec(), _race(30))
    assert store.load(_spec()).steps == 60
    assert store.keep(_spec(), _race(90)) and store.load(_spec()).steps == 90


def test_eviction_removes_stale_temporary_files_and_counts_none(tmp_path: Path) -> None:
    """A temporary file an hour old (a write that died with its server) goes at the next write; a fresh one (a
    write under way) stays; neither counts as a kept race."""
    store = RaceStore(tmp_path, 10)
    stale, fresh = tmp_path / ".race-stale.tmp", tmp_path / ".race-fresh.tmp"
    for temp in (stale, fresh):
        temp.write_bytes(b"x" * 1000)
    hours_ago = time.time() - 2 * 3600
    os.utime(stale, (hours_ago, hours_ago))
    store.keep(_spec(), _race())
    assert not stale.exists() and fresh.exists()
    assert store.size() == store.path(_spec()).stat().st_size


def test_a_store_lists_its_folder_only_when_it_may_be_full(tmp_path: Path, monkeypatch) -> None:
    """Writes into a folder with room list it once (the store's index knows its own writes); the write that takes
    it past its limit lists it again, and evicts."""
    probe = RaceStore(tmp_path / "probe", 10)
    probe.keep(_spec(), _race())
    store = RaceStore(tmp_path / "kept", 2.5 * probe.size() / 1e6)  # room for two races, not three
    listed = []
    files = store._files
    monkeypatch.setattr(store, "_files", lambda: listed.append(1) or files())
    for seed in (0, 1):
        store.keep(_spec(seed), _race())
    assert len(listed) == 1
    store.keep(_spec(2), _race())
    assert len(listed) == 2 and len(list(store.directory.glob("race-*.npz"))) == 2
