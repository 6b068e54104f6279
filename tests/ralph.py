"""A real learning record store for the tests: Ralph (`ralph-malph`), its LRS with the file-system backend.

Ralph pins its own web stack (FastAPI, uvicorn, pydantic), so it lives in a venv of its own, made once per
Python under ~/.cache/blocktrace-tests with pip from the package registry, never in blocktrace's environment.
`start_ralph` runs its API with uvicorn on a free port, with one user allowed to read and write statements.

Ralph's file-system LRS writes each request's statements with its data backend's default operation, "create",
which refuses a file that exists: as shipped it stores the first POST and answers 500 to every later one. The
launcher below makes that backend append instead (the operation its own writer offers for adding records), so
it behaves as an LRS over many requests; nothing else of Ralph is changed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import free_port, stop_process

RALPH = "ralph-malph[lrs,cli]==5.1.0"
VENV = Path.home() / ".cache" / "blocktrace-tests" / f"ralph-5.1.0-py{sys.version_info[0]}.{sys.version_info[1]}"
USER, PASSWORD = "blocktrace", "lrs-password-1"
LAUNCHER = """
import sys
import uvicorn
from ralph.backends.data.base import BaseOperationType
from ralph.backends.lrs.fs import FSLRSBackend
FSLRSBackend.default_operation_type = BaseOperationType.APPEND
uvicorn.run("ralph.api:app", host="127.0.0.1", port=int(sys.argv[1]), log_level="info")
"""
START_TIMEOUT = 60.0


def ralph_python() -> Path:
    """The Python of Ralph's venv, made (and Ralph installed) the first time."""
    python = VENV / "bin" / "python"
    if not (VENV / ".installed").exists():
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", RALPH, "requests"], check=True, capture_output=True,
                       env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
        (VENV / ".installed").write_text(RALPH)
    return python


@dataclass
class Ralph:
    process: subprocess.Popen
    port: int
    folder: Path

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}/xAPI/"

    def stop(self) -> None:
        stop_process(self.process)


def _env(folder: Path) -> dict[str, str]:
    return {**os.environ, "RALPH_APP_DIR": str(folder / "app"), "RALPH_RUNSERVER_BACKEND": "fs",
            "RALPH_BACKENDS__LRS__FS__DEFAULT_DIRECTORY_PATH": str(folder / "statements")}


def start_ralph(folder: Path, port: int | None = None) -> Ralph:
    """Ralph's LRS on `port` (a free one by default), its statements and users under `folder`."""
    python = ralph_python()
    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / "app" / "auth.json").exists():
        subprocess.run([str(python), "-m", "ralph", "auth", "-u", USER, "-p", PASSWORD, "-s", "all", "-w",
                        "-A", USER, "https://blocktrace.test"], check=True, env=_env(folder), capture_output=True)
    port = port or free_port()
    log = (folder / "ralph.log").open("a", encoding="utf-8")
    process = subprocess.Popen([str(python), "-c", LAUNCHER, str(port)], env=_env(folder), stdout=log,
                               stderr=subprocess.STDOUT)
    log.close()
    ralph = Ralph(process, port, folder)
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/__heartbeat__", timeout=2) as answer:
                if answer.status == 200:
                    return ralph
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        if process.poll() is not None:
            raise RuntimeError(f"Ralph exited: {(folder / 'ralph.log').read_text()}")
        try:
            process.wait(timeout=0.2)  # a moment, and at once if it died
        except subprocess.TimeoutExpired:
            continue
    ralph.stop()
    raise RuntimeError(f"Ralph did not answer within {START_TIMEOUT:.0f} s: {(folder / 'ralph.log').read_text()}")
