"""What the tests against PyTorch share: loading a fixture builder by path, and comparing what it builds now
with the committed JSON (tests/fixtures/make_*.py write it; torch is not a project dependency)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def load_builder(name: str) -> ModuleType:
    """tests/fixtures/<name>.py as a module (the fixtures folder is not a package; the builder imports torch)."""
    spec = importlib.util.spec_from_file_location(name, FIXTURES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def tolerances(live_version: str, stored_version: str) -> tuple[float, float]:
    """(rtol, atol): bit-for-bit close on the torch that wrote the JSON; other builds may round the last bits."""
    return (1e-12, 1e-12) if live_version == stored_version else (1e-6, 1e-6)


def assert_same_tree(live: Any, stored: Any, path: str, rtol: float, atol: float) -> None:
    """The JSON trees agree: the same keys in order, the same list lengths, numbers within the tolerances."""
    if isinstance(stored, dict):
        assert list(live) == list(stored), path
        for key in stored:
            assert_same_tree(live[key], stored[key], f"{path}.{key}", rtol, atol)
    elif isinstance(stored, list) and stored and isinstance(stored[0], dict):
        assert len(live) == len(stored), path
        for i, (a, b) in enumerate(zip(live, stored, strict=True)):
            assert_same_tree(a, b, f"{path}[{i}]", rtol, atol)
    elif isinstance(stored, list | float | int) and not isinstance(stored, bool):
        np.testing.assert_allclose(np.asarray(live, float), np.asarray(stored, float), rtol, atol, err_msg=path)
    else:
        assert live == stored, path
