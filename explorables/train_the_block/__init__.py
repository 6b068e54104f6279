"""Explorable "train-the-block": race two models that differ in one design choice on a tiny task.

The view and the state are loaded on first use (PEP 562), not with the package: the race's worker processes
import runner.py from this package, and need neither Panel nor Bokeh (about 1.5 s of a worker's start-up).
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

EXPLORABLE_ID = "train-the-block"
__all__ = ["EXPLORABLE_ID", "RaceExplorable", "RaceState"]

_LAZY = {"RaceExplorable": "view", "RaceState": "state"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
