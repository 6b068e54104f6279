"""A served class whose database file is deleted: the teacher is told, and nothing is lost.

`rm blocktrace.db*` while the server runs used to go unnoticed: the server kept writing into the
deleted file, the teacher kept seeing its counts, and a restart showed an empty class. Now the next
store call rebuilds the file from the copy the server still has open, the dashboard says so, and a
restart finds every answer.
"""

from __future__ import annotations

import base64
import re
import urllib.request
from pathlib import Path

from blocktrace.app.classroom.store import DB_FILE, EventStore, default_url, new_event_id
from tests.conftest import Server, start_server, stop_server

CLASS = "period3"
LESSON = "transformer-block"
EXPLORABLE = "transformer-block-trace"
QUESTION = "transformer-block-trace/prediction"
PASSWORD = "pw"


def dashboard(server: Server) -> str:
    request = urllib.request.Request(server.url(f"/teacher?class={CLASS}"), headers={
        "Authorization": "Basic " + base64.b64encode(f"teacher:{PASSWORD}".encode()).decode()})
    with urllib.request.urlopen(request, timeout=60) as response:
        assert response.status == 200
        return response.read().decode("utf-8")


def committed(page: str) -> int:
    """How many learners the dashboard says committed a prediction in the first lesson shown."""
    found = re.search(r"<strong>(\d+)</strong> learners? committed a prediction in this lesson", page)
    assert found, page[:2000]
    return int(found.group(1))


def commit_answers(data_dir: Path, learners: list[str]) -> None:
    """Answers committed as the server's sessions commit them (another connection to the same file)."""
    with EventStore(default_url(data_dir)) as students:
        for learner in learners:
            assert students.commit_prediction(new_event_id(), CLASS, learner, QUESTION, "keep-erase", None,
                                              LESSON, EXPLORABLE)


def test_deleting_the_database_while_serving_loses_nothing(tmp_path: Path):
    """Deleted while serving: the dashboard says the file was rebuilt, keeps the counts, and a restart has them."""
    data_dir = tmp_path / "data"
    args = ("--data-dir", str(data_dir), "--teacher-password", PASSWORD)
    server = start_server(tmp_path / "server.log", *args)
    try:
        assert committed(dashboard(server)) == 0  # the server has the store open now
        commit_answers(data_dir, ["ada", "bob", "cy"])
        page = dashboard(server)
        assert committed(page) == 3 and "store-status" not in page
        for path in data_dir.glob(DB_FILE + "*"):
            path.unlink()

        page = dashboard(server)
        assert "rebuilt it from the copy it still had open" in page and 'role="alert"' in page
        assert committed(page) == 3
        assert (data_dir / DB_FILE).exists()
        commit_answers(data_dir, ["dee"])  # written into the rebuilt file, which the server reads
        assert committed(dashboard(server)) == 4
    finally:
        stop_server(server)
    assert "Traceback" not in server.log()

    again = start_server(tmp_path / "again.log", *args)  # "a restart shows 0" was the bug
    try:
        page = dashboard(again)
        assert committed(page) == 4 and "store-status" not in page
    finally:
        stop_server(again)

