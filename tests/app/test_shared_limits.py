"""With `--num-procs 2` a client's limits are one budget for the whole server, not one per worker process, and the
BLOCKTRACE_* settings the server started with hold in every worker."""

from __future__ import annotations

import http.cookiejar
import io
import json
import urllib.error
import urllib.request
import zipfile

from blocktrace.app.serve import child_pids
from tests.conftest import start_server, stop_server

LESSON = "/lessons/transformer-block?class=procs"
EXERCISE = "transformer-block-residual"
REPORTS = 8
REPORT_GAP = 3600  # seconds: no report after the first can be taken during the test, however slow it runs


def test_one_learner_s_reports_are_limited_across_both_workers(tmp_path, monkeypatch) -> None:
    """A burst of reports from one learner's `blocktrace check`, each on a new connection (either worker may
    take it): with BLOCKTRACE_REPORT_GAP an hour, one is taken in all, and each refusal says how long to wait."""
    monkeypatch.setenv("BLOCKTRACE_REPORT_GAP", str(REPORT_GAP))
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
        answers = []
        for _ in range(REPORTS):
            request = urllib.request.Request(server.url("/exercises/report"), data=body, method="POST",
                                             headers={"Content-Type": "application/json", "Connection": "close"})
            try:
                with urllib.request.urlopen(request, timeout=60) as response:
                    answers.append((response.status, json.loads(response.read())))
            except urllib.error.HTTPError as error:
                answers.append((error.code, json.loads(error.read())))
    finally:
        stop_server(server)
    taken = [a for status, a in answers if status == 200 and a["recorded"]]
    refused = [a for status, a in answers if status == 429]
    assert len(taken) == 1 and len(refused) == REPORTS - 1, answers
    assert all(0 < a["retry_after"] <= REPORT_GAP for a in refused)
    assert max(a["retry_after"] for a in refused) > REPORT_GAP / 2  # the setting's gap, not the default second
    assert "Traceback" not in server.log()
