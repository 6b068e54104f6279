"""The exercise from a school laptop: the download from the lesson page, `blocktrace check` in its folder, and
the checked result on the student's page and the teacher's dashboard; a forged ticket is refused."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import urllib.request
import zipfile
from pathlib import Path

import pytest
from playwright.sync_api import Browser, expect

from tests.conftest import module_server

pytestmark = pytest.mark.browser
ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "check the exercise"
LESSON = "/lessons/transformer-block?class=lab4"


@pytest.fixture(scope="module")
def classroom(tmp_path_factory):
    yield from module_server(tmp_path_factory, "exercise", "--teacher-password", PASSWORD)


def check(folder: Path) -> subprocess.CompletedProcess:
    """`blocktrace check` as the student runs it, in the unzipped folder, with no pytest involved."""
    return subprocess.run([sys.executable, "-m", "blocktrace.app.cli", "check"], cwd=folder, capture_output=True,
                          text=True, timeout=120)


def dashboard(classroom) -> str:
    request = urllib.request.Request(classroom.url("/teacher?class=lab4"))
    request.add_header("Authorization", "Basic " + base64.b64encode(f"teacher:{PASSWORD}".encode()).decode())
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.read().decode()


def test_download_check_and_see_the_checked_result(browser: Browser, classroom, tmp_path) -> None:
    page = browser.new_context(accept_downloads=True).new_page()
    page.goto(classroom.url(LESSON))
    expect(page.locator(".bt-exercise-result")).to_have_text("No result yet.")
    with page.expect_download() as info:
        page.get_by_role("link", name="Download the exercise").click()
    archive = tmp_path / "exercise.zip"
    info.value.save_as(archive)
    zipfile.ZipFile(archive).extractall(tmp_path)
    folder = tmp_path / "transformer-block-residual"
    assert json.loads((folder / "blocktrace-exercise.json").read_text())["class"] == "lab4"

    starter = check(folder)  # the starter as downloaded: two mistakes, named
    assert starter.returncode == 1 and "7 of 12 tests pass" in starter.stdout, starter.stdout + starter.stderr
    assert "your RMSNorm subtracts the mean" in starter.stdout
    expect(page.locator(".bt-exercise-result")).to_contain_text("7 of 12 tests pass", timeout=20_000)

    (folder / "residual.py").write_bytes((ROOT / "tests/exercise_solutions/transformer_block.py").read_bytes())
    fixed = check(folder)
    assert fixed.returncode == 0 and "every test passes and the server checked your numbers" in fixed.stdout
    expect(page.locator(".bt-exercise-result")).to_contain_text("Checked: all 12 tests pass", timeout=20_000)
    assert "passed (checked)" in dashboard(classroom)

    ticket = json.loads((folder / "blocktrace-exercise.json").read_text())
    ticket["learner"] = "f" * 32  # a classmate's id: the signature no longer holds
    (folder / "blocktrace-exercise.json").write_text(json.dumps(ticket))
    forged = check(folder)
    assert forged.returncode == 1 and "not issued by this server" in forged.stdout
    page.reload()  # the checked result came back from the store
    expect(page.locator(".bt-exercise-result")).to_contain_text("Checked: all 12 tests pass")
    page.context.close()


def test_the_download_needs_the_lesson_page_first(classroom) -> None:
    try:
        urllib.request.urlopen(classroom.url("/exercises/transformer-block-residual.zip"), timeout=30)
        status = 200
    except urllib.error.HTTPError as error:
        status = error.code
    assert status == 403
