"""Run an exercise's tests on a student's laptop without pytest, the way `blocktrace check` does.

The tests are the exercise's own `test_*.py` functions; each takes one argument, the student's module (the
fixture its conftest.py gives pytest users). A test passes when it returns, fails with its assertion's message
when it raises AssertionError, and errors with the exception's last line otherwise.
"""

from __future__ import annotations

import importlib.util
import inspect
import io
import sys
import traceback
from contextlib import redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

__all__ = ["Outcome", "load_module", "run_tests"]


@dataclass(frozen=True)
class Outcome:
    name: str
    passed: bool
    message: str  # empty when passed; else the first lines of what went wrong


def load_module(path: Path, name: str) -> ModuleType:
    """Import a file as a module of its own (ImportError, SyntaxError and the like come out as they are)."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look a module up by name
    spec.loader.exec_module(module)
    return module


def _message(error: BaseException, limit: int = 600) -> str:
    if isinstance(error, AssertionError):
        text = str(error) or "an assertion failed (it has no message)"
    else:
        text = "".join(traceback.format_exception_only(type(error), error)).strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def run_tests(test_file: Path, module: ModuleType) -> list[Outcome]:
    """Every `test_*` function of `test_file`, in file order, each given `module`."""
    tests = load_module(test_file, f"blocktrace_check_{test_file.stem}")
    found = [(name, fn) for name, fn in vars(tests).items()
             if name.startswith("test_") and inspect.isfunction(fn) and fn.__module__ == tests.__name__]
    found.sort(key=lambda item: item[1].__code__.co_firstlineno)
    outcomes = []
    for name, fn in found:
        try:
            with redirect_stdout(io.StringIO()):
                fn(*([module] if inspect.signature(fn).parameters else []))
        except Exception as error:  # noqa: BLE001 - the student's code may raise anything; it is reported
            outcomes.append(Outcome(name, False, _message(error)))
        else:
            outcomes.append(Outcome(name, True, ""))
    return outcomes
