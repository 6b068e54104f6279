"""PyLTI1p3 for Tornado: its abstract request, cookie, redirect, session, login and launch classes made
concrete for a Tornado RequestHandler, as its Flask and Django adapters (pylti1p3.contrib) do.

Where the specification asks for more than PyLTI1p3 checks by itself, the launch class asks PyJWT for it, by
overriding the public steps PyLTI1p3 chains in `MessageLaunch.validate`:

- the id_token's signature, `iss`, `aud` (one of them our client id), `exp` and `iat` (LEEWAY_S of clock skew),
  all required (PyJWT's decode; PyLTI1p3 alone skips the audience and allows no leeway);
- `azp`, when present or when there are several audiences, must be our client id;
- the nonce is used once (SingleUseNonces; PyLTI1p3 alone only looks it up);
- the platform's JWKS is cached per process and fetched again once when a token names a key id it lacks
  (a platform that rotated its key);
- the state may be proven without a cookie, through the platform's storage (LTI's client-side postMessages,
  which PyLTI1p3 does not speak): the login kept a random value in the platform's storage, in the browser,
  and in the class database under the state (PyLTI1p3's `pass_params_to_launch`); the launch's page reads it
  back from the platform's storage and posts it with the id_token (`lti_storage_value`). Another browser, or a
  page that did not come from this login, cannot read it.
"""

from __future__ import annotations

import hmac
import threading
import time
from html import escape
from typing import Any

import jwt
from pylti1p3.cookie import CookieService
from pylti1p3.exception import LtiException
from pylti1p3.message_launch import MessageLaunch
from pylti1p3.oidc_login import OIDCLogin
from pylti1p3.redirect import Redirect
from pylti1p3.request import Request
from pylti1p3.session import SessionService
from tornado.web import RequestHandler

from blocktrace.app.lti.launch_store import StoreLaunchData

__all__ = ["LEEWAY_S", "STORAGE_VALUE", "KeySets", "NeedsPlatformStorage", "SingleUseNonces", "TornadoCookies",
           "TornadoLaunch", "TornadoLogin", "TornadoRedirect", "TornadoRequest"]

LEEWAY_S = 60  # clock skew allowed on exp and iat
STORAGE_VALUE = "lti_storage_value"  # the launch's own proof of its state, read from the platform's storage


class NeedsPlatformStorage(LtiException):
    """No state cookie came with the launch, but its login kept a value in the platform's storage: the browser
    must read it back from there (`target` frame, at `origin`) and post the launch again with it."""

    def __init__(self, target: str, origin: str, key: str) -> None:
        super().__init__("the state must be read from the platform's storage")
        self.target, self.origin, self.key = target, origin, key
KEY_SET_SECONDS = 3600  # how long a platform's JWKS is trusted before it is fetched again


class TornadoRequest(Request):
    def __init__(self, handler: RequestHandler) -> None:
        self.handler = handler

    @property
    def session(self) -> None:
        return None

    def is_secure(self) -> bool:
        return self.handler.request.protocol == "https"

    def get_param(self, key: str) -> str:
        return self.handler.get_argument(key, "")


class TornadoCookies(CookieService):
    """The login's state cookie: HttpOnly, for /lti/ only; SameSite=None and Secure over https, so that the
    LMS's cross-site POST of the launch carries it back (a browser may still drop it in a frame)."""

    def __init__(self, handler: RequestHandler) -> None:
        self.handler = handler

    def _name(self, name: str) -> str:
        return f"{self._cookie_prefix}-{name}"

    def get_cookie(self, name: str) -> str | None:
        return self.handler.get_cookie(self._name(name))

    def set_cookie(self, name: str, value: str | int, exp: int | None = 3600) -> None:
        secure = self.handler.request.protocol == "https"
        self.handler.set_cookie(self._name(name), str(value), path="/lti/", httponly=True, secure=secure,
                                samesite="None" if secure else "Lax", **({"max_age": exp} if exp else {}))


class TornadoRedirect(Redirect[None]):
    def __init__(self, location: str, handler: RequestHandler) -> None:
        self.location, self.handler = location, handler

    def do_redirect(self) -> None:
        self.handler.redirect(self.location)

    def do_js_redirect(self) -> None:
        self.handler.finish(f'<!doctype html><meta charset="utf-8"><title>Opening blocktrace</title>'
                            f'<a href="{escape(self.location)}">Continue to your LMS</a>')

    def set_redirect_url(self, location: str) -> None:
        self.location = location

    def get_redirect_url(self) -> str:
        return self.location


class SingleUseNonces(SessionService):
    """PyLTI1p3's session service over the class database, a nonce taken (removed) when it is checked."""

    def __init__(self, request: Request, storage: StoreLaunchData) -> None:
        super().__init__(request)
        self.set_data_storage(storage)
        self.storage = storage

    def check_nonce(self, nonce: str) -> bool:
        return self.storage.take(self._get_key("nonce", nonce))


class TornadoLogin(OIDCLogin):
    def __init__(self, handler: RequestHandler, tool_config, storage: StoreLaunchData) -> None:
        request = TornadoRequest(handler)
        super().__init__(request, tool_config, SingleUseNonces(request, storage), TornadoCookies(handler), storage)
        self.handler = handler

    def get_redirect(self, url: str) -> TornadoRedirect:
        return TornadoRedirect(url, self.handler)

    def get_response(self, html: str) -> None:
        self.handler.finish(html)


class KeySets:
    """Platforms' JWKS by URL, kept KEY_SET_SECONDS; thread-safe (launches are validated on worker threads)."""

    def __init__(self) -> None:
        self._sets: dict[str, tuple[float, Any]] = {}
        self._lock = threading.Lock()

    def get(self, url: str) -> Any | None:
        with self._lock:
            kept = self._sets.get(url)
        return kept[1] if kept and time.monotonic() - kept[0] < KEY_SET_SECONDS else None

    def put(self, url: str, key_set: Any) -> None:
        with self._lock:
            self._sets[url] = (time.monotonic(), key_set)

    def drop(self, url: str) -> None:
        with self._lock:
            self._sets.pop(url, None)


class TornadoLaunch(MessageLaunch):
    def __init__(self, handler: RequestHandler, tool_config, storage: StoreLaunchData, key_sets: KeySets,
                 requests_session=None) -> None:
        request = TornadoRequest(handler)
        super().__init__(request, tool_config, SingleUseNonces(request, storage), TornadoCookies(handler), storage,
                         requests_session)
        self.key_sets = key_sets
        self._fetched = False  # this launch fetched the JWKS itself (not from key_sets)

    def _get_request_param(self, key: str) -> str:
        return self._request.get_param(key)

    def fetch_public_key(self, key_set_url: str):
        kept = self.key_sets.get(key_set_url)
        if kept is not None:
            return kept
        key_set = super().fetch_public_key(key_set_url)
        if not isinstance(key_set, dict) or not isinstance(key_set.get("keys"), list):
            raise LtiException(f"the platform's key set at {key_set_url} is not a JWKS")
        self._fetched = True
        self.key_sets.put(key_set_url, key_set)
        return key_set

    def get_public_key(self) -> tuple[str, str]:
        try:
            return super().get_public_key()
        except LtiException:
            if self._fetched:
                raise
            url = self._registration.get_key_set_url()  # a key id we did not have: the platform may have rotated
            self.key_sets.drop(url)
            self._registration.set_key_set(None)
            return super().get_public_key()

    def validate_state(self) -> TornadoLaunch:
        try:
            return super().validate_state()  # the state cookie
        except LtiException:
            state = self._get_request_param("state")
            kept = self._session_service.get_state_params(state) if state else None
            if not isinstance(kept, dict) or not kept.get("storage_value"):
                raise
            offered = self._get_request_param(STORAGE_VALUE)
            if not offered:
                raise NeedsPlatformStorage(kept["storage_target"], kept["storage_origin"], f"state_{state}") from None
            if not hmac.compare_digest(offered.encode(), str(kept["storage_value"]).encode()):
                raise LtiException("State not found: the platform's storage held another value") from None
            return self

    def validate_registration(self) -> TornadoLaunch:
        super().validate_registration()
        body = self._get_jwt_body()
        audiences = body.get("aud") if isinstance(body.get("aud"), list) else [body.get("aud")]
        client_id = self._registration.get_client_id()
        if client_id not in audiences:
            raise LtiException("the id_token is not meant for this tool (aud)")
        if ("azp" in body or len(audiences) > 1) and body.get("azp") != client_id:
            raise LtiException("the id_token was issued to another party (azp)")
        return self

    def validate_jwt_signature(self) -> TornadoLaunch:
        public_key, algorithm = self.get_public_key()
        try:
            jwt.decode(self._get_id_token(), public_key, algorithms=[algorithm],
                       audience=self._registration.get_client_id(), issuer=self._registration.get_issuer(),
                       leeway=LEEWAY_S, options={"require": ["exp", "iat", "iss", "aud", "nonce"]})
        except jwt.InvalidTokenError as error:
            raise LtiException(f"the id_token does not check out: {error}") from error
        return self
