"""The Embed dialog's snippets and the server's answer to a page that embeds an explorable."""

from __future__ import annotations

from html.parser import HTMLParser
from urllib.parse import parse_qs, urlsplit

from blocktrace.app.server.embed_check import embed_answer, page_host
from blocktrace.explorables.components.embed import (
    FRAME_SCRIPT,
    HOST_SCRIPT,
    IFRAME_HEIGHT,
    MARK,
    frame_height_script,
    iframe_snippet,
    script_snippet,
)

BASE = "http://192.168.1.20:5006"
ROUTE = "/explorables/transformer-block-trace"


class Tags(HTMLParser):
    """Every start tag of a snippet, with its attributes, in order."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.feed(text)

    def handle_starttag(self, tag, attrs) -> None:
        self.tags.append((tag, dict(attrs)))


def test_the_iframe_snippet_is_marked_sized_and_brings_its_script() -> None:
    """The iframe carries the state, embed=1, the mark embed-host.js looks for and a height of its own for a
    page without the script; the script tag next to it comes from the same server."""
    tags = Tags(iframe_snippet(BASE, ROUTE, {"attention_scale": "0", "input": "1, 2"}, 'A "quoted" <title>')).tags
    assert [t for t, _ in tags] == ["iframe", "script"]
    frame, script = tags[0][1], tags[1][1]
    src = urlsplit(frame["src"])
    assert f"{src.scheme}://{src.netloc}{src.path}" == BASE + ROUTE
    assert parse_qs(src.query) == {"attention_scale": ["0"], "input": ["1, 2"], "embed": ["1"]}
    assert frame[MARK] == "iframe" and frame["height"] == str(IFRAME_HEIGHT) and frame["title"] == 'A "quoted" <title>'
    assert script["src"] == BASE + HOST_SCRIPT and "defer" in script


def test_the_script_snippet_puts_bokehs_tag_in_a_marked_placeholder() -> None:
    """The server_document tag sits in a placeholder that names our server, after embed-host.js, which
    writes there what to change when the server refuses the page."""
    snippet = script_snippet(BASE, ROUTE, {"attention_scale": "0"})
    tags = Tags(snippet).tags
    assert [t for t, _ in tags] == ["div", "script", "script"]
    assert tags[0][1] == {MARK: "script", "data-blocktrace-server": BASE}
    assert tags[1][1]["src"] == BASE + HOST_SCRIPT
    assert f"{BASE}{ROUTE}/autoload.js" in snippet and "attention_scale=0" in snippet and "embed=1" in snippet
    assert snippet.rstrip().endswith("</div>")


def test_snippet_values_cannot_break_out_of_their_attributes() -> None:
    """A value with quotes and angle brackets stays inside the src attribute (escaped, then URL-encoded)."""
    snippet = iframe_snippet(BASE, ROUTE, {"input": '"><script>alert(1)</script>'}, "<b>")
    assert "<script>alert" not in snippet and "<b>" not in snippet
    assert [t for t, _ in Tags(snippet).tags] == ["iframe", "script"]


def test_the_embedded_page_loads_its_height_script_from_this_server() -> None:
    """The CustomJS an embedded page runs only adds our own script (a path on this server) when framed."""
    callback = frame_height_script()
    assert callback.args == {"src": FRAME_SCRIPT} and FRAME_SCRIPT.startswith("/assets/js/")
    assert "window.parent !== window" in callback.code


def test_the_server_accepts_the_origins_it_allows_and_names_the_flag_for_others() -> None:
    """An allowed origin (or none: a page of the server itself) is accepted; another gets the command
    that would allow it, naming its host and port as Bokeh compares them."""
    allowed = ["localhost:5006", "127.0.0.1:5006", "course.example:80"]
    assert embed_answer(None, allowed)["allowed"] is True
    assert embed_answer("http://localhost:5006", allowed)["allowed"] is True
    assert embed_answer("https://course.example", allowed)["allowed"] is True  # no port: Bokeh's ":80"
    refused = embed_answer("http://Course.example:8000", allowed)
    assert refused["allowed"] is False and refused["host"] == "course.example:8000"
    assert refused["command"] == "blocktrace serve --allow-websocket-origin course.example:8000"
    assert "course.example:8000" in refused["message"]
    assert embed_answer("http://teacher.example", ["*.example:80"])["allowed"] is True  # Bokeh's patterns


def test_odd_origins_get_a_message_and_no_command() -> None:
    """A page opened as a file, or an origin that is no http(s) host, is refused without a command to copy."""
    for origin in ("null", "chrome-extension://abc", "http://a b", "http://" + "x" * 300):
        answer = embed_answer(origin, ["localhost:5006"])
        assert answer["allowed"] is False and answer["command"] == "" and answer["message"]
    assert "file" in embed_answer("null", [])["message"]
    assert page_host("https://[::1]:8443") == "[::1]:8443"
