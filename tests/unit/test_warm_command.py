"""`blocktrace warm`: the lesson's races computed into the data folder ahead of class, and found kept next time."""

from __future__ import annotations

from pathlib import Path

import pytest

from blocktrace.app import warm_command
from blocktrace.app.cli import main
from blocktrace.explorables.train_the_block.kept import RaceStore, races_dir
from blocktrace.explorables.train_the_block.runner import RaceRunner
from blocktrace.explorables.train_the_block.state import LESSON_RACES, RaceState


def test_warm_computes_the_races_then_finds_them_kept(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A first run computes each race asked for and says how long it took; a second finds them kept; what is
    kept is the race a page of that set-up plays."""
    argv = ["warm", "--data-dir", str(tmp_path), "--steps", "5", "--race", "placement", "--race", "depth-pattern"]
    assert main(argv) == 0
    first = capsys.readouterr().out
    assert main(argv) == 0
    second = capsys.readouterr().out
    assert first.count("computed 5 steps") == 2 and second.count("already kept") == 2, (first, second)
    assert all(f"{name} " in first for name in ("placement", "depth-pattern"))
    store = RaceStore(races_dir(tmp_path), 10)
    assert [store.load(RaceState(**LESSON_RACES[name]).spec).steps for name in ("placement", "depth-pattern")] \
        == [5, 5]


@pytest.mark.parametrize("argv", [["--steps", "0"], ["--steps", "1001"], ["--race", "no-such-race"]])
def test_warm_refuses_what_it_cannot_do(tmp_path: Path, argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """Steps outside the page's range, or a race the lesson does not have, end with status 2 and `error:`."""
    try:
        code = main(["warm", "--data-dir", str(tmp_path), *argv])
    except SystemExit as exit_:
        code = exit_.code
    captured = capsys.readouterr()
    assert code == 2 and captured.err.startswith("error:")


def test_every_lesson_race_is_a_setup_the_page_offers() -> None:
    """The races warm computes are set-ups of the page's own menus (RaceState refuses any other)."""
    assert len({RaceState(**setup).spec for setup in LESSON_RACES.values()}) == len(LESSON_RACES)


@pytest.mark.parametrize("stalled", [False, True])
def test_warm_computes_a_shorter_kept_race_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str], stalled: bool) -> None:
    """A race kept with 20 steps, warmed to 40 with slices of one step (its 20 kept steps recomputed first, slices
    that bring nothing new), is kept with 40 and counted as 20 computed; a worker that stops moving ends the command
    with status 1 and the race as it was."""
    argv = ["warm", "--data-dir", str(tmp_path), "--race", "placement", "--steps"]
    assert main([*argv, "20"]) == 0
    monkeypatch.setattr(warm_command, "SLICE_CPU_S", 1e-9)  # a slice is one step
    if stalled:
        monkeypatch.setattr(RaceRunner, "worker_steps", lambda self, hold: 0)
    capsys.readouterr()
    code = main([*argv, "40"])
    captured = capsys.readouterr()
    kept = RaceStore(races_dir(tmp_path), 10).load(RaceState(**LESSON_RACES["placement"]).spec)
    if stalled:
        assert code == 1 and "stopped short" in captured.err and kept.steps == 20
    else:
        assert code == 0 and "computed 20 steps" in captured.out and kept.steps == 40
