"""With `--num-procs 2` a client's limits are one budget for the whole server, not one per worker process."""

from __future__ import annotations

import http.cookiejar
import io
import json
import time
import urllib.error
import urllib.request
import zipfile

from blocktrace.app.serve import child_pids
from tests.conftest import start_server, stop_server

LESSON = "/lessons/transformer-block?class=procs"
EXERCISE = "transformer-block-residual"
REPORTS = 8


def test_one_learner_s_reports_are_limited_across_both_workers(tmp_path) -> None:
    """A burst of reports from one learner's `blocktrace check`, each on a new connection (either worker may
    take it): one a second is taken in all, and each refusal says how long to wait."""
    server = start_server(tmp_path / "server.log", "--data-dir", str(tmp_path / "data"), "--num-procs", "2",
                          "--teacher-password", "pw")
    try:
        assert len(child_pids(server.process.pid)) == 2
        browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
        browser.open(server.url(LESSON), timeout=60).read()  # the learner cookie, as the lesson page sets it
        archive = browser.open(server.url(f"/exercises/{EXERCISE}.zip"), timeout=60).read()
        ticket = json.loads(zipfile.ZipFile(io.BytesIO(archive)).read(f"{EXERCISE}/blocktrace-exercise.json"))
        body = json.dumps({"ticket": ticket, "outputs": {},
                           "tests": [{"name": "test_shape", "passed": True}]}).encode()
        answers, began = [], time.monotonic()
        for _ in range(REPORTS):
            request = urllib.request.Request(server.url("/exercises/report"), data=body, method="POST",
                                             headers={"Content-Type": "application/json", "Connection": "close"})
            try:
                with urllib.request.urlopen(request, timeout=60) as response:
                    answers.append((response.status, json.loads(response.read())))
            except urllib.error.HTTPError as error:
                answers.append((error.code, json.loads(error.read())))
        took = time.monotonic() - began
    finally:
        stop_server(server)
    taken = [a for status, a in answers if status == 200 and a["recorded"]]
    refused = [a for status, a in answers if status == 429]
    assert 1 <= len(taken) <= 1 + int(took), (took, answers)
    assert len(taken) + len(refused) == REPORTS
    assert all(0 < a["retry_after"] <= 1.0 for a in refused)
    assert "Traceback" not in server.log()
