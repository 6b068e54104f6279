"""The LMS platforms an admin registered, kept in the data dir, and PyLTI1p3's tool config made from them.

One platform is one (issuer, client id): the LMS's identity, the client id it gave blocktrace, the deployment
ids it launches with, and its three URLs (the OIDC authorisation endpoint, the OAuth2 token endpoint and its
public JWKS). A launch from an issuer, client or deployment not registered here is refused.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from urllib.parse import urlsplit

from pylti1p3.tool_config import ToolConfDict

from blocktrace.app.classroom.join import loopback
from blocktrace.app.lti.tool_keys import ToolKeys

__all__ = ["PLATFORMS_FILE", "FrameOrigins", "Platform", "Registrations", "add", "load", "remove", "tool_conf"]

PLATFORMS_FILE = "lti-platforms.json"
MAX_TEXT = 255


def check_url(name: str, url: str) -> str:
    """An https URL (http only on this machine, for trying a platform out); else ValueError saying why."""
    parts = urlsplit(url)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise ValueError(f"{name} must be a full https:// URL, got {url!r}")
    if parts.scheme == "http" and not loopback(parts.netloc):
        raise ValueError(f"{name} must use https (http only for localhost), got {url!r}")
    return url


def _check_text(name: str, text: str) -> str:
    if not isinstance(text, str) or not text.strip() or len(text) > MAX_TEXT or not text.isprintable():
        raise ValueError(f"{name} must be 1 to {MAX_TEXT} printable characters, got {text!r}")
    return text


@dataclass(frozen=True)
class Platform:
    """One registration of blocktrace in an LMS."""

    issuer: str  # the LMS's `iss`, e.g. https://canvas.instructure.com
    client_id: str  # what the LMS calls blocktrace: the `aud` of its launches
    deployment_ids: tuple[str, ...]  # the deployments it may launch with
    auth_login_url: str  # the LMS's OIDC authorisation endpoint
    auth_token_url: str  # the LMS's OAuth2 token endpoint (grades, roster)
    key_set_url: str  # the LMS's public JWKS
    lms_origins: tuple[str, ...] = ()  # where its course pages are, to frame ours (default: issuer and login URL)

    def __post_init__(self) -> None:
        _check_text("issuer", self.issuer)
        _check_text("client id", self.client_id)
        if not self.deployment_ids:
            raise ValueError("at least one deployment id is needed")
        for deployment in self.deployment_ids:
            _check_text("deployment id", deployment)
        for name in ("auth_login_url", "auth_token_url", "key_set_url"):
            check_url(name.replace("_", " "), getattr(self, name))
        for origin in self.lms_origins:
            check_url("LMS origin", origin)

    @property
    def frame_origins(self) -> tuple[str, ...]:
        """The origins (scheme://host[:port]) whose pages may frame ours: the LMS's course pages."""
        urls = self.lms_origins or (self.issuer, self.auth_login_url)
        return tuple(dict.fromkeys(_origin(url) for url in urls if _origin(url)))


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}" if parts.scheme in ("http", "https") and parts.netloc else ""


def _path(data_dir: Path) -> Path:
    return Path(data_dir) / PLATFORMS_FILE


def load(data_dir: Path) -> list[Platform]:
    """The registered platforms (none before the first `add`)."""
    path = _path(data_dir)
    if not path.exists():
        return []
    try:
        rows = json.loads(path.read_text(encoding="utf-8"))["platforms"]
        return [Platform(**{**row, "deployment_ids": tuple(row["deployment_ids"]),
                            "lms_origins": tuple(row.get("lms_origins", ()))}) for row in rows]
    except (ValueError, KeyError, TypeError) as error:
        raise ValueError(f"{path} does not hold blocktrace's LTI platforms: {error}") from error


def _save(data_dir: Path, platforms: list[Platform]) -> None:
    path = _path(data_dir)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    aside = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    rows = [asdict(p) for p in platforms]
    aside.write_text(json.dumps({"platforms": rows}, indent=1), encoding="utf-8")
    os.chmod(aside, 0o600)
    os.replace(aside, path)


def add(data_dir: Path, platform: Platform) -> bool:
    """Register `platform`, replacing the registration of the same issuer and client id; True if it was new."""
    kept = [p for p in load(data_dir) if (p.issuer, p.client_id) != (platform.issuer, platform.client_id)]
    new = len(kept) == len(load(data_dir))
    _save(data_dir, [*kept, platform])
    return new


def remove(data_dir: Path, issuer: str, client_id: str) -> bool:
    """Forget a registration; True if there was one."""
    platforms = load(data_dir)
    kept = [p for p in platforms if (p.issuer, p.client_id) != (issuer, client_id)]
    _save(data_dir, kept)
    return len(kept) != len(platforms)


class Registrations(ToolConfDict):
    """PyLTI1p3's dict config, answering None for an issuer or client it does not hold (as the abstract config
    promises, so the launch says "Registration not found"), where the dict config raises a bare Exception."""

    def _holds(self, iss: str, client_id: str | None) -> bool:
        clients = (self._config or {}).get(iss) or []
        return any(not client_id or c["client_id"] == client_id for c in clients)

    def find_registration_by_issuer(self, iss: str, *args, **kwargs):
        return super().find_registration_by_issuer(iss, *args, **kwargs) if self._holds(iss, None) else None

    def find_deployment(self, iss: str, deployment_id: str):
        return super().find_deployment(iss, deployment_id) if self._holds(iss, None) else None

    def find_registration_by_params(self, iss: str, client_id: str, *args, **kwargs):
        return super().find_registration_by_params(iss, client_id, *args, **kwargs) \
            if self._holds(iss, client_id) else None

    def find_deployment_by_params(self, iss: str, deployment_id: str, client_id: str, *args, **kwargs):
        return super().find_deployment_by_params(iss, deployment_id, client_id, *args, **kwargs) \
            if self._holds(iss, client_id) else None


class FrameOrigins:
    """The registered LMSs' frame origins, read again only when the platforms file changes (checked at most once
    a second), so a platform added while the server runs may frame its pages at once."""

    def __init__(self, data_dir: Path) -> None:
        self.path = _path(data_dir)
        self._seen: tuple[float, float] | None = None  # (checked at, file's mtime)
        self._origins: tuple[str, ...] = ()

    def __call__(self) -> tuple[str, ...]:
        now = time.monotonic()
        if self._seen is not None and now - self._seen[0] < 1.0:
            return self._origins
        try:
            mtime = self.path.stat().st_mtime
        except OSError:
            mtime = -1.0
        if self._seen is None or mtime != self._seen[1]:
            try:
                found = load(self.path.parent) if mtime >= 0 else []
            except ValueError:
                found = []
            self._origins = tuple(dict.fromkeys(o for p in found for o in p.frame_origins))
        self._seen = (now, mtime)
        return self._origins


def tool_conf(platforms: list[Platform], keys: ToolKeys) -> Registrations:
    """PyLTI1p3's tool config for these platforms, every one signed for with our current key."""
    by_issuer: dict[str, list] = {}
    for p in platforms:
        by_issuer.setdefault(p.issuer, []).append({
            "default": not by_issuer.get(p.issuer), "client_id": p.client_id, "auth_login_url": p.auth_login_url,
            "auth_token_url": p.auth_token_url, "key_set_url": p.key_set_url, "key_set": None,
            "deployment_ids": list(p.deployment_ids)})
    conf = Registrations(by_issuer)
    for p in platforms:
        conf.set_private_key(p.issuer, keys.private_pem(), client_id=p.client_id)
        conf.set_public_key(p.issuer, keys.public_pem(), client_id=p.client_id)
    return conf
