"""`kill -9` of a process in the middle of writing: every event it acknowledged is in the database afterwards."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from blocktrace.app.classroom.store import EventStore, default_url

ROOT = Path(__file__).resolve().parents[2]
ACKNOWLEDGED_BEFORE_KILL = 300

# The writer: four threads (as a server's sessions would) record events as fast as they can and
# print each event id once record() has returned, i.e. once the app would tell the learner "saved".
WRITER = r"""
import sys, threading
from blocktrace.app.classroom.store import EventStore, new_event_id

store = EventStore(sys.argv[1])
store.upgrade()
print("ready", flush=True)
lock = threading.Lock()

def learner(n):
    learner_id = f"learner-{n}"
    for i in range(1_000_000):
        event_id = new_event_id()
        if i % 50 == 0:
            stored = store.commit_prediction(event_id, "durable", learner_id, f"q/{i}", "keep-erase", None,
                                             "lesson", "explorable")
        else:
            stored = store.record(event_id, "durable", learner_id, "param", {"i": i, "pad": "x" * 200}, "lesson")
        assert stored
        with lock:
            sys.stdout.write(event_id + "\n")
            sys.stdout.flush()

threads = [threading.Thread(target=learner, args=(n,)) for n in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
"""


@pytest.mark.timeout(120)
def test_acknowledged_events_survive_kill_9(tmp_path: Path):
    """Events acknowledged before (and up to) a SIGKILL are all stored, and the database is not corrupt."""
    url = default_url(tmp_path / "data")
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    writer = subprocess.Popen([sys.executable, "-c", WRITER, url], cwd=ROOT, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline() == "ready\n", writer.stderr.read()
        acknowledged = []
        while len(acknowledged) < ACKNOWLEDGED_BEFORE_KILL:
            line = writer.stdout.readline()
            assert line, f"the writer stopped early:\n{writer.stderr.read()}"
            acknowledged.append(line.strip())
        writer.send_signal(signal.SIGKILL)  # mid-stream: the threads are inside transactions
        # Acknowledgements already in the pipe when it died were acknowledged too; a cut line was not.
        rest = writer.stdout.read()
        acknowledged += [line for line in rest.split("\n")[:-1]]
        assert writer.wait(timeout=30) == -signal.SIGKILL
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.wait()
        writer.stdout.close()
        writer.stderr.close()

    database = tmp_path / "data" / "blocktrace.db"
    with sqlite3.connect(database) as raw:  # opening it recovers the write-ahead log
        assert raw.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert raw.execute("PRAGMA foreign_key_check").fetchall() == []
    raw.close()
    with EventStore(url) as store:
        with store.engine.connect() as conn:
            stored = set(conn.exec_driver_sql("SELECT id FROM events").scalars())
            predictions = conn.exec_driver_sql("SELECT count(*) FROM predictions").scalar_one()
            prediction_events = conn.exec_driver_sql(
                "SELECT count(*) FROM events WHERE kind = 'prediction'").scalar_one()
        missing = [event_id for event_id in acknowledged if event_id not in stored]
        assert missing == []
        assert len(stored) >= len(acknowledged) >= ACKNOWLEDGED_BEFORE_KILL
        assert predictions == prediction_events > 0  # each prediction committed with its event, or neither
        assert store.health() and store.record(
            "00000000-0000-4000-8000-000000000000", "durable", "after", "param", {}) is True
