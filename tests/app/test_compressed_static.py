"""app/tuning/compressed_static.py: the page's scripts and stylesheets go out gzipped, byte for byte the same,
to browsers on other machines (lan_server sees these tests' requests as a student laptop's)."""

from __future__ import annotations

import gzip
import os
import re
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from blocktrace.app.tuning import compressed_static
from tests.conftest import STUDENT_LAPTOP

TRACE = "/explorables/transformer-block-trace"


def get(url: str, **headers: str) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, headers={**STUDENT_LAPTOP, **headers})
    try:
        with urllib.request.urlopen(request, timeout=60) as r:
            return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read()
    except urllib.error.HTTPError as error:
        return error.code, {k.lower(): v for k, v in error.headers.items()}, b""


def page_files(server) -> list[str]:
    """The scripts a page loads, plus one of Panel's stylesheets, as absolute URLs."""
    _, _, body = get(server.url(TRACE))
    scripts = [server.url(src.removeprefix("..")) for src in re.findall(r'<script[^>]+src="([^"]+)"', body.decode())]
    names = {src.split("?")[0].rsplit("/", 1)[-1] for src in scripts}
    assert {"bokeh.min.js", "panel.min.js"} <= names, names  # Bokeh 3.9 also lists widgets and tables
    return [*scripts, server.url("/static/extensions/panel/css/button.css")]


def test_every_script_of_a_page_arrives_gzipped_and_unchanged(lan_server) -> None:
    """Same bytes once unpacked, same type, a smaller body, and caches told the answer depends on it."""
    total_plain = total_gzipped = 0
    for url in page_files(lan_server):
        status, plain_headers, plain = get(url)
        assert status == 200 and "content-encoding" not in plain_headers
        status, headers, body = get(url, **{"Accept-Encoding": "gzip, deflate"})
        assert status == 200 and headers["content-encoding"] == "gzip", url
        assert gzip.decompress(body) == plain, url
        assert headers["content-type"] == plain_headers["content-type"]
        assert headers["vary"] == plain_headers["vary"] == "Accept-Encoding"
        assert headers["etag"] != plain_headers["etag"]  # two representations, two tags
        assert int(headers["content-length"]) == len(body)
        total_plain, total_gzipped = total_plain + len(plain), total_gzipped + len(body)
    assert total_gzipped < total_plain / 3


def test_a_gzipped_script_is_revalidated_by_its_own_tag(lan_server) -> None:
    url = page_files(lan_server)[0]
    _, headers, _ = get(url, **{"Accept-Encoding": "gzip"})
    status, _, body = get(url, **{"Accept-Encoding": "gzip", "If-None-Match": headers["etag"]})
    assert (status, body) == (304, b"")


def test_a_refused_gzip_and_paths_outside_the_folders_are_handled(lan_server) -> None:
    url = page_files(lan_server)[0]
    _, headers, _ = get(url, **{"Accept-Encoding": "gzip;q=0, identity"})
    assert "content-encoding" not in headers
    up = "../" * 16  # past the filesystem's root, so the paths below name files that exist
    for path in (f"/static/{up}etc/hostname", f"/static/extensions/panel/{up}etc/hostname"):
        assert Path("/etc/hostname").is_file()
        status, _, body = get(lan_server.url(path), **{"Accept-Encoding": "gzip"})
        assert (status, body) == (403, b""), path  # outside the folder: refused, not served
    status, _, _ = get(lan_server.url("/static/js/none.js"), **{"Accept-Encoding": "gzip"})
    assert status == 404


def test_gzip_folders_of_servers_that_are_gone_are_removed(tmp_path) -> None:
    """A server stopped by a signal leaves its folder; the next one removes it, and leaves live ones alone."""
    import subprocess
    import sys

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True).stdout.strip()
    (tmp_path / f"{compressed_static.FOLDER_PREFIX}{gone}-abc").mkdir()
    (tmp_path / f"{compressed_static.FOLDER_PREFIX}{os.getpid()}-def").mkdir()
    (tmp_path / "unrelated").mkdir()
    assert compressed_static.remove_left_over_folders(str(tmp_path)) == [
        str(tmp_path / f"{compressed_static.FOLDER_PREFIX}{gone}-abc")]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [f"{compressed_static.FOLDER_PREFIX}{os.getpid()}-def", "unrelated"])


def test_a_browser_on_the_servers_own_machine_gets_the_files_as_they_are(server, lan_server) -> None:
    """On loopback there is no network to save, only unpacking to pay: no gzip, whatever the browser accepts."""
    for running, headers in ((server, STUDENT_LAPTOP), (lan_server, {"X-Forwarded-For": "127.0.0.1"})):
        request = urllib.request.Request(page_files(running)[0], headers={**headers, "Accept-Encoding": "gzip"})
        with urllib.request.urlopen(request, timeout=60) as r:  # `server` ignores X-Forwarded-For
            assert r.headers.get("Content-Encoding") is None and r.headers.get("Vary") == "Accept-Encoding"


@pytest.mark.parametrize(("address", "remote"), [
    ("127.0.0.1", False), ("::1", False), ("127.8.0.3", False),
    ("192.168.1.23", True), ("10.0.0.7", True), ("fe80::1", True), ("", True), (None, True),
])
def test_loopback_is_told_from_the_classroom_network(address, remote: bool) -> None:
    assert compressed_static.over_a_network(address) is remote


@pytest.mark.parametrize(("header", "accepted"), [
    ("gzip", True), ("deflate, gzip;q=0.5", True), ("GZIP", True), ("*", True), ("br, gzip", True),
    ("gzip;q=0", False), ("identity", False), ("", False), ("deflate", False), ("gzip;q=x", False),
])
def test_accept_encoding_is_read_as_browsers_write_it(header: str, accepted: bool) -> None:
    assert compressed_static.accepts_gzip(header) is accepted


def test_a_changed_file_gets_a_new_copy(tmp_path) -> None:
    source = tmp_path / "blocktrace.app.js"
    source.write_text("let a = 1;\n" * 200)
    first = compressed_static.gzipped_copy(str(source))
    assert gzip.decompress(Path(first).read_bytes()) == source.read_bytes()
    assert compressed_static.gzipped_copy(str(source)) == first
    source.write_text("let b = 2;\n" * 300)
    again = compressed_static.gzipped_copy(str(source))
    assert gzip.decompress(Path(again).read_bytes()) == source.read_bytes()
