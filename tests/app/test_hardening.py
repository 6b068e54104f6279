"""Headers every response carries, the cap on one browser message, and a private data folder
(app/server/hardening.py): each holds on the served app, whatever a client sends."""

from __future__ import annotations

import asyncio
import stat
import urllib.request
from collections.abc import Iterator

import pytest

from blocktrace.app.server.hardening import MAX_MESSAGE_BYTES, frame_ancestors, private_data_dir
from tests.app.bokeh_ws_client import READ_TIMEOUT_S, Session
from tests.conftest import Server, start_server, stop_server

TRACE = "/explorables/transformer-block-trace"
COURSE = "coursepage.example:8000"


def headers_of(url: str) -> dict[str, str]:
    with urllib.request.urlopen(url, timeout=60) as response:
        response.read()
        return {k.lower(): v for k, v in response.headers.items()}


@pytest.fixture(scope="module")
def course_server(tmp_path_factory) -> Iterator[Server]:
    """A server that lets one course page embed it."""
    running = start_server(tmp_path_factory.mktemp("course") / "server.log", "--allow-websocket-origin", COURSE)
    yield running
    stop_server(running)


def test_the_framing_policy_names_this_server_and_each_allowed_origin_only() -> None:
    """Allowed host[:port] origins become sources; anything that could add a directive is dropped."""
    policy = frame_ancestors([COURSE, "evil.example; script-src *", "", COURSE])
    assert policy == f"frame-ancestors 'self' http://{COURSE} https://{COURSE}"


@pytest.mark.parametrize("path", ["/", TRACE, "/lessons/transformer-block", "/health",
                                  "/static/extensions/panel/css/button.css"])
def test_every_response_carries_nosniff_and_the_framing_policy(course_server, path: str) -> None:
    """Pages, lessons, /health and static files: nosniff, and framing only by this server and the course page."""
    headers = headers_of(course_server.url(path))
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["content-security-policy"] == f"frame-ancestors 'self' http://{COURSE} https://{COURSE}"


def test_without_allowed_origins_only_this_server_may_frame_a_page(server) -> None:
    """The default server lets no other site frame its pages."""
    assert headers_of(server.url(TRACE))["content-security-policy"] == "frame-ancestors 'self'"


async def oversized_then_normal(ws_url: str) -> tuple[bool, bool]:
    """Send one message over the cap on one session; is that socket closed, and does another still answer?"""
    big = await Session.open(ws_url)
    button = big.find("Button", label="Commit prediction")
    await big.set(button["id"], "label", "x" * (MAX_MESSAGE_BYTES + 1))
    closed = False
    try:
        while True:
            if await asyncio.wait_for(big.ws.read_message(), READ_TIMEOUT_S) is None:
                closed = True
                break
    except TimeoutError:
        closed = False
    finally:
        big.close()  # our end too, so no open client socket is left for the collector
    other = await Session.open(ws_url)
    try:
        answered = bool(other.find("Button", label="Commit prediction"))
    finally:
        await other.close_and_wait()
    return closed, answered


def test_a_message_over_the_cap_closes_its_socket_and_others_go_on(server) -> None:
    """A websocket message larger than MAX_MESSAGE_BYTES ends that connection unparsed; other sessions answer."""
    ws_url = server.url(TRACE + "/ws").replace("http://", "ws://")  # the gate's button is there
    closed, answered = asyncio.run(oversized_then_normal(ws_url))
    assert closed and answered
    assert "Traceback" not in server.log()


def modes(folder) -> dict[str, int]:
    found = {".": stat.S_IMODE(folder.stat().st_mode)}
    found.update({str(p.relative_to(folder)): stat.S_IMODE(p.stat().st_mode) for p in folder.rglob("*")})
    return found


def test_the_served_data_folder_and_its_files_are_private(server) -> None:
    """The data folder is 0700 and every file the server wrote there (secret, database) is 0600."""
    folder = server.log_path.parent / "data"
    found = modes(folder)
    assert any(name.endswith(".db") for name in found) and len(found) >= 3, found
    assert {name: mode for name, mode in found.items()
            if mode != (0o700 if (folder / name).is_dir() else 0o600)} == {}


def test_an_older_looser_data_folder_is_tightened(tmp_path) -> None:
    """A folder left 0755 with a 0644 database (as older versions made them) is made private on start."""
    folder = tmp_path / "data"
    folder.mkdir(mode=0o755)
    (folder / "blocktrace.db").write_text("")
    (folder / "blocktrace.db").chmod(0o644)
    folder.chmod(0o755)
    private_data_dir(folder)
    assert modes(folder) == {".": 0o700, "blocktrace.db": 0o600}


def test_a_data_folder_on_a_read_only_volume_still_serves(tmp_path, monkeypatch, caplog) -> None:
    """chmod failing (EROFS) is a warning: the server starts and the store says when it cannot write."""
    import errno

    folder = tmp_path / "data"
    folder.mkdir(mode=0o755)

    def read_only(*_args, **_kwargs):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr("blocktrace.app.server.hardening.os.chmod", read_only)
    with caplog.at_level("WARNING", logger="blocktrace.app.server.hardening"):
        assert private_data_dir(folder) == folder
    assert "could not make the data folder private" in caplog.text and "Read-only" in caplog.text
