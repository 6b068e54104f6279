"""Every page, on the tuned server and on stock Panel (--no-tuning), for a browser on this machine and for
one on a classroom address (scripts gzipped): rendered with its CSS, a control change shown, nothing
mis-encoded or fetched from elsewhere (the checks are tests/smoke.py's, which CI also runs on the lowest
declared versions and on the installed wheel with the newest Panel and Bokeh)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests import smoke
from tests.conftest import Server, start_server, stop_server

pytestmark = pytest.mark.browser
PASSWORD = "a teacher's password"


# On stock Panel nothing is gzipped, so a classroom laptop gets the same bytes as this machine: one run there.
RUNS = [("tuned", False), ("tuned", True), ("no-tuning", False)]


@pytest.fixture(scope="module")
def servers(tmp_path_factory) -> Iterator[dict[str, Server]]:
    """Servers that see classroom addresses (--use-xheaders), with the tuning layer on and off."""
    flags = ("--use-xheaders", "--teacher-password", PASSWORD)
    running = {mode: start_server(tmp_path_factory.mktemp(mode) / "server.log", *flags, *extra)
               for mode, extra in (("tuned", ()), ("no-tuning", ("--no-tuning",)))}
    yield running
    for server in running.values():
        stop_server(server)


@pytest.mark.parametrize(("mode", "as_student"), RUNS, ids=["tuned-this-machine", "tuned-classroom-laptop",
                                                           "no-tuning-this-machine"])
def test_every_page_renders_and_answers_a_change(browser, servers, mode: str, as_student: bool) -> None:
    """No page, route or check fails on either server."""
    server = servers[mode]
    results = smoke.run(browser, server.base_url, as_student=as_student, teacher_password=PASSWORD,
                        expect_gzip=as_student and mode == "tuned")
    assert len(results) >= len(smoke.page_checks()) + 3
    failures = {name: problems for name, problems in results if problems}
    assert failures == {}, f"{mode} server: {failures}"
    log = server.log()
    assert "Traceback" not in log
    if mode == "no-tuning":
        assert "tuning: off (--no-tuning)" in log and "tuning: applied" not in log
    else:
        applied = next(line for line in log.splitlines() if "tuning: applied" in line)
        assert "socket_tuning" in applied.split("tuning: applied", 1)[1] and "stands down" not in log
