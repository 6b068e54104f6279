"""Learning records to a real LRS (Ralph, its file-system backend): each stored event's statement, read back
through Ralph's xAPI API and checked field by field; each sent once; an LRS that is down for a while (and a
restart of ours meanwhile) loses nothing."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import requests

from blocktrace.app.classroom.store import EventStore
from blocktrace.app.xapi import delivery
from blocktrace.app.xapi.statements import NAMESPACE, statement_id
from tests.ralph import PASSWORD, USER, Ralph, start_ralph

HOME = "https://blocktrace.example.edu"
CLASS = "period-3"
LESSON = "transformer-block"
EXPLORABLE = "transformer-block-trace"
ADL = "http://adlnet.gov/expapi/verbs/"


@pytest.fixture(scope="module")
def ralph(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ralph]:
    running = start_ralph(tmp_path_factory.mktemp("ralph"))
    yield running
    running.stop()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[EventStore]:
    opened = EventStore(f"sqlite:///{tmp_path}/classroom.db")
    yield opened
    opened.close()


def target(ralph: Ralph, names: bool = False, endpoint: str | None = None) -> delivery.XapiTarget:
    return delivery.XapiTarget(endpoint or ralph.endpoint, USER, PASSWORD, HOME, names)


def read_back(ralph: Ralph, statement: str) -> dict:
    answer = requests.get(ralph.endpoint + "statements", params={"statementId": statement}, auth=(USER, PASSWORD),
                          headers={"X-Experience-API-Version": "1.0.3"}, timeout=10)
    assert answer.status_code == 200, answer.text
    found = answer.json()
    return found["statements"][0] if "statements" in found else found  # Ralph answers with a one-item list


def count_in_lrs(ralph: Ralph, learner: str) -> int:
    agent = json.dumps({"account": {"homePage": HOME, "name": learner}})
    answer = requests.get(ralph.endpoint + "statements", params={"agent": agent, "limit": 500},
                          auth=(USER, PASSWORD), headers={"X-Experience-API-Version": "1.0.3"}, timeout=10)
    return len(answer.json()["statements"])


def lesson_work(store: EventStore, learner: str) -> dict[str, str]:
    """A learner's lesson, every step; the kind of each event by its id."""
    ids = {}
    pid = str(uuid.uuid4())
    store.commit_prediction(pid, CLASS, learner, f"{EXPLORABLE}/prediction", "keep-erase", "", LESSON, EXPLORABLE)
    ids[pid] = "prediction"
    for kind, payload in (("param", {"name": "mlp_scale", "value": 0.5}),
                          ("checkpoint", {"explorable": EXPLORABLE, "checkpoint": "c1", "answer": "b",
                                          "correct": True}),
                          ("exercise", {"checked": True, "passed": False, "tests_passed": 3, "tests_total": 5}),
                          ("exercise", {"checked": True, "passed": True, "tests_passed": 5, "tests_total": 5}),
                          ("explanation", {"text": "adding keeps the input <b>whole</b>"})):
        event = str(uuid.uuid4())
        store.record(event, CLASS, learner, kind, payload, LESSON, EXPLORABLE if kind != "explanation" else None)
        ids[event] = kind
    return ids


def test_every_event_is_a_statement_in_the_lrs_field_by_field(ralph: Ralph, store: EventStore) -> None:
    lrs = target(ralph)
    assert delivery.queue_statements(store, lrs) == 0  # the first round starts the records from now
    learner = uuid.uuid4().hex
    store.join(CLASS, learner, "Ada Lovelace")
    ids = lesson_work(store, learner)
    queued = delivery.queue_statements(store, lrs)
    assert queued == len(ids) + 1  # and the lesson completed
    assert delivery.queue_statements(store, lrs) == 0  # read again: kept once
    assert delivery.send_statements(store, lrs) == (queued, 0)
    verbs = {"prediction": "responded", "param": "interacted", "checkpoint": "answered", "explanation": "commented"}
    for event, kind in ids.items():
        [stored] = [read_back(ralph, statement_id(event))]
        assert stored["id"] == statement_id(event)
        assert stored["actor"] == {"objectType": "Agent", "account": {"homePage": HOME, "name": learner}}
        assert "Ada" not in str(stored)  # no name unless the teacher turns names on
        verb = verbs.get(kind) or ("passed" if stored["result"]["success"] else "failed")
        assert stored["verb"] == {"id": ADL + verb, "display": {"en-US": verb}}
        assert stored["context"]["extensions"] == {f"{HOME}/xapi/class": CLASS}
        if kind == "explanation":
            assert stored["object"]["id"] == f"{HOME}/lessons/{LESSON}"
            assert stored["result"]["response"] == "adding keeps the input <b>whole</b>"
        else:
            assert stored["object"]["id"] == f"{HOME}/explorables/{EXPLORABLE}"
            assert stored["context"]["contextActivities"]["grouping"] == [
                {"objectType": "Activity", "id": f"{HOME}/lessons/{LESSON}"}]
        if kind == "prediction":
            assert stored["result"] == {"response": "keep-erase"}
        if kind == "checkpoint":
            assert stored["result"] == {"success": True, "response": "b"}
        if kind == "exercise" and verb == "failed":
            assert stored["result"]["score"] == {"raw": 3, "min": 0, "max": 5, "scaled": 0.6}
        assert stored["timestamp"].endswith("Z")
    assert count_in_lrs(ralph, learner) == len(ids) + 1
    completed = read_back(ralph, str(uuid.uuid5(NAMESPACE, f"completed:{CLASS}:{learner}:{LESSON}")))
    assert completed["verb"]["id"] == ADL + "completed" and completed["result"] == {"completion": True}
    assert completed["object"]["id"] == f"{HOME}/lessons/{LESSON}"


def test_names_go_only_when_the_teacher_turns_them_on(ralph: Ralph, store: EventStore) -> None:
    lrs = target(ralph, names=True)
    delivery.queue_statements(store, lrs)
    learner = uuid.uuid4().hex
    store.join(CLASS, learner, "Grace Hopper")
    event = str(uuid.uuid4())
    store.record(event, CLASS, learner, "param", {"name": "mlp_scale", "value": 1.0}, LESSON, EXPLORABLE)
    delivery.queue_statements(store, lrs)
    assert delivery.send_statements(store, lrs) == (1, 0)
    assert read_back(ralph, statement_id(event))["actor"]["name"] == "Grace Hopper"


def test_an_lrs_that_is_down_for_a_while_loses_nothing(ralph: Ralph, store: EventStore, tmp_path: Path) -> None:
    down = target(ralph, endpoint="http://127.0.0.1:9/xAPI/")  # nothing listens there
    delivery.queue_statements(store, down)
    learner = uuid.uuid4().hex
    ids = lesson_work(store, learner)
    now = datetime.now(UTC)
    queued = delivery.queue_statements(store, down, now)
    assert delivery.send_statements(store, down, now) == (0, queued)
    assert store.delivery_counts(delivery.KIND) == (queued, queued)
    assert delivery.send_statements(store, down, now + timedelta(seconds=4)) == (0, 0)  # waiting its turn
    assert delivery.send_statements(store, down, now + timedelta(seconds=6)) == (0, queued)
    store.close()
    restarted = EventStore(f"sqlite:///{tmp_path}/classroom.db")  # our server restarted meanwhile
    back = target(ralph)  # and the LRS is back
    assert delivery.send_statements(restarted, back, now + timedelta(seconds=15)) == (0, 0)  # the wait doubled
    assert delivery.send_statements(restarted, back, now + timedelta(seconds=70)) == (queued, 0)
    assert restarted.delivery_counts(delivery.KIND) == (0, 0)
    assert count_in_lrs(ralph, learner) == len(ids) + 1
    restarted.close()


def test_a_batch_sent_again_is_not_stored_twice(ralph: Ralph, store: EventStore) -> None:
    lrs = target(ralph)
    delivery.queue_statements(store, lrs)
    learner = uuid.uuid4().hex
    event = str(uuid.uuid4())
    store.record(event, CLASS, learner, "param", {"name": "mlp_scale", "value": 2.0}, LESSON, EXPLORABLE)
    delivery.queue_statements(store, lrs)
    [(delivery_id, _, payload)] = store.claim_deliveries(delivery.KIND, 10, 0.0)
    for _ in range(2):  # its answer was lost: sent again
        answer = requests.post(lrs.statements_url, json=[payload], auth=(USER, PASSWORD),
                               headers={"X-Experience-API-Version": "1.0.3"}, timeout=10)
        assert answer.status_code in (200, 204)
    assert delivery.send_statements(store, lrs) == (1, 0)
    assert count_in_lrs(ralph, learner) == 1 and delivery_id == statement_id(event)


def test_a_server_with_an_lrs_sends_from_each_process(ralph: Ralph, tmp_path: Path, monkeypatch) -> None:
    """The classroom a server process opens starts its sender of learning records (and of scores)."""
    from blocktrace.app.classroom import classroom

    lrs = target(ralph)
    classroom.configure(classroom.ClassroomSettings(f"sqlite:///{tmp_path}/c.db", b"k" * 32, tmp_path, lrs))
    try:
        opened = classroom.current()
        assert sorted(s.name for s in opened.senders) == ["lti-scores", "xapi"] and opened.lrs == ralph.endpoint
        assert all(s.thread.is_alive() for s in opened.senders)
    finally:
        for sender in opened.senders:
            sender.stop()
        classroom.configure(None)


def test_serve_refuses_an_lrs_address_that_is_not_a_url(tmp_path: Path) -> None:
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "blocktrace.app.cli", "serve", "--data-dir", str(tmp_path),
                           "--xapi-endpoint", "lrs.example.edu"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "--xapi-endpoint must be an http:// or https:// URL" in done.stderr
    assert "Traceback" not in done.stderr
