"""blocktrace from the teacher's server onto a student's laptop, offline: the line the lesson page shows installs it
into a fresh Python that has NumPy and nothing else, and `blocktrace check` there reports to the server."""

from __future__ import annotations

import csv
import http.cookiejar
import io
import json
import os
import shlex
import subprocess
import sys
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

import numpy
import pytest

from blocktrace.app.classroom.store import EventStore
from blocktrace.app.classroom.store_engine import default_url
from blocktrace.app.cli import NO_NUMPY
from blocktrace.app.exercises.package import INSTALL_PATH, install_command, installed_version, wheel_name
from tests.conftest import module_server

ROOT = Path(__file__).resolve().parents[2]
EXERCISE = "transformer-block-residual"
CLASS = "offline"


@pytest.fixture(scope="module")
def classroom(tmp_path_factory):
    yield from module_server(tmp_path_factory, "package", "--teacher-password", "pw")


@pytest.fixture(scope="module")
def laptop(tmp_path_factory) -> Path:
    """A fresh venv: no blocktrace, no NumPy, no Panel; pip's own configuration and indexes switched off."""
    folder = tmp_path_factory.mktemp("laptop") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True, timeout=120)
    return folder


def run(*command: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "PYTHON", "VIRTUAL_ENV"))}
    env["PIP_CONFIG_FILE"] = os.devnull  # no find-links or extra index from this machine: the server alone
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=240)


def test_the_page_s_line_installs_blocktrace_offline_and_check_reports(classroom, laptop, tmp_path) -> None:
    """pip with no index and no dependencies installs the server's own version from its URL; without NumPy the
    check says what is missing; with NumPy (and still no Panel, Bokeh or Tornado) the downloaded exercise's
    check runs its tests and the server stores the result it checked."""
    python = laptop / "bin" / "python"
    line = shlex.split(install_command(classroom.base_url, installed_version()))
    assert line[:3] == ["python", "-m", "pip"] and "--no-index" in line and "--no-deps" in line
    # The laptop's own interpreter, and this environment's pip driving it (the venv was made without one: pip's
    # own install takes longer than the test).
    installed = run(sys.executable, "-m", "pip", "--python", str(python), *line[3:], "--disable-pip-version-check")
    assert installed.returncode == 0, installed.stdout + installed.stderr
    version = run(str(laptop / "bin" / "blocktrace"), "--version")
    assert version.returncode == 2 and version.stderr == NO_NUMPY  # no NumPy yet: said, not a traceback

    site = Path(run(str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip())
    here = Path(numpy.__file__).parent
    for name in ("numpy", "numpy.libs"):  # NumPy alone, as a student's Python has it
        if (here.parent / name).exists():
            (site / name).symlink_to(here.parent / name)
    assert run(str(python), "-c", "import panel").returncode != 0
    serve = run(str(laptop / "bin" / "blocktrace"), "serve")  # the server needs what this install left out: said
    assert serve.returncode == 2 and "`blocktrace serve` needs panel" in serve.stderr and not serve.stdout

    browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
    browser.open(classroom.url(f"/lessons/transformer-block?class={CLASS}"), timeout=60).read()
    archive = zipfile.ZipFile(io.BytesIO(browser.open(classroom.url(f"/exercises/{EXERCISE}.zip"), timeout=60).read()))
    assert not [n for n in archive.namelist() if n.endswith("in_page.yaml")], "the in-page answers stay on the server"
    archive.extractall(tmp_path)
    folder = tmp_path / EXERCISE
    blocktrace = str(laptop / "bin" / "blocktrace")

    starter = run(blocktrace, "check", cwd=folder)
    assert starter.returncode == 1 and "7 of 12 tests pass" in starter.stdout, starter.stdout + starter.stderr
    assert "sent to your teacher: 7 of 12 tests pass" in starter.stdout
    (folder / "residual.py").write_bytes((ROOT / "tests/exercise_solutions/transformer_block.py").read_bytes())
    fixed = run(blocktrace, "check", cwd=folder)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert "sent to your teacher: every test passes and the server checked your numbers" in fixed.stdout

    with EventStore(default_url(classroom.data_dir)) as store:
        rows = list(csv.DictReader(io.StringIO(store.export_csv(CLASS))))
    results = [json.loads(r["payload"]) for r in rows if r["kind"] == "exercise"]
    assert [(r["passed"], r["tests_passed"], r["way"]) for r in results] == [(False, 7, "laptop"), (True, 12, "laptop")]
    assert {r["exercise_way"] for r in rows if r["kind"] == "exercise"} == {"laptop"}


def test_only_this_server_s_version_is_offered(classroom) -> None:
    """A wheel name of another version is not found, and says which version the server has."""
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(classroom.url(INSTALL_PATH + wheel_name("0.0.1")), timeout=30)
    assert refused.value.code == 404 and installed_version() in refused.value.read().decode()


def test_the_check_command_imports_no_server_library() -> None:
    """`blocktrace check`'s imports (the command line's parser, then the check) load NumPy and the standard
    library, not Panel, Bokeh, param, Tornado, YAML or the LMS libraries, even where those are installed."""
    code = ("import sys\nfrom blocktrace.app.cli import build_parser\nbuild_parser().parse_args(['check'])\n"
            "import blocktrace.app.exercises.check_command\n"
            "print(' '.join(sorted({m.split('.')[0] for m in sys.modules} - set(sys.stdlib_module_names))))")
    found = set(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                               timeout=120).stdout.split())
    assert {"blocktrace", "numpy"} <= found
    assert not found & {"panel", "bokeh", "param", "tornado", "yaml", "sqlalchemy", "pylti1p3", "requests"}, found
