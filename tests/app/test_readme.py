"""The README's two commands: the test command CI runs, and the command that serves the app."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
CI_RUN = (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def fenced_bash_lines(markdown: str) -> list[str]:
    """Every non-empty line inside ```bash fences."""
    blocks = re.findall(r"^```(?:bash|sh|shell)[^\n]*\n(.*?)^```", markdown, flags=re.MULTILINE | re.DOTALL)
    return [line.strip() for block in blocks for line in block.splitlines() if line.strip()]


def test_readme_test_command_is_what_ci_runs() -> None:
    """The README's test command (the bash line that installs and runs pytest) appears word for word in .ci/run."""
    # Other lines may run one lesson's exercise tests; the suite's command is the one that also installs.
    commands = [line for line in fenced_bash_lines(README) if "python -m pytest" in line and "pip install" in line]
    assert len(commands) == 1, f"expected one test command in the README, found {commands}"
    ci_lines = [line.strip() for line in CI_RUN.splitlines()]
    assert commands[0] in ci_lines


def test_readme_gives_the_run_command() -> None:
    """A fresh machine serves the app with the README's one line: pip install . && blocktrace serve."""
    assert "pip install . && blocktrace serve" in fenced_bash_lines(README)


def test_readme_is_one_screen_and_its_links_lead_somewhere() -> None:
    """A teacher reads the README on one screen (the reference lives in docs/); every relative link in it and in
    docs/ names a file that exists."""
    assert len(README.splitlines()) <= 70
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = page.read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text):
            if not target.startswith(("http://", "https://")):
                assert (page.parent / target).exists(), f"{page.name} links to {target}, which is not there"
