"""The framed launch's other way on, in real Chromium: the LMS offers no platform storage and the tool's frame
keeps no cookies, so PyLTI1p3's check offers a new window; there, over https (HAProxy with a certificate, as a
school serves blocktrace), the state cookie comes back with the LMS's form post and the page opens."""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID
from playwright.sync_api import Browser, expect, sync_playwright

from tests.conftest import Server, free_port, start_server, stop_server
from tests.haproxy import start_haproxy, stop_process
from tests.lti_platform import TestPlatform, registered_platform
from tests.smoke import CHROMIUM, CHROMIUM_ARGS

pytestmark = pytest.mark.browser

PAGE = "/explorables/transformer-block-trace"
HTTPS_PORT = free_port()


def certificate(folder: Path) -> Path:
    """A self-signed certificate for localhost and its key, in one PEM file (as HAProxy takes them)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
            .sign(key, hashes.SHA256()))
    pem = folder / "localhost.pem"
    pem.write_bytes(cert.public_bytes(serialization.Encoding.PEM) + key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()))
    return pem


@pytest.fixture(scope="module")
def tool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, str]]:
    """blocktrace behind HAProxy over https: the server, and its address https://localhost:PORT."""
    folder = tmp_path_factory.mktemp("lti-https")
    server = start_server(folder / "server.log", "--data-dir", str(folder / "data"), "--use-xheaders",
                          "--allow-websocket-origin", f"localhost:{HTTPS_PORT}")
    haproxy = start_haproxy(HTTPS_PORT, {"app1": server.port, "app2": server.port}, folder / "haproxy.log",
                            tls_pem=certificate(folder))
    yield server, f"https://localhost:{HTTPS_PORT}"
    stop_process(haproxy)
    stop_server(server)
    assert "Traceback" not in server.log()


@pytest.fixture(scope="module")
def lms(tool: tuple[Server, str]) -> Iterator[TestPlatform]:
    server, url = tool
    with registered_platform(server.data_dir, url) as platform:
        yield platform


@pytest.fixture(scope="module")
def blocking_browser() -> Iterator[Browser]:
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                      args=[*CHROMIUM_ARGS, "--test-third-party-cookie-phaseout"])
        yield chromium
        chromium.close()


def test_without_platform_storage_the_launch_goes_on_in_a_new_window(
        tool: tuple[Server, str], lms: TestPlatform, blocking_browser: Browser) -> None:
    url = tool[1]
    target = f"{url}{PAGE}"
    lms.next_launch = {"target": target, "sub": "student-nw"}
    context = blocking_browser.new_context(viewport={"width": 1300, "height": 1000}, ignore_https_errors=True)
    page = context.new_page()
    page.goto(f"{lms.url}/course?{urlencode({'target': target})}")  # no lti_storage_target: no platform storage
    frame = page.frame_locator("iframe[title=blocktrace]")
    expect(frame.get_by_text("Your browser keeps no cookies for blocktrace inside your course's page.")) \
        .to_be_visible(timeout=60_000)
    with context.expect_page() as opening:
        frame.get_by_text("Open blocktrace in a new window.").click()
    window = opening.value
    expect(window.get_by_role("heading", name="Predict first")).to_be_visible(timeout=60_000)
    assert window.url.startswith(f"{url}{PAGE}?") and "lti=" in window.url
    context.close()
