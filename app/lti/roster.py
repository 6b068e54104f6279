"""The class's roster from the LMS (LTI Names and Role Provisioning Services): when one of a course's teachers
launches blocktrace, the course's active learners join its class with the names the LMS gives them, so the
teacher's room lists everyone, also those who have not opened blocktrace yet. Teachers, teaching assistants and
administrators are not listed. A learner is the same learner id as their own launches make (who.learner_for:
NRPS's user_id is the launch's sub).
"""

from __future__ import annotations

from pylti1p3.message_launch import MessageLaunch

from blocktrace.app.classroom.identity import clean_display_name
from blocktrace.app.classroom.store import EventStore
from blocktrace.app.lti import who

__all__ = ["fill_roster"]


def _name(member: dict) -> str | None:
    given = " ".join(str(member.get(k) or "") for k in ("given_name", "family_name")).strip()
    return clean_display_name(member.get("name") or given)


def fill_roster(launch: MessageLaunch, store: EventStore, secret: bytes, class_code: str) -> int:
    """Join the launch's course's active learners to `class_code` with their LMS names; how many joined.
    Raises what PyLTI1p3 and requests raise when the LMS cannot be asked."""
    issuer = launch.get_iss()
    joined = 0
    for member in launch.get_nrps().get_members():
        user = member.get("user_id")
        roles = member.get("roles") or []
        if not isinstance(user, str) or not user or member.get("status", "Active") != "Active" or who.teaches(roles):
            continue
        store.join(class_code, who.learner_for(secret, issuer, user), _name(member))
        joined += 1
    return joined
