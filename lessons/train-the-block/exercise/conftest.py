"""Loads the code under test: optimiser.py beside this file, or the file named by BLOCKTRACE_SOLUTION.

The project's own suite sets BLOCKTRACE_SOLUTION to a reference solution to prove these tests pass on it;
as a student you never need it.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from types import ModuleType

import pytest

HERE = Path(__file__).resolve().parent
STUDENT_FILE = HERE / "optimiser.py"
ENV_VAR = "BLOCKTRACE_SOLUTION"


def module_path() -> Path:
    return Path(os.environ.get(ENV_VAR) or STUDENT_FILE).resolve()


def load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location("optimiser_under_test", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def pytest_report_header() -> str:
    return f"testing {module_path()}"


@pytest.fixture(scope="session")
def optimiser() -> ModuleType:
    """The module with warmup_lr, clip_by_global_norm and adam_step."""
    return load(module_path())
