"""The real server in a subprocess: routes, /health, and the document each session receives.

Panel sends a page's content over its websocket, not in the first HTML response, so what a
page shows is read here through its websocket (tests/app/bokeh_ws_client.py): the same document a browser
would render, without a browser.
"""

from __future__ import annotations

import html
import json
import re
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import SimpleNamespace
from urllib.parse import urlencode

import panel.models  # noqa: F401  (registers Panel's Bokeh models so the client can read a document)
import pytest
from bokeh.document import Document
from bokeh.model import Model

import blocktrace.explorables.components.floor_diagram  # noqa: F401  (the floor diagram's model, read too)
import blocktrace.explorables.transformer_block_trace.view  # noqa: F401  (the block trace's drawing component, read too)
from blocktrace.app.server.catalogue import EXPLORABLES, explorable
from tests.app.bokeh_ws_client import pull_document

TRACE_ID = "transformer-block-trace"
TRACE_ROUTE = "/explorables/transformer-block-trace"
TITLE = "Pre-norm Transformer block trace"


@dataclass
class Response:
    status: int
    body: str


def get(url: str) -> Response:
    """GET a URL; HTTP errors come back as a status instead of an exception."""
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return Response(r.status, r.read().decode("utf-8", "replace"))
    except urllib.error.HTTPError as err:
        body = err.read().decode("utf-8", "replace")
        err.close()
        return Response(err.code, body)


@dataclass
class Served:
    """The Bokeh document of one server session, with helpers to read what it shows."""

    models: list[Model]

    def html(self) -> str:
        """Every HTML pane's markup, joined (Panel sends it escaped once)."""
        return "\n".join(html.unescape(m.text) for m in self.models
                         if type(m).__name__ == "HTML" and isinstance(getattr(m, "text", None), str))

    def drawn(self) -> tuple[dict, dict]:
        """(spec, meta) of the browser-drawn component's payload, ({}, {}) when the page has none."""
        found = [m for m in self.models if {"spec", "meta", "sent"} <= set(m.properties())]
        if not found:
            return {}, {}
        return json.loads(found[0].spec), (json.loads(found[0].meta) if found[0].meta else {})

    def text(self) -> str:
        """The HTML panes' visible text, tags stripped and entities decoded, then the words the drawing component
        writes (its stage labels, announcement, note and error)."""
        _, meta = self.drawn()
        words = [*(row[1] for row in meta.get("rows", [])), meta.get("announce", ""), meta.get("note", ""),
                 meta.get("error", "")]
        return html.unescape(re.sub(r"<[^>]+>", " ", self.html())) + "\n" + "\n".join(words)

    def widget(self, label: str) -> Model | SimpleNamespace:
        """The one widget model whose title (or checkbox label) is `label`, or the control the drawing component
        draws with this label: its value (`active` for a checkbox) and `disabled` as the payload gives them."""
        spec, meta = self.drawn()
        drawn = [c for c in spec.get("controls", []) if c["label"] == label]
        found = [m for m in self.models
                 if getattr(m, "title", None) == label or (type(m).__name__ == "Checkbox" and m.label == label)]
        if drawn and not found:
            value = meta["controls"].get(drawn[0]["name"])
            return SimpleNamespace(value=value, active=value, disabled=meta["locked"])
        assert len(found) == 1, f"expected one widget labelled {label!r}, found {len(found)}"
        return found[0]

    def widgets(self) -> list[Model]:
        return [m for m in self.models if hasattr(m, "disabled") and type(m).__module__.startswith(
            ("bokeh.models.widgets", "panel.models.widgets"))]


@contextmanager
def session(server, path: str, **arguments: str) -> Iterator[Served]:
    """Open a session on `path` with these query arguments, as a browser would, and read its document."""
    url = server.url(path) + (("&" if "?" in path else "?") + urlencode(arguments) if arguments else "")
    document = Document.from_json(pull_document(url)["doc"])  # signed sessions: the page's own token
    yield Served(list(document.models))


# --- plain HTTP ---------------------------------------------------------------------------------

def test_health_answers_ok(server) -> None:
    """/health answers 200 "ok" for load balancers and start-up checks."""
    r = get(server.url("/health"))
    assert r.status == 200
    assert r.body.strip() == "ok"


@pytest.mark.parametrize("path", [
    "/",
    TRACE_ROUTE,
    TRACE_ROUTE + "?input=2%3B2%3B2%3B2&attention_scale=0.5&residual=replace&norm=layernorm&predict=off",
    TRACE_ROUTE + "?predict=off&predict_sig=0123456789abcdef0123456789abcdef",
    TRACE_ROUTE + "?attention_scale=banana&residual=oops&input=%3Cimg%20src%3Dx%3E",
    TRACE_ROUTE + "?embed=1",
])
def test_pages_answer_200(server, path: str) -> None:
    """The index and the explorable (with or without query state, valid or not) are served."""
    assert get(server.url(path)).status == 200


@pytest.mark.parametrize("path", ["/no-such-page", "/explorables/no-such-explorable", "/explorables"])
def test_unknown_routes_are_404(server, path: str) -> None:
    """A route nobody serves is a 404, not an empty page or a server error."""
    assert get(server.url(path)).status == 404


def test_pages_load_nothing_from_outside_the_server(server) -> None:
    """The first HTML of each page references no script, stylesheet or font on another host."""
    for path in ("/", TRACE_ROUTE):
        body = get(server.url(path)).body
        outside = re.findall(r"""(?:src|href)=["']((?:https?:)?//[^"']+)""", body)
        outside = [u for u in outside if not u.startswith((server.base_url, "//127.0.0.1", "//localhost"))]
        assert outside == [], f"{path} loads {outside}"


# --- what each session shows ----------------------------------------------------------------------

def test_index_shows_each_explorable_with_its_objectives(server) -> None:
    """The index has a card per explorable: its title, a link to its route and its objectives."""
    assert explorable(TRACE_ID).title == TITLE
    with session(server, "/") as page:
        markup, text = page.html(), page.text()
    for entry in EXPLORABLES:
        assert entry.title in text
        assert f'href="{entry.route}"' in markup
        assert entry.objectives, f"{entry.id} lists no objectives"
        for objective in entry.objectives:
            assert objective in text


def test_explorable_page_shows_title_and_says_attention_is_precomputed(server) -> None:
    """The explorable's page has its title and tells the student the attention result is already computed."""
    with session(server, TRACE_ROUTE) as page:
        text = page.text()
    assert TITLE in text
    assert "already computed" in text


def test_url_state_is_restored(server) -> None:
    """Opening a link with input, attention_scale, residual and norm restores each control and the trace."""
    query = {"input": "2;2;2;2", "attention_scale": "0.5", "residual": "replace", "norm": "layernorm",
             **server.predict_off(TRACE_ROUTE)}
    with session(server, TRACE_ROUTE, **query) as page:
        assert page.widget("Input vector").value == "2;2;2;2"
        assert page.widget("Attention update scale").value == 0.5
        assert page.widget("Replace instead of add residuals (broken)").active is True
        text = page.text()
    assert "LayerNorm 1" in text  # the stage labels follow the norm
    assert "replaced it (broken)" in text  # and the residual mode
    assert "could not be used" not in text


def test_invalid_url_values_fall_back_with_a_notice(server) -> None:
    """A link with unusable values shows the defaults and a visible notice per refused key."""
    query = {"attention_scale": "banana", "residual": "oops", "norm": "batchnorm", **server.predict_off(TRACE_ROUTE)}
    with session(server, TRACE_ROUTE, **query) as page:
        assert page.widget("Attention update scale").value == 1.0
        assert page.widget("Replace instead of add residuals (broken)").active is False
        text = page.text()
    assert "RMSNorm 1" in text
    for key in ("attention_scale", "residual", "norm"):
        assert re.search(rf"{key}\W+could not be used", text), f"no notice names {key}"
    assert text.count("could not be used") == 3


def test_prediction_gate_locks_controls_unless_predict_off(server) -> None:
    """Controls arrive disabled until a prediction is committed; the teacher's predict=off link serves them enabled."""
    labels = ("Attention update scale", "Replace instead of add residuals (broken)", "Input vector", "Normalisation")
    with session(server, TRACE_ROUTE) as page:
        assert all(page.widget(label).disabled for label in labels)
    with session(server, TRACE_ROUTE, **server.predict_off(TRACE_ROUTE)) as page:
        assert not any(page.widget(label).disabled for label in labels)


def test_embed_shows_the_explorable_alone(server) -> None:
    """?embed=1 drops the site header but keeps the explorable's controls."""
    with session(server, TRACE_ROUTE) as page:
        assert 'class="bt-header"' in page.html()
    with session(server, TRACE_ROUTE, embed="1", **server.predict_off(TRACE_ROUTE)) as page:
        assert 'class="bt-header"' not in page.html()
        assert page.widget("Attention update scale") is not None


def test_typed_html_in_the_link_is_never_markup(server) -> None:
    """A vector in the link that contains HTML is refused with a notice that shows it as text."""
    with session(server, TRACE_ROUTE, input="<img src=x onerror=alert(1)>", **server.predict_off(TRACE_ROUTE)) as page:
        markup = page.html()
    assert "<img" not in markup
    assert "&lt;img" in markup


def test_server_logged_no_traceback(server) -> None:
    """After every request above (bad values included), the server's output has no traceback."""
    get(server.url(TRACE_ROUTE + "?input=1%2C%20abc&attention_scale=nan"))
    with session(server, TRACE_ROUTE, input="1, abc", attention_scale="nan"):
        pass
    assert get(server.url("/health")).status == 200
    log = server.log()
    assert "Traceback" not in log
    assert " ERROR " not in log


def test_starting_the_server_registers_no_learner(tmp_path) -> None:
    """Panel's start-up warm-up builds every page once with no browser behind it; none of them may
    join the class (each had registered a learner the teacher would see, at every start)."""
    from blocktrace.app.classroom.identity import DEFAULT_CLASS
    from blocktrace.app.classroom.store import EventStore, default_url
    from tests.conftest import start_server, stop_server

    fresh = start_server(tmp_path / "server.log")  # returns once /health answers: the warm-up is over
    try:
        with EventStore(default_url(tmp_path / "data")) as store:
            assert store.summary(DEFAULT_CLASS, "transformer-block")["joined"] == 0
            store.join(DEFAULT_CLASS, "a" * 32, None)  # and the count does see a learner who joins
            assert store.summary(DEFAULT_CLASS, "transformer-block")["joined"] == 1
    finally:
        stop_server(fresh)
