"""`kill -9` of the server while students commit: no answer a page showed as final is lost.

A few kills (the scenario is tests/app/kill_scenario.py; benchmarks/kill_final.py runs twenty and
more and prints the counts): right after the commits are sent, while they are being saved (with one
student pressing "Check answer" hundreds of times first), and once every page shows final.
"""

from __future__ import annotations

import pytest

from tests.app.kill_scenario import run_kills

STUDENTS = 6
# Four server starts and three rounds: 35 s on an idle machine, about 10 minutes at nice 10 beside two busy processes
# (starts of 45-140 s each). Every wait in the scenario is bounded on its own (START_TIMEOUT, ANSWER_TIMEOUT_S), so
# this only stops a hang, and a failure reaches its assertion first (at 900 s, a loaded run could end here instead).
TIMEOUT_S = 2400


@pytest.mark.timeout(TIMEOUT_S)
def test_no_answer_shown_as_final_is_lost_and_every_gate_agrees_with_the_store_after_a_restart(tmp_path) -> None:
    """Every answer a page showed as final is in the store after SIGKILL and a restart; every student's gate
    then shows what the store holds (final), or is open with nothing stored and a new commit becomes final."""
    rounds = run_kills(tmp_path, [0.0, 0.3, None], STUDENTS, floods=[0, 500, 0])
    problems = [p for r in rounds for p in r.problems]
    assert [r.lost for r in rounds] == [0, 0, 0], problems
    assert [r.inconsistent for r in rounds] == [0, 0, 0], problems
    assert rounds[-1].shown_final == STUDENTS  # the last kill came after every page said final
    for log in sorted(tmp_path.glob("server-*.log")):
        assert "Traceback" not in log.read_text(encoding="utf-8", errors="replace"), log.name
