"""`blocktrace warm`: the lesson's races computed into the data folder ahead of class, and found kept next time."""

from __future__ import annotations

from pathlib import Path

import pytest

from blocktrace.app.cli import main
from blocktrace.explorables.train_the_block.kept import RaceStore, races_dir
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
