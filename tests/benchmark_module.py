"""A benchmark script (benchmarks/ is no package) loaded as a module, for tests of its pure parts."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def load_benchmark(name: str) -> ModuleType:
    """benchmarks/<name>.py, imported under a name of its own (dataclasses look their module up by name)."""
    spec = importlib.util.spec_from_file_location(f"{name}_under_test", BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
