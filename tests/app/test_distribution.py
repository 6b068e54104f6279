"""The wheel: one import package, blocktrace, holding the code of app/ and explorables/ and the data of
lessons/ and static/, with its licence, its command and nothing else.

The wheel is built once for this module, from a copy of the working tree (so the build writes no build/
folder into the checkout and no stale build/lib from an earlier build can slip into it).
"""

from __future__ import annotations

import configparser
import json
import shutil
import subprocess
import sys
import tomllib
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
VERSION = PYPROJECT["project"]["version"]
DIST_INFO = f"blocktrace-{VERSION}.dist-info"
CODE_FOLDERS = {"app": "blocktrace.app", "explorables": "blocktrace.explorables"}
DATA_FOLDERS = ("lessons", "static")
SEED_FIXTURE = ROOT / "explorables" / "decoder_block_lab" / "lesson_seed_42.json"
REFERENCE = ROOT / "tests" / "fixtures" / "reference.json"
SEED_CASE = "lesson-seed-42"

# Left out of the copy the wheel is built from: what a fresh checkout would not have.
NOT_COPIED_AT_TOP = {".git", "build", "dist", ".pytest_cache", ".ruff_cache", ".hypothesis", "blocktrace-data",
                     "test-screens"}


def _folders_with_files(top: Path, pattern: str) -> list[Path]:
    """`top` and every folder under it (no __pycache__) that directly holds a file matching `pattern`."""
    found = []
    for folder in [top, *sorted(p for p in top.rglob("*") if p.is_dir())]:
        if "__pycache__" in folder.relative_to(ROOT).parts:
            continue
        if any(p.is_file() for p in folder.glob(pattern)):
            found.append(folder)
    return found


def _expected_packages() -> dict[str, str]:
    """Package name -> the folder (relative to the repository) that calls for it."""
    expected = {}
    for folder_name, package in CODE_FOLDERS.items():
        top = ROOT / folder_name
        expected[package] = f"{folder_name}/"  # the package itself, even before it holds code
        for folder in _folders_with_files(top, "*.py"):
            relative = folder.relative_to(top)
            expected[".".join([package, *relative.parts])] = f"{folder.relative_to(ROOT).as_posix()}/"
    expected["blocktrace.lessons"] = "lessons/"
    expected["blocktrace.static"] = "static/"
    for folder in _folders_with_files(ROOT / "static", "*"):
        relative = folder.relative_to(ROOT / "static")
        expected[".".join(["blocktrace.static", *relative.parts])] = f"{folder.relative_to(ROOT).as_posix()}/"
    return expected


def test_package_list_matches_the_folders() -> None:
    """pyproject.toml's explicit `packages` list names every folder of code and static files, and nothing else,
    so a new module folder or static folder cannot be left out of the wheel."""
    listed = PYPROJECT["tool"]["setuptools"]["packages"]
    assert len(listed) == len(set(listed)), f"packages lists a name twice: {sorted(listed)}"
    expected = _expected_packages()
    missing = sorted(set(expected) - set(listed))
    extra = sorted(set(listed) - set(expected))
    problems = [f"missing {name!r} (folder {expected[name]} holds files)" for name in missing]
    problems += [f"extra {name!r} (no folder of code or static files with that name)" for name in extra]
    assert not problems, "pyproject.toml [tool.setuptools] packages: " + "; ".join(problems)


def _copy_of_the_tree(destination: Path) -> Path:
    def ignore(folder: str, names: list[str]) -> set[str]:
        left_out = NOT_COPIED_AT_TOP if Path(folder) == ROOT else set()
        return {n for n in names if n == "__pycache__" or n.endswith(".egg-info") or n in left_out}

    return Path(shutil.copytree(ROOT, destination, ignore=ignore, symlinks=True))


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[zipfile.ZipFile]:
    """The wheel `pip wheel` builds from this working tree, opened (built once for the module)."""
    work = tmp_path_factory.mktemp("wheel")
    source = _copy_of_the_tree(work / "source")
    out = work / "out"
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "--disable-pip-version-check", "-q",
         "-w", str(out)],
        capture_output=True, text=True, timeout=240,
    )
    assert build.returncode == 0, f"pip wheel failed ({build.returncode}):\n{build.stdout}\n{build.stderr}"
    built = sorted(out.glob("*.whl"))
    assert [p.name for p in built] == [f"blocktrace-{VERSION}-py3-none-any.whl"], f"pip wheel made {built}"
    with zipfile.ZipFile(built[0]) as opened:
        yield opened


def test_wheel_has_only_blocktrace_at_the_top(wheel: zipfile.ZipFile) -> None:
    """The wheel installs one package, blocktrace, and its dist-info; no generic app/ or explorables/ in
    site-packages."""
    tops = {name.split("/", 1)[0] + "/" for name in wheel.namelist()}
    assert tops == {"blocktrace/", f"{DIST_INFO}/"}


def test_wheel_carries_every_tracked_data_file(wheel: zipfile.ZipFile) -> None:
    """Every committed file under lessons/ and static/ is installed under blocktrace/, so the installed server
    finds its lessons, stylesheets and scripts."""
    tracked = subprocess.run(["git", "ls-files", "-z", "--", *DATA_FOLDERS], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout.split("\0")
    tracked = [name for name in tracked if name and (ROOT / name).is_file()]  # not ones deleted in this tree
    assert any(name.startswith("lessons/") for name in tracked) and any(n.startswith("static/") for n in tracked)
    missing = sorted(name for name in tracked if f"blocktrace/{name}" not in set(wheel.namelist()))
    assert not missing, f"committed data files missing from the wheel (see [tool.setuptools.package-data]): {missing}"


def test_wheel_carries_the_seed_fixture_and_the_server_apps(wheel: zipfile.ZipFile) -> None:
    """The worked example's JSON and the Bokeh server's app scripts, read from the package at run time, are
    installed."""
    names = set(wheel.namelist())
    assert "blocktrace/explorables/decoder_block_lab/lesson_seed_42.json" in names
    apps = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "app" / "server" / "apps").glob("*.py"))
    assert apps, "app/server/apps/ holds no scripts"
    missing = [name for name in apps if f"blocktrace/{name}" not in names]
    assert not missing, f"server apps missing from the wheel: {missing}"


def test_wheel_has_no_tests_or_benchmarks(wheel: zipfile.ZipFile) -> None:
    """The repository's tests/ and benchmarks/ stay out of the installed package."""
    stray = [name for name in wheel.namelist() if {"tests", "benchmarks"} & set(name.split("/")[:2])]
    assert not stray, f"test or benchmark files in the wheel: {stray}"


def test_wheel_metadata_names_the_mit_licence(wheel: zipfile.ZipFile) -> None:
    """The wheel declares its licence as the SPDX expression MIT and ships the LICENSE file itself."""
    metadata = wheel.read(f"{DIST_INFO}/METADATA").decode("utf-8")
    headers = metadata.split("\n\n", 1)[0].splitlines()
    assert "License-Expression: MIT" in headers, f"METADATA headers: {headers}"
    licences = [name for name in wheel.namelist() if name.startswith(f"{DIST_INFO}/") and name.endswith("/LICENSE")]
    assert licences, f"no LICENSE in {DIST_INFO}/: {[n for n in wheel.namelist() if n.startswith(DIST_INFO)]}"
    assert wheel.read(licences[0]) == (ROOT / "LICENSE").read_bytes()


def test_wheel_installs_the_blocktrace_command(wheel: zipfile.ZipFile) -> None:
    """Installing the wheel gives the `blocktrace` command, run by blocktrace.app.cli:main."""
    entry_points = configparser.ConfigParser(delimiters=("=",))
    entry_points.optionxform = str  # keep names as written
    entry_points.read_string(wheel.read(f"{DIST_INFO}/entry_points.txt").decode("utf-8"))
    assert dict(entry_points["console_scripts"]) == {"blocktrace": "blocktrace.app.cli:main"}


def test_packaged_seed_case_equals_the_reference() -> None:
    """The package's copy of the seed-42 case (lesson_seed_42.json) is the PyTorch reference's own case, so the
    two copies cannot drift apart."""
    packaged = json.loads(SEED_FIXTURE.read_text(encoding="utf-8"))
    reference = json.loads(REFERENCE.read_text(encoding="utf-8"))
    assert packaged["schema"] == reference["schema"]
    assert [case["name"] for case in packaged["cases"]] == [SEED_CASE]
    wanted = [case for case in reference["cases"] if case["name"] == SEED_CASE]
    assert len(wanted) == 1, f"{REFERENCE.name} should hold one case named {SEED_CASE!r}, found {len(wanted)}"
    assert packaged["cases"][0] == wanted[0], (
        f"{SEED_FIXTURE.relative_to(ROOT)} differs from the {SEED_CASE!r} case of {REFERENCE.relative_to(ROOT)}; "
        "copy the case over again")


def test_the_wheel_served_to_students_holds_what_pip_builds(wheel: zipfile.ZipFile, tmp_path: Path) -> None:
    """The wheel the teacher's server makes for students' laptops (app/exercises/package.py) holds the same package
    files, byte for byte, as the one `pip wheel` builds, but for the in-page exercises' answers; made from an
    installed wheel's file list (RECORD) or from this checkout (an editable install), and installable (its RECORD
    names every file with its hash)."""
    from importlib.metadata import PathDistribution

    from blocktrace.app.exercises.package import IN_PAGE_FILE, build_wheel, running_distribution

    wanted = {n: wheel.read(n) for n in wheel.namelist() if n.startswith("blocktrace/")}
    answers = {n for n in wanted if n.endswith("/" + IN_PAGE_FILE)}
    assert answers, "the lessons' in-page exercises are part of the package"
    wheel.extractall(tmp_path / "installed")  # a wheel installed is a wheel unzipped: its RECORD lists the files
    sources = {"installed": PathDistribution(tmp_path / "installed" / DIST_INFO)}
    running = running_distribution()  # an editable install in the suite's usual venv
    if running is not None and "editable" in (running.read_text("direct_url.json") or ""):
        sources["this checkout"] = running
    for label, dist in sources.items():
        built = tmp_path / f"{label}.whl"
        assert build_wheel(dist, built), label
        with zipfile.ZipFile(built) as served:
            got = {n: served.read(n) for n in served.namelist() if n.startswith("blocktrace/")}
            record = served.read(f"{DIST_INFO}/RECORD").decode()
            entry_points = served.read(f"{DIST_INFO}/entry_points.txt")
            names = set(served.namelist())
        assert sorted(got) == sorted(set(wanted) - answers), label
        assert [n for n in got if got[n] != wanted[n]] == [], label
        assert entry_points == wheel.read(f"{DIST_INFO}/entry_points.txt")
        assert {line.split(",")[0] for line in record.splitlines()} == names, label
