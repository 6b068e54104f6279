"""What every response and websocket of the server carries or is held to, whoever asks.

- `X-Content-Type-Options: nosniff` on every response, so a browser never runs a file as a type it
  guessed; and `Content-Security-Policy: frame-ancestors …`, so a page of ours can be framed only by
  this server and the origins the teacher allowed (`--allow-websocket-origin`).
- A cap on one websocket message from a browser (`MAX_MESSAGE_BYTES`): a change, a name or an
  explanation is a few kilobytes; a larger message is refused by Tornado before any of it is parsed.
- The classroom's data folder is 0700 and everything the server writes there 0600 (`private_data_dir`,
  `write_private_file`, and a umask of 077 set by `blocktrace serve`).

Headers are added by a Tornado output transform (`transforms=` of the Tornado application, which
Bokeh's server passes on), the message cap is Bokeh's own `websocket_max_message_size`.
"""

from __future__ import annotations

import logging
import os
import secrets
import stat
from collections.abc import Callable, Iterable
from pathlib import Path

from tornado.web import OutputTransform

__all__ = ["MAX_MESSAGE_BYTES", "frame_ancestors", "private_data_dir", "server_settings", "write_private_file"]

log = logging.getLogger(__name__)
MAX_MESSAGE_BYTES = 256 * 1024


def frame_ancestors(origins: Iterable[str], full_origins: Iterable[str] = ()) -> str:
    """The CSP source list of the pages that may frame ours: this server, each allowed HOST[:PORT], and each of
    `full_origins` (scheme://host[:port]: a registered LMS's, app/lti/platforms.py)."""
    sources = ["'self'"]
    for origin in origins:
        if origin and all(c.isalnum() or c in ".-:[]" for c in origin):  # a host[:port], nothing else
            sources += [f"http://{origin}", f"https://{origin}"]
    for origin in full_origins:
        scheme, _, host = origin.partition("://")
        if scheme in ("http", "https") and host and all(c.isalnum() or c in ".-:[]" for c in host):
            sources.append(origin)
    return "frame-ancestors " + " ".join(dict.fromkeys(sources))


def security_headers(origins: Iterable[str],
                     lms_origins: Callable[[], tuple[str, ...]] | None = None) -> type[OutputTransform]:
    """A Tornado output transform adding nosniff and the framing policy to every response; `lms_origins` gives
    the registered LMSs' origins as they are now."""
    origins = list(origins)
    fixed = frame_ancestors(origins)

    class SecurityHeaders(OutputTransform):
        def transform_first_chunk(self, status_code, headers, chunk, finishing):
            extra = lms_origins() if lms_origins is not None else ()
            headers.setdefault("X-Content-Type-Options", "nosniff")
            headers.setdefault("Content-Security-Policy", frame_ancestors(origins, extra) if extra else fixed)
            return status_code, headers, chunk

    return SecurityHeaders


def server_settings(origins: Iterable[str], lms_origins: Callable[[], tuple[str, ...]] | None = None) -> dict:
    """What `pn.serve` passes on to Bokeh's server and its Tornado application."""
    return {"transforms": [security_headers(origins, lms_origins)], "websocket_max_message_size": MAX_MESSAGE_BYTES}


def private_data_dir(path: Path) -> Path:
    """Make (or tighten) the data folder: 0700, and 0600 for what is already in it.

    The server also sets its umask to 077 before (`blocktrace serve`), so SQLite's database, journal and
    WAL files are 0600 from the moment they exist.
    """
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        if stat.S_IMODE(path.stat().st_mode) != 0o700:
            os.chmod(path, 0o700)
        for entry in path.rglob("*"):  # left looser by an older version, a copy or a restore
            if not entry.is_symlink() and stat.S_IMODE(entry.lstat().st_mode) & 0o077:
                os.chmod(entry, 0o700 if entry.is_dir() else 0o600)
    except OSError as error:  # e.g. a read-only volume: serve anyway; the store says when it cannot write
        log.warning("could not make the data folder private (%s): %s", path, error)
    return path


def write_private_file(path: Path, text: str, *, replace: bool) -> None:
    """Write `text` to `path`, mode 0600 whatever the umask, whole or not at all: written aside, then linked into place
    (a file already there stays: the first of several processes starting at once wins) or, with `replace`, renamed
    over it."""
    aside = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(aside, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, text.encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)
    if replace:
        os.replace(aside, path)
        return
    try:
        os.link(aside, path)
    except FileExistsError:
        pass  # another process made it first; theirs is kept
    finally:
        os.unlink(aside)
