"""`blocktrace serve` started as a teacher starts it: the banner comes once a page can be served, the generated
password is kept across restarts, and the log holds no routine lines unless --access-log asks for them.

Each server here is a process of its own whose output is read line by line as it comes (a reader thread per
process, which also keeps the pipe from filling): every wait is for a line the server writes, never a sleep."""

from __future__ import annotations

import base64
import os
import queue
import re
import stat
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from blocktrace.app.classroom.login_guard import PASSWORD_FILE
from blocktrace.app.serve import READY_LINE
from tests.conftest import ROOT, START_TIMEOUT, Server, free_port, stop_process

LINE_TIMEOUT = 30.0  # seconds for a line the server is about to write (an access-log line after its answer)


@dataclass
class Output:
    """The lines a server process writes, as they come."""

    lines: queue.Queue = field(default_factory=queue.Queue)
    seen: list[str] = field(default_factory=list)

    def next_until(self, wanted: Callable[[str], bool], timeout: float) -> list[str]:
        """Lines read until one `wanted` (included); AssertionError if the process ends or is silent first."""
        deadline, read = time.monotonic() + timeout, []
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no such line within {timeout:.0f} s; got:\n" + "\n".join(self.seen)) from None
            if line is None:
                raise AssertionError("the server ended; it wrote:\n" + "\n".join(self.seen))
            self.seen.append(line)
            read.append(line)
            if wanted(line):
                return read


@contextmanager
def serving(data_dir: Path, *extra: str, warm_up: bool = False) -> Iterator[tuple[int, list[str], Output]]:
    """A `blocktrace serve` process: its port, the banner's lines (read up to its last) and the rest of its output."""
    port = free_port()
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "BLOCKTRACE_WARM_UP": "1" if warm_up else "0"}
    process = subprocess.Popen(
        [sys.executable, "-m", "blocktrace.app.cli", "serve", "--port", str(port), "--data-dir", str(data_dir),
         *extra], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    output = Output()

    def read() -> None:
        for line in process.stdout:
            output.lines.put(line.rstrip("\n"))
        output.lines.put(None)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        before = output.next_until(lambda line: line.startswith(READY_LINE), START_TIMEOUT)
        rest = output.next_until(lambda line: line.startswith(("  Data folder:", "  Records:")), LINE_TIMEOUT)
        yield port, before[-1:] + rest, output
    finally:
        stop_process(process)
        reader.join(timeout=10)
    assert "Traceback" not in "\n".join(output.seen)


def status_of(url: str, password: str | None = None) -> int:
    request = urllib.request.Request(url)
    if password is not None:
        request.add_header("Authorization", "Basic " + base64.b64encode(f"teacher:{password}".encode()).decode())
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def banner_password(banner: list[str]) -> str:
    return re.search(r"^  Password: +(\S+)", "\n".join(banner), re.MULTILINE).group(1)


def test_the_banner_comes_once_a_page_can_be_served(tmp_path: Path) -> None:
    """With the start-up warm-up on (the default), the banner is printed only when the server answers: a page
    requested the moment its first line appears is served, and --access-log logs that request."""
    with serving(tmp_path / "data", "--access-log", warm_up=True) as (port, banner, output):
        assert status_of(f"http://127.0.0.1:{port}/") == 200
        assert status_of(f"http://127.0.0.1:{port}/teacher/login") == 200
        output.next_until(lambda line: " 200 GET /teacher/login " in line, LINE_TIMEOUT)
    assert banner[1] == f"  Students open:  http://127.0.0.1:{port}/   (this computer only: start with --address " \
                        "0.0.0.0 to let the class in)"
    assert banner[2] == f"  Teacher room:   http://127.0.0.1:{port}/teacher"
    assert banner[4] == f"  Data folder:    {tmp_path / 'data'}"
    assert sum(line.startswith(READY_LINE) for line in output.seen) == 1


def test_the_generated_password_is_kept_until_a_new_one_is_asked_for(tmp_path: Path) -> None:
    """The first start makes a password and keeps it (0600) in the data folder; a restart shows and checks the same
    one; --new-password replaces it, and the old one no longer opens the teacher's room."""
    data = tmp_path / "data"
    with serving(data) as (_port, banner, _output):
        first = banner_password(banner)
    assert f"(kept in {data / PASSWORD_FILE}; --new-password makes a new one)" in "\n".join(banner)
    with serving(data) as (port, banner, _output):
        assert banner_password(banner) == first
        assert status_of(f"http://127.0.0.1:{port}/teacher", first) == 200
    with serving(data, "--new-password") as (port, banner, _output):
        second = banner_password(banner)
        assert second != first
        assert status_of(f"http://127.0.0.1:{port}/teacher", second) == 200
        assert status_of(f"http://127.0.0.1:{port}/teacher", first) == 403
    assert (data / PASSWORD_FILE).read_text().strip() == second
    assert stat.S_IMODE((data / PASSWORD_FILE).stat().st_mode) == 0o600


def test_a_given_password_is_used_and_never_printed(tmp_path: Path) -> None:
    """--teacher-password comes before the kept password; the banner names where it came from, not what it is."""
    with serving(tmp_path / "data", "--teacher-password=a given one") as (port, banner, output):
        assert status_of(f"http://127.0.0.1:{port}/teacher", "a given one") == 200
    assert "  Password:       the one given by --teacher-password" in banner
    assert "a given one" not in "\n".join(output.seen)


def test_the_default_log_has_no_line_per_request(server: Server) -> None:
    """By default, pages, files, polls and websockets leave no line in the log; a refused request still does."""
    for path in ("/", "/teacher/login", "/assets/css/blocktrace.css", "/health"):
        assert status_of(server.url(path)) == 200
    from tests.app.test_server import session

    with session(server, "/explorables/transformer-block-trace"):  # a page's websocket, opened and closed
        pass
    assert status_of(server.url("/no-such-page")) == 404
    deadline = time.monotonic() + LINE_TIMEOUT  # the 404's warning is written just after its answer
    while " 404 GET /no-such-page " not in (log := server.log()) and time.monotonic() < deadline:
        time.sleep(0.05)  # polling the file the server writes to; the condition decides
    assert " 404 GET /no-such-page " in log  # the server wrote everything before it: so none of these came
    assert not re.search(r" (200|101|302) GET ", log), log
    assert "WebSocket connection" not in log and "ServerConnection created" not in log
