"""The engine stays pure NumPy: importing it must not pull in the user-interface libraries."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
UI_MODULES = ("panel", "bokeh", "param")


def _modules_after(statement: str) -> list[str]:
    """Top-level module names in sys.modules after running `statement` in a fresh interpreter."""
    code = f"import json, sys\n{statement}\nprint(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}})))"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          check=True)
    return json.loads(done.stdout.splitlines()[-1])


def test_importing_the_engine_imports_no_ui_library() -> None:
    """Importing explorables.engine (every module) and running a trace leaves panel, bokeh and param unloaded."""
    modules = _modules_after(
        "import blocktrace.explorables.engine\n"
        "from blocktrace.explorables.engine import config, export, forward, ops, params, parsing, presets, stages\n"
        "from blocktrace.explorables.engine.export import to_json\n"
        "to_json(blocktrace.explorables.engine.run_preset('decoder-lab'))"
    )
    assert "blocktrace" in modules and "numpy" in modules  # the check itself ran
    loaded = [name for name in UI_MODULES if name in modules]
    assert loaded == [], f"the engine imported {loaded}"

