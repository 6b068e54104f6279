"""Real read-only and full file systems for the store's outage tests: a read-only bind mount, a tiny tmpfs.

    with read_only(folder):     # the folder's file system refuses writes (EROFS), as a read-only volume does
        ...
    with small_disk(folder, 2 * 1024 * 1024) as fill:   # folder is a 2 MB tmpfs
        fill()                  # a filler file takes every free byte (ENOSPC); fill.release() frees them

Mounting needs root with CAP_SYS_ADMIN (the CI machine runs the tests as root): without it these
tests fail with that reason, they do not skip.
"""

from __future__ import annotations

import errno
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def _mount(*args: str) -> None:
    done = subprocess.run(["mount", *args], capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        pytest.fail(f"`mount {' '.join(args)}` failed ({done.stderr.strip()}): these tests need root with "
                    "CAP_SYS_ADMIN to make a real read-only or full file system", pytrace=False)


def _umount(folder: Path) -> None:
    # Lazily: files the code under test still has open stay usable, as on a volume made writable again.
    subprocess.run(["umount", "--lazy", str(folder)], check=True, capture_output=True, timeout=30)


@contextmanager
def read_only(folder: Path) -> Iterator[None]:
    """The folder, bind-mounted on itself read-only while inside; writable again after."""
    _mount("--bind", str(folder), str(folder))
    try:
        _mount("-o", "remount,ro,bind", str(folder))
        yield
        _mount("-o", "remount,rw,bind", str(folder))  # writable again under whatever has files open in it
    finally:
        _umount(folder)


class Filler:
    """A file that takes all free space of a small disk, and gives it back."""

    def __init__(self, folder: Path):
        self.path = folder / "filler"

    def __call__(self) -> None:
        with self.path.open("ab") as out:
            block = b"\0" * 4096
            try:
                while True:
                    out.write(block)
                    out.flush()
            except OSError as error:
                if error.errno != errno.ENOSPC:
                    raise
            try:
                out.close()
            except OSError:
                pass

    def release(self) -> None:
        self.path.unlink(missing_ok=True)


@contextmanager
def small_disk(folder: Path, size: int) -> Iterator[Filler]:
    """``folder`` becomes an empty tmpfs of ``size`` bytes while inside."""
    folder.mkdir(parents=True, exist_ok=True)
    _mount("-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(folder))
    try:
        yield Filler(folder)
    finally:
        _umount(folder)
