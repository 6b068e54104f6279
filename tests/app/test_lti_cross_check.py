"""Our launch against an independent LTI 1.3 platform implementation from the package registry (lti1p3platform):
its OIDC login initiation, its checks of our authorisation request, and the id_token it signs with its own key."""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest
import requests
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from lti1p3platform.ltiplatform import LTI1P3PlatformConfAbstract
from lti1p3platform.message_launch import MessageLaunchAbstract
from lti1p3platform.oidc_login import OIDCLoginAbstract
from lti1p3platform.registration import Registration

from blocktrace.app.lti import who
from tests.conftest import Server, module_server
from tests.lti_platform import lti_command, serving_json

ISSUER = "https://lms.cross-check.example"
CLIENT, DEPLOYMENT = "cross-check-client", "cross-check-deployment"
PAGE = "/explorables/block-floor"


class Platform(LTI1P3PlatformConfAbstract):
    def init_platform_config(self, **kwargs: Any) -> None:
        self.registration = kwargs["registration"]

    def get_registration_by_params(self, **kwargs: Any) -> Registration:
        return self.registration


class Login(OIDCLoginAbstract):
    def set_lti_message_hint(self, **kwargs: Any) -> None:
        self._lti_message_hint = kwargs["hint"]

    def get_redirect(self, url: str) -> str:
        return url


class Launch(MessageLaunchAbstract):
    def render_launch_form(self, launch_data: dict, **kwargs: Any) -> dict:
        return launch_data


@pytest.fixture(scope="module")
def lti_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    yield from module_server(tmp_path_factory, "lti-cross-check")


@pytest.fixture(scope="module")
def platform(lti_server: Server) -> Iterator[Platform]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()).decode()
    public = key.public_key().public_bytes(serialization.Encoding.PEM,
                                           serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    registration = (Registration().set_iss(ISSUER).set_client_id(CLIENT).set_deployment_id(DEPLOYMENT)
                    .set_oidc_login_url(lti_server.url("/lti/login")).set_launch_url(lti_server.url(PAGE))
                    .set_platform_public_key(public).set_platform_private_key(private)
                    .set_tool_key_set_url(lti_server.url("/lti/jwks.json")))
    config = Platform(registration=registration)

    with serving_json(config.get_jwks) as base:  # the platform's JWKS, as lti1p3platform publishes it
        lti_command(lti_server.data_dir, "add-platform", "--issuer", ISSUER, "--client-id", CLIENT,
                    "--deployment-id", DEPLOYMENT,
                    "--auth-login-url", base + "/auth", "--auth-token-url", base + "/token",
                    "--jwks-url", base + "/jwks")
        yield config


def test_an_independent_platforms_launch_opens_the_page(lti_server: Server, platform: Platform) -> None:
    login = Login(None, platform)
    login.set_lti_message_hint(hint="resource-link-7")
    browser = requests.Session()
    start = login.prepare_preflight_url("learner-42")
    answer = browser.get(start + "&lti1p3_new_window=1", allow_redirects=False)  # as after the cookie check
    assert answer.status_code == 302
    preflight = dict(parse_qsl(urlsplit(answer.headers["Location"]).query))
    launch = Launch(SimpleNamespace(get_data=preflight, form_data={}), platform)  # it checks our request
    launch.set_user_data("learner-42", ["http://purl.imsglobal.org/vocab/lis/v2/membership#Learner"])
    launch.set_resource_link_claim("resource-link-7")
    launch.set_launch_context_claim("course-cc")
    form = launch.lti_launch()
    assert form["launch_url"] == lti_server.url("/lti/launch")
    opened = browser.post(form["launch_url"], data={"id_token": form["id_token"], "state": form["state"]},
                          allow_redirects=False)
    assert opened.status_code == 303, opened.text
    location = opened.headers["Location"]
    assert urlsplit(location).path == PAGE
    launched = who.read_token(lti_server.secret(), dict(parse_qsl(urlsplit(location).query))["lti"])
    assert launched.learner_id == who.learner_for(lti_server.secret(), ISSUER, "learner-42")
    assert requests.get(lti_server.url(location)).status_code == 200
    replayed = browser.post(form["launch_url"], data={"id_token": form["id_token"], "state": form["state"]},
                            allow_redirects=False)
    assert replayed.status_code == 403
