"""The tool's own RSA key: made once, kept in the data dir (mode 0600), published with its key id (its
thumbprint) as a JWKS.

A platform checks what we sign (deep-linking responses, service tokens) against our public JWKS. Rotating makes
a new key the one we sign with and keeps the previous one published, so a message signed just before the
rotation still checks; the one before that is dropped.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from jwcrypto.jwk import JWK

from blocktrace.app.server.hardening import write_private_file

__all__ = ["KEY_FILE", "ToolKeys", "load_or_create", "rotate"]

KEY_FILE = "lti-tool-keys.json"
KEY_BITS = 2048
KEPT = 2  # the current key and the one before it


@dataclass(frozen=True)
class ToolKeys:
    """The keys, newest first: the first signs, all are published."""

    keys: tuple[JWK, ...]

    @property
    def current(self) -> JWK:
        return self.keys[0]

    @property
    def kid(self) -> str:
        return self.current.key_id

    def private_pem(self) -> str:
        return self.current.export_to_pem(private_key=True, password=None).decode("ascii")

    def public_pem(self) -> str:
        return self.current.export_to_pem().decode("ascii")

    def jwks(self) -> dict:
        """The public keys as a JSON Web Key Set, each with its kid, "alg": "RS256" and "use": "sig"."""
        return {"keys": [{**json.loads(key.export_public()), "alg": "RS256", "use": "sig"} for key in self.keys]}


def _new_key() -> JWK:
    """A new RSA key whose kid is its RFC 7638 thumbprint, the kid PyLTI1p3 puts on what it signs with it."""
    key = JWK.generate(kty="RSA", size=KEY_BITS)
    return JWK(**{**json.loads(key.export_private()), "kid": key.thumbprint()})


def _write(path: Path, keys: tuple[JWK, ...], replace: bool = True) -> None:
    """Write with mode 0600, whole: a reader sees the old file or the new. Unless `replace`, a file already there
    stays (another process made it first) and this one is dropped."""
    write_private_file(path, json.dumps({"keys": [json.loads(k.export_private()) for k in keys]}), replace=replace)


def load_or_create(data_dir: Path) -> ToolKeys:
    """The tool's keys kept in `data_dir`, made on first use."""
    data_dir = Path(data_dir)
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = data_dir / KEY_FILE
    if not path.exists():
        _write(path, (_new_key(),), replace=False)
    if path.stat().st_mode & 0o077:
        os.chmod(path, 0o600)
    try:
        keys = tuple(JWK(**key) for key in json.loads(path.read_text(encoding="utf-8"))["keys"])
    except (ValueError, KeyError, TypeError) as error:
        raise ValueError(f"{path} does not hold the tool's keys; move it away to make new ones") from error
    if not keys:
        raise ValueError(f"{path} holds no key; move it away to make a new one")
    return ToolKeys(keys)


def rotate(data_dir: Path) -> ToolKeys:
    """Make a new signing key; keep the previous one published (KEPT keys in all)."""
    keys = (_new_key(), *load_or_create(data_dir).keys)[:KEPT]
    _write(Path(data_dir) / KEY_FILE, keys)
    return ToolKeys(keys)
