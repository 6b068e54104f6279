"""Deep linking: a course's teacher picks a lesson or an explorable (and, if they like, a starting state) and the
LMS gets a resource link to it.

A deep-linking launch is validated like any other (handlers.py); PyLTI1p3 keeps its data in the class database
under a random launch id, which the picker's form carries back (it is the form's only key: a frame may keep no
cookie). The answer is PyLTI1p3's signed LtiDeepLinkingResponse, posted to the LMS's return URL. Each launch
picks once: its data is removed when the pick is made.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from pylti1p3.deep_link_resource import DeepLinkResource

from blocktrace.app.lessons.loading import load_lessons
from blocktrace.app.server.catalogue import EXPLORABLES

__all__ = ["Choice", "choices", "resource_for", "starting_query"]

MAX_STATE = 2000  # characters of a starting state: more than any explorable's link needs


@dataclass(frozen=True)
class Choice:
    route: str
    title: str
    kind: str  # "lesson" or "explorable"


def choices() -> list[Choice]:
    """What a teacher can link: every lesson, then every explorable."""
    return ([Choice(lesson.route, lesson.title, "lesson") for lesson in load_lessons()] +
            [Choice(entry.route, entry.title, "explorable") for entry in EXPLORABLES])


def starting_query(text: str, route: str) -> str:
    """The query of a starting state: pasted as a link to the same page (or as its query alone). ValueError if it
    is a link to another page or too long."""
    text = text.strip()
    if not text:
        return ""
    if len(text) > MAX_STATE:
        raise ValueError(f"the starting state is longer than {MAX_STATE} characters")
    parts = urlsplit(text if "?" in text or "://" in text else "?" + text)
    if parts.path and parts.path != route:
        raise ValueError("the starting state is a link to another page: copy it from the page you picked")
    query = "&".join(p for p in parts.query.split("&") if p and not p.startswith(("lti=", "class=")))
    return query


def resource_for(base: str, choice: Choice, query: str) -> DeepLinkResource:
    """The LMS's resource link to `choice` (its launches open that page, in that state)."""
    url = f"{base.rstrip('/')}{choice.route}" + (f"?{query}" if query else "")
    return DeepLinkResource().set_url(url).set_title(f"blocktrace: {choice.title}")
