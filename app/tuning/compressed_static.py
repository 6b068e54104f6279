"""Bokeh's and Panel's scripts and stylesheets, sent gzipped to browsers that accept it.

Every page needs about 2.7 MB of BokehJS and Panel scripts; gzipped they are about a quarter of that.
On a classroom's shared Wi-Fi that is most of what 30 students download at once.

A browser on the server's own machine (the teacher's, on 127.0.0.1) gets them as they are: there is
no network to save there, only the unpacking to pay. Behind a load balancer on the same machine,
pass --use-xheaders so the students' own addresses are seen.

Tornado could compress each response as it goes, but that would cost the server tens of
milliseconds of CPU per student; here each file is compressed once per process, into a temporary
folder, and served from there like any static file (with its own ETag, and `Vary: Accept-Encoding`
for caches).

`static_patterns()` puts a handler in front of Bokeh's own for /static/extensions/ (Panel's bundle
and stylesheets); `apply()` has Bokeh route each app's /static/ (BokehJS) to a gzipping handler
instead of Bokeh's StaticHandler (wrapping `bokeh.server.tornado.create_static_handler`, which Panel
itself replaces). Both serve the same folders as Bokeh's handlers.

Upstream: app/tuning/UPSTREAM.md, "compressed_static" (what would retire this patch).
"""

from __future__ import annotations

import atexit
import gzip
import hashlib
import ipaddress
import mimetypes
import os
import shutil
import tempfile
from pathlib import Path

from bokeh.embed.bundle import extension_dirs
from bokeh.server import tornado as bokeh_tornado
from bokeh.server.views.static_handler import StaticHandler
from bokeh.settings import settings
from tornado.web import HTTPError, StaticFileHandler

COMPRESSIBLE = (".js", ".css", ".json", ".svg", ".map")
MIN_BYTES = 1024  # smaller files gain nothing worth a header
_copies: dict[str, tuple[int, int, str]] = {}  # plain path -> (mtime_ns, size, gzipped copy)
_folder: str | None = None


def accepts_gzip(accept_encoding: str) -> bool:
    """Whether an Accept-Encoding header allows gzip (a q of 0 refuses it)."""
    for part in accept_encoding.split(","):
        name, *params = (p.strip() for p in part.split(";"))
        if name.lower() in ("gzip", "*"):
            q = next((p[2:] for p in params if p.startswith("q=")), "1")
            try:
                return float(q) > 0
            except ValueError:
                return False
    return False


def over_a_network(remote_ip: str | None) -> bool:
    """Whether the browser is on another machine (not a loopback address)."""
    try:
        return not ipaddress.ip_address(remote_ip or "").is_loopback
    except ValueError:
        return True


def _cache_folder() -> str:
    global _folder
    if _folder is None:
        remove_left_over_folders()
        _folder = tempfile.mkdtemp(prefix=f"{FOLDER_PREFIX}{os.getpid()}-")
        atexit.register(shutil.rmtree, _folder, True)
    return _folder


FOLDER_PREFIX = "blocktrace-gzip-"


def remove_left_over_folders(where: str | None = None) -> list[str]:
    """Remove the gzip folders of servers that are gone (a server stopped by a signal runs no atexit).

    A folder is named after the process that made it; it goes once no such process is running.
    """
    removed = []
    where = where or tempfile.gettempdir()
    for entry in os.scandir(where):
        pid_text = entry.name[len(FOLDER_PREFIX):].split("-", 1)[0]
        if not (entry.name.startswith(FOLDER_PREFIX) and entry.is_dir(follow_symlinks=False) and pid_text.isdigit()):
            continue
        try:
            os.kill(int(pid_text), 0)
        except ProcessLookupError:
            shutil.rmtree(entry.path, ignore_errors=True)
            removed.append(entry.path)
        except PermissionError:  # another user's live process
            pass
    return removed


def gzipped_copy(path: str) -> str:
    """A gzipped copy of a file, made once per process and remade if the file changes."""
    stat = os.stat(path)
    known = _copies.get(path)
    if known is not None and known[:2] == (stat.st_mtime_ns, stat.st_size) and os.path.exists(known[2]):
        return known[2]
    name = hashlib.sha256(path.encode("utf-8")).hexdigest()[:16] + "-" + Path(path).name + ".gz"
    target = os.path.join(_cache_folder(), name)
    data = gzip.compress(Path(path).read_bytes(), compresslevel=6, mtime=0)
    partial = target + ".part"
    Path(partial).write_bytes(data)
    os.replace(partial, target)
    _copies[path] = (stat.st_mtime_ns, stat.st_size, target)
    return target


class Gzipped(StaticFileHandler):
    """Tornado's static file handler, sending the gzipped copy of a text file when the browser accepts it.

    Built on Tornado's documented override points only (`validate_absolute_path`, `get_content_type`,
    `set_extra_headers`), not on Bokeh's handlers, whose `get()` differs between releases (Bokeh 3.10's
    never calls `validate_absolute_path`). `Content-Encoding: gzip` is named only when the file being
    sent is the gzipped copy made here, so a change upstream can cost the compression but never
    mislabel plain bytes.
    """

    plain_path: str | None = None
    sending_copy: str | None = None

    def validate_absolute_path(self, root, absolute_path):
        path = self.plain_path = super().validate_absolute_path(root, absolute_path)
        if (path is None or not path.endswith(COMPRESSIBLE) or os.path.getsize(path) < MIN_BYTES
                or not accepts_gzip(self.request.headers.get("Accept-Encoding", ""))
                or not over_a_network(self.request.remote_ip)):
            return path
        copy = gzipped_copy(path)
        # Validated (and, on newer Tornado, stat'ed) as the file that is sent: size and date are the copy's.
        self.sending_copy = super().validate_absolute_path(_cache_folder(), copy)
        return self.sending_copy

    def get_content_type(self) -> str:
        mime, _ = mimetypes.guess_type(self.plain_path or "")
        return mime or super().get_content_type()

    def set_extra_headers(self, path: str) -> None:
        super().set_extra_headers(path)
        if self.plain_path is not None and self.plain_path.endswith(COMPRESSIBLE):
            self.set_header("Vary", "Accept-Encoding")
        if self.sending_copy is not None and self.absolute_path == self.sending_copy:
            self.set_header("Content-Encoding", "gzip")


class GzippedBokehStatic(Gzipped):
    """/static/…: BokehJS, from the folder Bokeh's own StaticHandler serves."""

    def initialize(self, path: str | None = None, default_filename: str | None = None) -> None:
        super().initialize(path=settings.bokehjs_path(), default_filename=default_filename)


class GzippedExtensionStatic(Gzipped):
    """/static/extensions/NAME/…: Panel's bundle, its stylesheets and images (one folder per extension)."""

    def initialize(self, root: dict, default_filename: str | None = None) -> None:
        self.roots = root
        super().initialize(path="/", default_filename=default_filename)

    def parse_url_path(self, url_path: str) -> str:
        name, _, rest = url_path.partition("/")
        folder = self.roots.get(name)
        if folder is None or not rest:
            raise HTTPError(404)
        self.root = os.path.abspath(str(folder))
        return super().parse_url_path(rest)


def static_patterns() -> list[tuple]:
    """Routes for pn.serve's extra_patterns, which Bokeh matches before its own /static/extensions/."""
    return [(r"/static/extensions/(.*)", GzippedExtensionStatic, {"root": extension_dirs})]


_bokeh_static_route = bokeh_tornado.create_static_handler


def _static_route(prefix, key, app):
    route, handler, kwargs = _bokeh_static_route(prefix, key, app)
    return route, (GzippedBokehStatic if handler is StaticHandler else handler), kwargs


def apply() -> None:
    """Route each app's /static/ to GzippedBokehStatic (idempotent; before the server is made)."""
    bokeh_tornado.create_static_handler = _static_route
