"""A small LMS for the tests: its own RSA keys, its JWKS served over HTTP, and the id_tokens it signs.

It is a platform in the sense of LTI 1.3 and nothing more: it answers the tool's OIDC authorisation request
by posting an id_token back to the tool (an auto-submitting form, as a real LMS does in the browser), and it
makes launches the tests can change claim by claim to try each attack. It uses PyJWT and `cryptography`
directly, not blocktrace's code, so what it signs is checked by the tool as a stranger's token would be.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from html import escape
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

ROOT = Path(__file__).resolve().parents[1]
CLAIM = "https://purl.imsglobal.org/spec/lti/claim/"
LIS = "http://purl.imsglobal.org/vocab/lis/v2/"
LEARNER = LIS + "membership#Learner"
INSTRUCTOR = LIS + "membership#Instructor"


class SigningKey:
    def __init__(self, kid: str | None = None) -> None:
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.kid = kid or uuid.uuid4().hex[:16]

    def pem(self) -> bytes:
        return self.key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption())

    def jwk(self) -> dict:
        return {**json.loads(RSAAlgorithm.to_jwk(self.key.public_key())), "kid": self.kid, "alg": "RS256",
                "use": "sig"}


class TestPlatform:
    """Start with `with TestPlatform() as lms:`; its issuer is its own http://127.0.0.1:PORT address."""

    __test__ = False  # not a test class

    def __init__(self, client_id: str = "blocktrace-client", deployment_id: str = "deployment-1") -> None:
        self.client_id, self.deployment_id = client_id, deployment_id
        self.keys = [SigningKey()]  # published in the JWKS; the first signs
        self.jwks_fetches = 0
        self.auth_requests: list[dict[str, str]] = []
        self.next_launch: dict[str, Any] = {}  # claims the next browser launch is made with
        self.members: list[dict[str, Any]] = []  # the course's roster (Names and Role Provisioning Services)
        self.tokens: dict[str, str] = {}  # access token -> the scopes it was granted
        self.token_requests = 0
        self.line_items: list[dict[str, Any]] = []  # the course's gradebook columns
        self.scores: list[tuple[str, dict[str, Any]]] = []  # (line item id, score) as posted
        self.down = False  # the gradebook answers 503 (an LMS outage)
        platform = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                if parts.path == "/jwks.json":
                    platform.jwks_fetches += 1
                    self._send(200, "application/json", json.dumps({"keys": [k.jwk() for k in platform.keys]}))
                elif parts.path == "/auth":
                    query = dict(parse_qsl(parts.query))
                    platform.auth_requests.append(query)
                    self._send(200, "text/html", platform.form_post(query))
                elif parts.path == "/course":
                    self._send(200, "text/html", platform.course_page(dict(parse_qsl(parts.query))))
                elif parts.path == "/lineitems":
                    status, body = platform.lineitems_list(self.headers.get("Authorization", ""))
                    self._send(status, "application/vnd.ims.lis.v2.lineitemcontainer+json", json.dumps(body))
                elif parts.path == "/memberships":
                    status, body = platform.memberships(self.headers.get("Authorization", ""),
                                                        self.headers.get("Accept", ""))
                    self._send(status, "application/vnd.ims.lti-nrps.v2.membershipcontainer+json", json.dumps(body))
                else:
                    self._send(404, "text/plain", "not found")

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                text = self.rfile.read(length).decode("utf-8")
                path = urlsplit(self.path).path
                if path == "/token":
                    status, body = platform.token(dict(parse_qsl(text)))
                    self._send(status, "application/json", json.dumps(body))
                elif path.startswith("/lineitems"):
                    status, body = platform.ags_post(path, self.headers.get("Authorization", ""), text)
                    self._send(status, "application/json", json.dumps(body))
                else:
                    self._send(404, "text/plain", "not found")

            def _send(self, status: int, kind: str, text: str) -> None:
                body = text.encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", f"{kind}; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.issuer = self.url
        self.tool_url = ""  # set by the test: the tool's base URL, for the course page

    def __enter__(self) -> TestPlatform:
        threading.Thread(target=self.httpd.serve_forever, daemon=True, name="test-lms").start()
        return self

    def __exit__(self, *_exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    # --- what the tool is told -------------------------------------------------------------------

    def registration_args(self) -> list[str]:
        """`blocktrace lti add-platform`'s arguments for this platform."""
        return ["--issuer", self.issuer, "--client-id", self.client_id, "--deployment-id", self.deployment_id,
                "--auth-login-url", self.url + "/auth", "--auth-token-url", self.url + "/token",
                "--jwks-url", self.url + "/jwks.json"]

    def login_params(self, target: str) -> dict[str, str]:
        """The third-party-initiated login the platform sends the tool's login URL."""
        return {"iss": self.issuer, "login_hint": "hint-" + uuid.uuid4().hex[:8], "target_link_uri": target,
                "client_id": self.client_id, "lti_deployment_id": self.deployment_id}

    # --- services: OAuth2 client credentials, then the roster --------------------------------------

    def token(self, form: dict[str, str]) -> tuple[int, dict]:
        """The token endpoint: the tool proves itself with a JWT signed by a key from its own JWKS (fetched over
        HTTP from the tool, as an LMS does), issued and subject its client id, audience this endpoint."""
        self.token_requests += 1
        if form.get("grant_type") != "client_credentials" or form.get("client_assertion_type") != \
                "urn:ietf:params:oauth:client-assertion-type:jwt-bearer":
            return 400, {"error": "unsupported_grant_type"}
        assertion = form.get("client_assertion", "")
        try:
            key = jwt.PyJWKClient(self.tool_url + "/lti/jwks.json").get_signing_key_from_jwt(assertion).key
            claims = jwt.decode(assertion, key, algorithms=["RS256"], audience=self.url + "/token")
        except jwt.PyJWTError as error:
            return 401, {"error": "invalid_client", "error_description": str(error)}
        if claims.get("iss") != self.client_id or claims.get("sub") != self.client_id:
            return 401, {"error": "invalid_client"}
        access = uuid.uuid4().hex
        self.tokens[access] = form.get("scope", "")
        return 200, {"access_token": access, "token_type": "Bearer", "expires_in": 3600, "scope": self.tokens[access]}

    def _granted(self, authorization: str, scope: str) -> bool:
        return scope in self.tokens.get(authorization.removeprefix("Bearer "), "").split()

    def lineitems_list(self, authorization: str) -> tuple[int, Any]:
        if self.down:
            return 503, {"error": "the gradebook is down"}
        if not self._granted(authorization, "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem"):
            return 401, {"error": "no line item scope"}
        return 200, self.line_items

    def ags_post(self, path: str, authorization: str, raw: str) -> tuple[int, Any]:
        """POST /lineitems makes a column; POST /lineitems/N/scores records a score in it."""
        if self.down:
            return 503, {"error": "the gradebook is down"}
        body = json.loads(raw or "{}")
        if path == "/lineitems":
            if not self._granted(authorization, "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem"):
                return 401, {"error": "no line item scope"}
            item = {**body, "id": f"{self.url}/lineitems/{len(self.line_items) + 1}"}
            self.line_items.append(item)
            return 201, item
        if path.endswith("/scores"):
            if not self._granted(authorization, "https://purl.imsglobal.org/spec/lti-ags/scope/score"):
                return 401, {"error": "no score scope"}
            item_id = self.url + path.removesuffix("/scores")
            if all(item["id"] != item_id for item in self.line_items):
                return 404, {"error": "no such line item"}
            self.scores.append((item_id, body))
            return 200, {}
        return 404, {"error": "not found"}

    def memberships(self, authorization: str, accept: str) -> tuple[int, dict]:
        scopes = self.tokens.get(authorization.removeprefix("Bearer "), "")
        if "contextmembership.readonly" not in scopes:
            return 401, {"error": "a token with the roster's scope is needed"}
        return 200, {"id": self.url + "/memberships", "context": {"id": "course-101"}, "members": self.members}

    # --- launches -----------------------------------------------------------------------------

    def claims(self, nonce: str, target: str, sub: str = "student-1", roles: tuple[str, ...] = (LEARNER,),
               context: str = "course-101", now: float | None = None) -> dict[str, Any]:
        now = time.time() if now is None else now
        return {
            "iss": self.issuer, "aud": self.client_id, "sub": sub, "nonce": nonce,
            "iat": int(now), "exp": int(now) + 300,
            CLAIM + "message_type": "LtiResourceLinkRequest", CLAIM + "version": "1.3.0",
            CLAIM + "deployment_id": self.deployment_id, CLAIM + "target_link_uri": target,
            CLAIM + "resource_link": {"id": "link-1", "title": "blocktrace"},
            CLAIM + "roles": list(roles),
            CLAIM + "context": {"id": context, "label": "CS 101", "title": "Language models"},
            "name": "Ada Lovelace", "email": "ada@example.edu",
        }

    def sign(self, claims: dict[str, Any], key: SigningKey | None = None) -> str:
        key = key or self.keys[0]
        return jwt.encode(claims, key.pem(), algorithm="RS256", headers={"kid": key.kid})

    def form_post(self, auth: dict[str, str]) -> str:
        """The platform's answer to the tool's authorisation request: a form that posts the id_token."""
        claims = {**self.claims(auth.get("nonce", ""), self.next_launch.get("target", "")),
                  **{k: v for k, v in self.next_launch.items() if k != "target"}}
        fields = {"id_token": self.sign(claims), "state": auth.get("state", "")}
        inputs = "".join(f'<input type="hidden" name="{escape(k)}" value="{escape(v)}">' for k, v in fields.items())
        return (f'<!doctype html><form method="post" action="{escape(auth.get("redirect_uri", ""))}">{inputs}'
                "</form><script>document.forms[0].submit()</script>")

    def course_page(self, query: dict[str, str]) -> str:
        """The LMS's course page, which frames the tool's login as an LMS opens a tool in an iframe. With
        `storage=1` it offers its platform storage (LTI's client-side postMessages): it keeps what a tool's
        frame puts, per the tool's origin, and gives it back to the same origin only."""
        from urllib.parse import urlencode

        params = self.login_params(query.get("target", ""))
        if query.get("storage") == "1":
            params["lti_storage_target"] = "_parent"
        login = self.tool_url + "/lti/login?" + urlencode(params)
        storage = """<script>
        var kept = {};
        window.addEventListener("message", function (event) {
          var m = event.data;
          if (!m || typeof m !== "object" || typeof m.subject !== "string") { return; }
          var reply = {subject: m.subject + ".response", message_id: m.message_id, key: m.key};
          var slot = event.origin + " " + m.key;
          if (m.subject === "lti.put_data") { kept[slot] = m.value; reply.value = m.value; }
          else if (m.subject === "lti.get_data") {
            if (slot in kept) { reply.value = kept[slot]; } else { reply.error = {code: "bad_request"}; }
          } else { return; }
          event.source.postMessage(reply, event.origin);
        });
        </script>""" if query.get("storage") == "1" else ""
        return (f'<!doctype html><title>Course</title>{storage}<h1>CS 101</h1><iframe title="blocktrace" '
                f'src="{escape(login)}" width="1200" height="850"></iframe>')


@contextmanager
def serving_json(make: Callable[[], Any]) -> Iterator[str]:
    """An HTTP server on a free loopback port answering every GET with `make()` as JSON (a key set): its URL."""

    class Answer(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def do_GET(self) -> None:
            body = json.dumps(make()).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    threading.Thread(target=httpd.serve_forever, daemon=True, name="test-json").start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def lti_command(data_dir: Path, *args: str) -> str:
    """`blocktrace lti ARGS` on a server's data dir, as its admin would run it: what it prints."""
    done = subprocess.run([sys.executable, "-m", "blocktrace.app.cli", "lti", "--data-dir", str(data_dir), *args],
                          cwd=ROOT, capture_output=True, text=True, check=True)
    return done.stdout


@contextmanager
def registered_platform(data_dir: Path, tool_url: str) -> Iterator[TestPlatform]:
    """A running test LMS, registered with the server whose data dir and address are given."""
    with TestPlatform() as platform:
        platform.tool_url = tool_url
        lti_command(data_dir, "add-platform", *platform.registration_args())
        yield platform
