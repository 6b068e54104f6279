"""Who a launch stands for, and the signed token that carries it to the page it opens.

- The learner is the platform's (iss, sub): the same person launching again, from any browser, is the same
  learner id; two platforms' users never collide. The id is a keyed hash, so it says nothing about them.
- The class is the launch's context (its course) within its deployment: every launch from one course lands in
  one class code, and a course on another platform or deployment in another.
- Instructors, teaching assistants and administrators are the context's teachers; everyone else a learner.

The page a launch opens learns all this from a token in its address (`?lti=`), signed by the server and
accepted for LTI_SESSION's age: not from a cookie, which a browser may drop inside the LMS's frame.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from blocktrace.app.classroom.identity import valid_class_code, valid_learner_id
from blocktrace.app.signing import LTI_SESSION, derived_key, sign, unsign

__all__ = ["CLAIM", "TEACHING_ROLES", "Launched", "class_for", "from_launch", "learner_for", "read_token", "token"]

CLAIM = "https://purl.imsglobal.org/spec/lti/claim/"
_LIS = "http://purl.imsglobal.org/vocab/lis/v2/"
TEACHING_ROLES = frozenset({
    _LIS + "membership#Instructor",
    _LIS + "membership/Instructor#TeachingAssistant",
    _LIS + "membership#Administrator",
    _LIS + "institution/person#Administrator",
    _LIS + "system/person#Administrator",
})


@dataclass(frozen=True)
class Launched:
    """What a page needs of a launch."""

    learner_id: str  # 32 hex digits, as identity.new_learner_id makes them
    class_code: str  # "lti-" and 20 hex digits
    teacher: bool  # an instructor, teaching assistant or administrator of the context
    target: str  # the page the launch opens (a path of this server, with its query)


def _keyed(secret: bytes, purpose: str, *parts: str) -> str:
    message = "\x00".join(parts).encode("utf-8")
    return hmac.new(derived_key(secret, purpose), message, hashlib.sha256).hexdigest()


def learner_for(secret: bytes, issuer: str, subject: str) -> str:
    return _keyed(secret, "lti learner", issuer, subject)[:32]


def class_for(secret: bytes, issuer: str, deployment_id: str, context_id: str) -> str:
    return "lti-" + _keyed(secret, "lti class", issuer, deployment_id, context_id)[:20]


def teaches(roles: Sequence[Any]) -> bool:
    return any(isinstance(role, str) and role in TEACHING_ROLES for role in roles)


def from_launch(secret: bytes, body: Mapping[str, Any], target: str) -> Launched:
    """The learner, class and role of a validated launch's id_token body. A launch without a context (allowed by
    the specification) gets a class of its own resource link."""
    issuer, subject = str(body["iss"]), str(body.get("sub") or "")
    if not subject:
        raise ValueError("the launch names no user (no sub): blocktrace needs one to keep a learner's work")
    deployment = str(body[CLAIM + "deployment_id"])
    context = body.get(CLAIM + "context") or {}
    place = context.get("id") or "link:" + str((body.get(CLAIM + "resource_link") or {}).get("id", ""))
    roles = body.get(CLAIM + "roles") or []
    return Launched(learner_for(secret, issuer, subject), class_for(secret, issuer, deployment, str(place)),
                    teaches(roles if isinstance(roles, list) else []), target)


def token(secret: bytes, launched: Launched) -> str:
    return sign(secret, LTI_SESSION, json.dumps(asdict(launched), separators=(",", ":")))


def read_token(secret: bytes, text: object) -> Launched | None:
    """The launch a token carries, or None if it is forged, too old or not one of ours."""
    value = unsign(secret, LTI_SESSION, text)
    if value is None:
        return None
    try:
        launched = Launched(**json.loads(value))
    except (ValueError, TypeError):
        return None
    if not (valid_learner_id(launched.learner_id) and valid_class_code(launched.class_code)):
        return None
    return launched
