"""A small class on a real server, as `benchmarks/classroom.py` runs one: no prediction shown as final is lost.

Sixty students on their own websocket sessions, all from one school router's address (the server trusts
X-Forwarded-For, so its per-address limits apply as they would behind a NAT), join, commit a prediction
and move a slider; the benchmark reads the store once the server is idle. Its figures (latencies,
pauses, memory) are printed for the log, never asserted: only what was lost or never shown final is.

The same on the deploy set-up (`--deploy`): HAProxy with the shipped deploy/haproxy.cfg in front of two
servers on one PostgreSQL, each student kept on one of them by the balancer's cookie.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STUDENTS = 60


def class_run(logs: Path, students: int, *extra: str) -> subprocess.CompletedProcess:
    run = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "classroom.py"), "--students", str(students), "--procs", "1",
         "--duration", "5", "--logs", str(logs), *extra],
        cwd=ROOT, capture_output=True, text=True, timeout=580)
    print(run.stdout[-4000:], run.stderr[-2000:])
    return run


@pytest.mark.timeout(600)
def test_sixty_students_behind_one_router_lose_no_prediction(tmp_path: Path) -> None:
    """Every student's prediction is shown final and stored, and their last slider value too."""
    run = class_run(tmp_path, STUDENTS, "--nat", "198.51.100.7")
    server_said = "\n".join(line for log in tmp_path.glob("*.log") for line in log.read_text().splitlines()
                            if "WARNING" in line or "ERROR" in line)[-3000:]
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:] + "\nthe server's warnings:\n" + server_said
    verdict = re.search(r"60 students, 1 process\(es\): lost (\d+) \w+; never final (\d+)", run.stdout)
    assert verdict is not None, run.stdout[-4000:]
    assert verdict.groups() == ("0", "0")
    row = re.search(r"(\d+) / 60 +(\d+) / 60", run.stdout)  # predictions stored / N, last value stored / N
    assert row is not None and row.groups() == ("60", "60"), run.stdout[-4000:]
    assert "Traceback" not in run.stdout


@pytest.mark.timeout(600)
def test_a_class_through_the_balancer_to_two_servers_loses_nothing(tmp_path: Path) -> None:
    """Thirty students through HAProxy, spread over two servers that share one PostgreSQL: every prediction
    shown final is stored, as is each student's last slider value; both servers had students."""
    run = class_run(tmp_path, 30, "--deploy")
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    verdict = re.search(r"30 students, 2 hosts x 1 process\(es\): lost (\d+) \w+; never final (\d+)", run.stdout)
    assert verdict is not None, run.stdout[-4000:]
    assert verdict.groups() == ("0", "0")
    row = re.search(r"(\d+) / 30 +(\d+) / 30", run.stdout)
    assert row is not None and row.groups() == ("30", "30"), run.stdout[-4000:]
    balancer = (tmp_path / "haproxy-p1-n30.log").read_text()
    for server in ("app1", "app2"):  # HAProxy's log names the server each request went to
        assert f"blocktrace/{server} " in balancer, balancer[-2000:]
    assert "Traceback" not in run.stdout
