"""app/compressed_static.py: the page's scripts and stylesheets go out gzipped, byte for byte the same."""

from __future__ import annotations

import gzip
import re
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from app import compressed_static

TRACE = "/explorables/transformer-block-trace"


def get(url: str, **headers: str) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=60) as r:
            return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read()
    except urllib.error.HTTPError as error:
        return error.code, {k.lower(): v for k, v in error.headers.items()}, b""


def page_files(server) -> list[str]:
    """The scripts a page loads, plus one of Panel's stylesheets, as absolute URLs."""
    _, _, body = get(server.url(TRACE))
    scripts = [server.url(src.removeprefix("..")) for src in re.findall(r'<script[^>]+src="([^"]+)"', body.decode())]
    assert len(scripts) >= 4
    return [*scripts, server.url("/static/extensions/panel/css/button.css")]


def test_every_script_of_a_page_arrives_gzipped_and_unchanged(server) -> None:
    """Same bytes once unpacked, same type, a smaller body, and caches told the answer depends on it."""
    total_plain = total_gzipped = 0
    for url in page_files(server):
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


def test_a_gzipped_script_is_revalidated_by_its_own_tag(server) -> None:
    url = page_files(server)[0]
    _, headers, _ = get(url, **{"Accept-Encoding": "gzip"})
    status, _, body = get(url, **{"Accept-Encoding": "gzip", "If-None-Match": headers["etag"]})
    assert (status, body) == (304, b"")


def test_a_refused_gzip_and_paths_outside_the_folders_are_handled(server) -> None:
    url = page_files(server)[0]
    _, headers, _ = get(url, **{"Accept-Encoding": "gzip;q=0, identity"})
    assert "content-encoding" not in headers
    for path in ("/static/../app/server.py", "/static/extensions/panel/../../../../etc/hostname", "/static/js/none.js"):
        status, _, _ = get(server.url(path), **{"Accept-Encoding": "gzip"})
        assert status in (403, 404), path


@pytest.mark.parametrize(("header", "accepted"), [
    ("gzip", True), ("deflate, gzip;q=0.5", True), ("GZIP", True), ("*", True), ("br, gzip", True),
    ("gzip;q=0", False), ("identity", False), ("", False), ("deflate", False), ("gzip;q=x", False),
])
def test_accept_encoding_is_read_as_browsers_write_it(header: str, accepted: bool) -> None:
    assert compressed_static.accepts_gzip(header) is accepted


def test_a_changed_file_gets_a_new_copy(tmp_path) -> None:
    source = tmp_path / "app.js"
    source.write_text("let a = 1;\n" * 200)
    first = compressed_static.gzipped_copy(str(source))
    assert gzip.decompress(Path(first).read_bytes()) == source.read_bytes()
    assert compressed_static.gzipped_copy(str(source)) == first
    source.write_text("let b = 2;\n" * 300)
    again = compressed_static.gzipped_copy(str(source))
    assert gzip.decompress(Path(again).read_bytes()) == source.read_bytes()
