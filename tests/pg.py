"""A throwaway PostgreSQL server from Debian's packages, for the tests that need a real one.

    with running_postgres() as pg:          # initdb in a temporary directory, start on a free loopback port
        url = pg.create_database()          # a new, empty database: postgresql+psycopg://postgres@127.0.0.1:PORT/NAME
        pg.stop()                           # a fast shutdown: an outage, as the app sees it
        pg.start()                          # back on the same data directory and port
    # stopped and deleted here

When the tests run as root, the server runs as the `postgres` user (PostgreSQL refuses root). The
server binaries are required: without them the calling test fails, it does not skip.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import pytest

from blocktrace.app.serve import child_pids

PG_ROOT = Path("/usr/lib/postgresql")
START_TIMEOUT = 30.0  # seconds
STOP_TIMEOUT = 30.0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def bin_dir() -> Path:
    """The newest installed PostgreSQL's bin directory (Debian: /usr/lib/postgresql/<major>/bin)."""
    found = sorted((p.parent for p in PG_ROOT.glob("*/bin/postgres")),
                   key=lambda d: int(d.parent.name) if d.parent.name.isdigit() else -1)
    if not found:
        pytest.fail(f"PostgreSQL server binaries not found under {PG_ROOT}/*/bin: install Debian's packages "
                    "with `apt-get install -y postgresql` (these tests need a real server and do not skip)",
                    pytrace=False)
    return found[-1]


def run_as() -> dict:
    """Popen arguments that drop root to the `postgres` user: PostgreSQL refuses to run as root."""
    if os.geteuid() != 0:
        return {}
    try:
        user = pwd.getpwnam("postgres")
    except KeyError:
        pytest.fail("running as root, and the `postgres` user (made by Debian's postgresql package) is missing",
                    pytrace=False)
    return {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}


@dataclass
class Postgres:
    """A throwaway PostgreSQL server on 127.0.0.1: its port, its directory and (while running) its process."""

    port: int
    base: Path  # data/, the unix socket and postgres.log live here
    bin_dir: Path
    run_as: dict
    process: subprocess.Popen | None = field(default=None, repr=False)

    @property
    def data_dir(self) -> Path:
        return self.base / "data"

    @property
    def log_path(self) -> Path:
        return self.base / "postgres.log"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def url(self, database: str) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def admin(self) -> psycopg.Connection:
        return psycopg.connect(host="127.0.0.1", port=self.port, user="postgres", dbname="postgres", autocommit=True)

    def create_database(self, name: str | None = None) -> str:
        """Create a database (a fresh random name unless given) and return its URL."""
        name = name or f"bt_{uuid.uuid4().hex[:16]}"
        with self.admin() as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def _env(self) -> dict[str, str]:
        return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C", "TZ": "UTC"}

    def start(self) -> None:
        """Start the server on its data directory and port; return once pg_isready says it accepts connections."""
        assert not self.running, "PostgreSQL is already running"
        with self.log_path.open("a") as log:
            self.process = subprocess.Popen(
                [self.bin_dir / "postgres", "-D", self.data_dir, "-k", self.base, "-p", str(self.port),
                 "-h", "127.0.0.1"],
                cwd=self.base, env=self._env(), stdout=log, stderr=subprocess.STDOUT, **self.run_as)
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            ready = subprocess.run(
                [self.bin_dir / "pg_isready", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "-t", "1"],
                capture_output=True, timeout=10)
            if ready.returncode == 0:
                return
            try:
                code = self.process.wait(timeout=0.1)  # waits a moment, and notices at once if the server died
            except subprocess.TimeoutExpired:
                if time.monotonic() > deadline:
                    self.stop()
                    pytest.fail(f"PostgreSQL not ready in {START_TIMEOUT:.0f} s:\n{self.log_path.read_text()}",
                                pytrace=False)
                continue
            pytest.fail(f"PostgreSQL exited with status {code}:\n{self.log_path.read_text()}", pytrace=False)

    def _family(self) -> list[int]:
        """The postmaster and every process it started (one backend per connection)."""
        return [self.process.pid, *child_pids(self.process.pid)]

    def freeze(self) -> None:
        """Hang the server without closing anything (SIGSTOP): connections stay open and nothing answers."""
        assert self.running
        for pid in self._family():
            os.kill(pid, signal.SIGSTOP)

    def thaw(self) -> None:
        """Let a frozen server go on where it stopped (SIGCONT)."""
        for pid in self._family():
            os.kill(pid, signal.SIGCONT)

    def stop(self) -> None:
        """Fast shutdown (as `pg_ctl stop -m fast`): clients are disconnected, the server checkpoints and exits."""
        if not self.running:
            return
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@contextmanager
def running_postgres() -> Iterator[Postgres]:
    """A new cluster (initdb, trust authentication, UTF8), started on a free port; stopped and deleted after."""
    binaries = bin_dir()
    user = run_as()
    # Not under pytest's tmp_path: its parents are private to root, and the server runs as `postgres`.
    base = Path(tempfile.mkdtemp(prefix="blocktrace-pg-"))
    if user:
        os.chown(base, user["user"], user["group"])
    server = Postgres(free_port(), base, binaries, user)
    try:
        initdb = subprocess.run(
            [binaries / "initdb", "-D", server.data_dir, "-U", "postgres", "--auth=trust", "-E", "UTF8",
             "--no-locale", "--no-sync"],
            cwd=base, env=server._env(), capture_output=True, text=True, timeout=120, **user)
        assert initdb.returncode == 0, f"initdb failed:\n{initdb.stdout}\n{initdb.stderr}"
        server.start()
        yield server
    finally:
        server.stop()
        shutil.rmtree(base, ignore_errors=True)
