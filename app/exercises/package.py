"""blocktrace as a wheel made from the copy this server runs, so a student's laptop installs the same version offline.

A classroom without the internet still reaches the teacher's server, and the lesson page shows the one line that
installs from it: `python -m pip install --no-index --no-deps http://HOST:PORT/exercises/package/blocktrace-…whl`.

- The wheel is pure Python (py3-none-any), made from the installed distribution itself: its file list (RECORD),
  or, for an editable install (a checkout installed with `pip install -e`), the packages and package data that
  pyproject.toml names in that checkout; its METADATA, entry points and licence as installed. The zip is made
  the same way each time (sorted names, fixed dates), so every worker process makes the same bytes.
- It is made once per process and kept in the data folder under its version (an editable install's source may
  change under the same version, so it is made again at each start).
- `--no-deps`: offline, pip cannot fetch Panel, Bokeh or Tornado, and `blocktrace check` needs none of them, only
  NumPy (app/cli.py says so when a laptop lacks it).
- Left out: the in-page exercises' answers (lessons/*/exercise/in_page.yaml, IN_PAGE_FILE): only this server
  reads them, and the wheel is anyone's to download.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import secrets
import threading
import tomllib
import zipfile
from functools import cache
from importlib.metadata import Distribution, distributions
from pathlib import Path
from urllib.parse import unquote, urlsplit

from blocktrace.app.package_data import ROOT

__all__ = ["INSTALL_PATH", "IN_PAGE_FILE", "build_wheel", "install_command", "installed_version",
           "running_distribution", "served_wheel", "wheel_files", "wheel_name"]

log = logging.getLogger(__name__)

NAME = "blocktrace"
INSTALL_PATH = "/exercises/package/"  # where the wheel is served (handlers.py)
IN_PAGE_FILE = "in_page.yaml"  # an exercise's in-page answers (in_page.py): never in the wheel
PACKAGES_DIR = "packages"  # in the data folder
ZIP_DATE = (1980, 1, 1, 0, 0, 0)  # the earliest a zip can say: the same bytes at every build
INSTALLED_ONLY = {"INSTALLER", "REQUESTED", "RECORD", "direct_url.json", "WHEEL"}  # dist-info files pip writes


@cache  # what is installed does not change under a running server
def running_distribution() -> Distribution | None:
    """The installed distribution this server's code comes from: an editable install of this checkout, or the
    install whose files hold this very package (not an egg-info left in a checkout, which lists sources)."""
    for dist in distributions(name=NAME):
        source = _editable_source(dist)
        if source is not None:
            if source.resolve() == ROOT.resolve():
                return dist
            continue
        here = next((p for p in dist.files or () if p.as_posix() == f"{NAME}/app/__init__.py"), None)
        if here is not None and Path(str(dist.locate_file(here))).resolve() == (ROOT / "app" / "__init__.py").resolve():
            return dist
    return None


@cache
def installed_version() -> str | None:
    """The version of the blocktrace this server runs (None: not installed, so there is no package to offer)."""
    dist = running_distribution()
    return None if dist is None else dist.version


def wheel_name(dist_version: str) -> str:
    return f"{NAME}-{dist_version}-py3-none-any.whl"


def install_command(base_url: str, dist_version: str) -> str:
    """The line a student types: the server's own wheel, no index (offline, and no wait for PyPI), no
    dependencies (the server's libraries cannot be had offline; `blocktrace check` needs only NumPy)."""
    return (f"python -m pip install --no-index --no-deps "
            f"{base_url.rstrip('/')}{INSTALL_PATH}{wheel_name(dist_version)}")


def _left_out(archive_name: str) -> bool:
    parts = archive_name.split("/")
    return "__pycache__" in parts or archive_name.endswith((".pyc", ".pyo")) or parts[-1] == IN_PAGE_FILE


def _editable_source(dist: Distribution) -> Path | None:
    """The checkout of an editable install (pip's direct_url.json), else None."""
    try:
        direct = json.loads(dist.read_text("direct_url.json") or "null")
    except ValueError:
        return None
    if not isinstance(direct, dict) or not (direct.get("dir_info") or {}).get("editable"):
        return None
    url = urlsplit(str(direct.get("url", "")))
    return Path(unquote(url.path)) if url.scheme == "file" else None


def _source_files(source: Path) -> dict[str, Path]:
    """What setuptools puts in the wheel, read from the checkout's pyproject.toml: each listed package's modules
    and the package data its globs match, under the package's own path (blocktrace/app/...)."""
    tool = tomllib.loads((source / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    package_dir: dict[str, str] = tool.get("package-dir", {})
    data: dict[str, list[str]] = tool.get("package-data", {})
    found = {}
    for package in tool["packages"]:
        owner = max((p for p in package_dir if package == p or package.startswith(p + ".")), key=len, default="")
        rest = package[len(owner):].lstrip(".").split(".") if package != owner else []
        folder = source.joinpath(package_dir.get(owner, owner.replace(".", "/")), *[r for r in rest if r])
        for pattern in ["*.py", *data.get(package, []), *data.get("*", [])]:
            for path in folder.glob(pattern):
                if path.is_file():
                    found[f"{package.replace('.', '/')}/{path.relative_to(folder).as_posix()}"] = path
    return found


def wheel_files(dist: Distribution) -> dict[str, Path] | None:
    """The wheel's files (archive name -> file on disk) but for its WHEEL and RECORD; None when the install does
    not say what it holds."""
    listed = dist.files
    if listed is None:
        return None
    info = f"{NAME}-{dist.version}.dist-info/"
    files = {str(p.as_posix()): Path(str(dist.locate_file(p))) for p in listed}
    source = _editable_source(dist)
    package = _source_files(source) if source is not None else \
        {name: path for name, path in files.items() if name.startswith(f"{NAME}/")}
    meta = {name: path for name, path in files.items()
            if name.startswith(info) and name.removeprefix(info) not in INSTALLED_ONLY}
    chosen = {name: path for name, path in {**package, **meta}.items() if not _left_out(name)}
    return chosen if any(name.startswith(f"{NAME}/") for name in chosen) else None


def _digest(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode("ascii")


def _entry(name: str) -> zipfile.ZipInfo:
    entry = zipfile.ZipInfo(name, ZIP_DATE)
    entry.compress_type = zipfile.ZIP_DEFLATED
    entry.external_attr = 0o644 << 16
    return entry


def build_wheel(dist: Distribution, out: Path) -> bool:
    """Write the wheel of `dist` to `out`; False (nothing written) when the install does not list its files."""
    files = wheel_files(dist)
    if files is None:
        return False
    info = f"{NAME}-{dist.version}.dist-info"
    contents = {name: files[name].read_bytes() for name in sorted(files)}
    contents[f"{info}/WHEEL"] = (b"Wheel-Version: 1.0\nGenerator: blocktrace (app/exercises/package.py)\n"
                                 b"Root-Is-Purelib: true\nTag: py3-none-any\n")
    record = "".join(f"{name},{_digest(data)},{len(data)}\n" for name, data in contents.items())
    contents[f"{info}/RECORD"] = (record + f"{info}/RECORD,,\n").encode("utf-8")
    with zipfile.ZipFile(out, "w") as wheel:
        for name, data in contents.items():
            wheel.writestr(_entry(name), data)
    return True


_made: dict[Path, Path | None] = {}  # data folder -> the wheel this process made there
_making = threading.Lock()


def served_wheel(data_dir: Path) -> Path | None:
    """The wheel of the running blocktrace, made in `data_dir` on the first call of this process (None when
    blocktrace is not installed in a way that lists its files)."""
    with _making:
        if _made.get(data_dir) is None:
            try:
                _made[data_dir] = _make(data_dir)
            except OSError as error:  # a full disk or a data folder gone: the next request tries again
                log.warning("the package for students' laptops could not be made: %s", error)
                return None
        return _made[data_dir]


def _make(data_dir: Path) -> Path | None:
    dist = running_distribution()
    if dist is None:
        return None
    target = data_dir / PACKAGES_DIR / wheel_name(dist.version)
    if target.is_file() and _editable_source(dist) is None:
        return target  # an installed release never changes under its version
    target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    aside = target.with_name(f".{target.name}.{os.getpid()}.{secrets.token_hex(4)}")
    try:
        if not build_wheel(dist, aside):
            log.warning("blocktrace is installed without a file list: no package to serve to students")
            return None
        os.replace(aside, target)  # whole or not at all, also with several worker processes making it at once
    finally:
        aside.unlink(missing_ok=True)
    log.info("made %s for students' laptops", target.name)
    return target
