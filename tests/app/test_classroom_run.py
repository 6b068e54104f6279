"""A small class on a real server, as `benchmarks/classroom.py` runs one: no prediction shown as final is lost.

Sixty students on their own websocket sessions, all from one school router's address (the server trusts
X-Forwarded-For, so its per-address limits apply as they would behind a NAT), join, commit a prediction
and move a slider; the benchmark reads the store once the server is idle. Its figures (latencies,
pauses, memory) are printed for the log, never asserted: only what was lost or never shown final is.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STUDENTS = 60


@pytest.mark.timeout(600)
def test_sixty_students_behind_one_router_lose_no_prediction(tmp_path: Path) -> None:
    """Every student's prediction is shown final and stored, and their last slider value too."""
    run = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "classroom.py"), "--students", str(STUDENTS), "--procs", "1",
         "--duration", "5", "--nat", "198.51.100.7", "--logs", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=580)
    print(run.stdout[-4000:], run.stderr[-2000:])
    server_said = "\n".join(line for log in tmp_path.glob("*.log") for line in log.read_text().splitlines()
                            if "WARNING" in line or "ERROR" in line)[-3000:]
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:] + "\nthe server's warnings:\n" + server_said
    verdict = re.search(r"60 students, 1 process\(es\): lost (\d+) \w+; never final (\d+)", run.stdout)
    assert verdict is not None, run.stdout[-4000:]
    assert verdict.groups() == ("0", "0")
    row = re.search(r"(\d+) / 60 +(\d+) / 60", run.stdout)  # predictions stored / N, last value stored / N
    assert row is not None and row.groups() == ("60", "60"), run.stdout[-4000:]
    assert "Traceback" not in run.stdout
