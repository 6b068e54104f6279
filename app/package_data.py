"""Where blocktrace keeps its data files, read through the package (never the working directory).

Installed, `blocktrace/` in site-packages holds app/, explorables/, lessons/ and static/; in a
checkout the repository's root holds the same four folders. Either way they sit beside `blocktrace.app`.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

__all__ = ["LESSONS_DIR", "ROOT"]

ROOT = Path(str(files("blocktrace.app"))).parent
LESSONS_DIR = ROOT / "lessons"
