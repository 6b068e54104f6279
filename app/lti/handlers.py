"""The LTI routes: the OIDC login a platform starts, the launch it posts back, and what an admin pastes.

    /lti/login       GET or POST: the platform's third-party-initiated login; answered with a redirect to the
                     platform's authorisation endpoint (state cookie set, nonce kept in the class database)
    /lti/launch      POST: the platform's id_token, validated (tornado_adapter.py), then a redirect to the page
                     it launches, carrying who.py's signed token
    /lti/jwks.json   our public keys
    /lti/canvas.json the JSON a Canvas admin pastes into a new LTI developer key

Validation runs on worker threads: it reads the database and may fetch a platform's key set over HTTP. A refused
login or launch gets a page saying what was wrong and one log line; never a traceback.
"""

from __future__ import annotations

import json
import logging
import secrets
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit

import requests
from pylti1p3.exception import LtiException, OIDCException
from tornado.ioloop import IOLoop
from tornado.web import RequestHandler

from blocktrace.app.classroom.learner import current as current_classroom
from blocktrace.app.classroom.rendering import render
from blocktrace.app.classroom.store import StoreUnavailable
from blocktrace.app.lti import content_picker, grades, platforms, tool_keys, who
from blocktrace.app.lti.launch_store import StoreLaunchData
from blocktrace.app.lti.roster import fill_roster
from blocktrace.app.lti.teacher_room import teacher_room_patterns
from blocktrace.app.lti.tornado_adapter import KeySets, NeedsPlatformStorage, TornadoLaunch, TornadoLogin

__all__ = ["LtiSetup", "canvas_config", "lti_patterns", "tool_urls"]

log = logging.getLogger("blocktrace.lti")

DEEP_LINKING = "https://purl.imsglobal.org/spec/lti-dl/claim/"
PICK_SECONDS = 3600  # a deep-linking launch's picker may wait an hour for the teacher's choice
FETCH_TIMEOUT_S = 10  # a platform's key set that takes longer fails the launch
# Threads of their own: the loop's default executor may run calls in place (app/tuning/work_on_loop.py).
LTI_WORK = ThreadPoolExecutor(max_workers=4, thread_name_prefix="blocktrace-lti")


@dataclass(frozen=True)
class LtiSetup:
    """What the LTI routes need: where the platforms and keys are kept, and the pages a launch may open."""

    data_dir: Path
    pages: frozenset[str]
    key_sets: KeySets


class TimedSession(requests.Session):
    """requests' session with a timeout on every call (PyLTI1p3 sets none)."""

    def request(self, *args, **kwargs):
        kwargs.setdefault("timeout", FETCH_TIMEOUT_S)
        return super().request(*args, **kwargs)


def tool_urls(base: str) -> dict[str, str]:
    """Our LTI URLs under `base` (scheme and host, e.g. https://blocktrace.example.edu)."""
    base = base.rstrip("/")
    return {"login": f"{base}/lti/login", "launch": f"{base}/lti/launch", "jwks": f"{base}/lti/jwks.json",
            "deep_linking": f"{base}/lti/launch", "canvas": f"{base}/lti/canvas.json"}


def canvas_config(base: str) -> dict:
    """Canvas's JSON for an LTI 1.3 developer key: launched from the course navigation and from links and
    assignments a teacher adds (deep linking)."""
    urls = tool_urls(base)
    placement = {"message_type": "LtiResourceLinkRequest", "target_link_uri": urls["launch"]}
    picker = {"message_type": "LtiDeepLinkingRequest", "target_link_uri": urls["deep_linking"]}
    return {
        "title": "blocktrace",
        "description": "Explorables of the Transformer block: predict, then see the numbers.",
        "oidc_initiation_url": urls["login"],
        "target_link_uri": urls["launch"],
        "public_jwk_url": urls["jwks"],
        "scopes": ["https://purl.imsglobal.org/spec/lti-ags/scope/lineitem",
                   "https://purl.imsglobal.org/spec/lti-ags/scope/score",
                   "https://purl.imsglobal.org/spec/lti-nrps/scope/contextmembership.readonly"],
        "extensions": [{"platform": "canvas.instructure.com", "privacy_level": "public", "settings": {
            "placements": [{"placement": "course_navigation", "text": "blocktrace", **placement},
                           {"placement": "link_selection", "text": "blocktrace", **picker},
                           {"placement": "assignment_selection", "text": "blocktrace", **picker}]}}],
        "custom_fields": {},
    }


class _LtiHandler(RequestHandler):
    def initialize(self, setup: LtiSetup) -> None:
        self.setup = setup

    def base(self) -> str:
        return f"{self.request.protocol}://{self.request.host}"

    def refuse(self, status: int, reason: str, advice: str, detail: str = "") -> None:
        log.warning("LTI %s refused: %s%s", self.request.path.rsplit("/", 1)[-1], reason, detail)
        self.set_status(status)
        self.set_header("Cache-Control", "no-store")
        self.finish(render("lti_refused.html", reason=reason, advice=advice))

    def conf_and_storage(self):
        classroom = current_classroom()
        keys = tool_keys.load_or_create(self.setup.data_dir)
        return platforms.tool_conf(platforms.load(self.setup.data_dir), keys), StoreLaunchData(classroom.store)


CHECK_TEXTS = {"main_msg": "Your browser keeps no cookies for blocktrace inside your course's page.",
               "click_msg": "Open blocktrace in a new window.", "loading_msg": "Opening blocktrace…"}
ADMIN = ("the LMS's registration must match `blocktrace lti add-platform` on the server (issuer, client id, "
         "deployment id and the platform's URLs).")


class LoginHandler(_LtiHandler):
    """The platform's third-party-initiated login (GET or POST, as the platform chooses)."""

    async def get(self) -> None:
        await self._login()

    async def post(self) -> None:
        await self._login()

    def check_xsrf_cookie(self) -> None:  # a platform's form post carries no token of ours
        pass

    async def _login(self) -> None:
        """Three ways on, by what the browser can keep: the platform's storage when the platform offers it
        (`lti_storage_target`); else PyLTI1p3's own check for cookies in this frame, which goes on here or
        offers a new window (`lti1p3_new_window`), where cookies are the site's own."""
        launch_url = tool_urls(self.base())["launch"]
        target = self.get_argument("lti_storage_target", "")

        def prepare() -> tuple[str, str, dict]:
            conf, storage = self.conf_and_storage()
            login = TornadoLogin(self, conf, storage)
            if not target and not self.get_argument("lti1p3_new_window", ""):
                return "page", login.enable_check_cookies(**CHECK_TEXTS).get_cookies_allowed_js_check(), {}
            kept = {}
            if target:
                kept = {"storage_target": target, "storage_origin": self.platform_origin(),
                        "storage_value": secrets.token_urlsafe(24)}
                login.pass_params_to_launch(kept)
            return "redirect", login.get_redirect_object(launch_url).get_redirect_url(), kept

        try:
            how, location, kept = await IOLoop.current().run_in_executor(LTI_WORK, prepare)
        except (OIDCException, LtiException) as error:
            self.refuse(400, f"The LMS's login request was refused: {error}.", ADMIN,
                        f" (iss={self.get_argument('iss', '')!r})")
            return
        except StoreUnavailable:
            self.refuse(503, "The class database cannot be reached just now.", "the server's database is down.")
            return
        self.set_header("Cache-Control", "no-store")
        if how == "page":
            self.finish(location)
        elif kept:
            state = dict(parse_qsl(urlsplit(location).query))["state"]
            fallback = self.request.path + "?" + urlencode(
                {k: v[-1].decode("utf-8", "replace") for k, v in self.request.arguments.items()
                 if k != "lti_storage_target"})
            self.finish(render("lti_storage.html", mode="put", target=kept["storage_target"],
                               origin=kept["storage_origin"], key=f"state_{state}", value=kept["storage_value"],
                               next_url=location, fallback=fallback, id_token="", state=""))
        else:
            self.redirect(location)

    def platform_origin(self) -> str:
        """The origin of the platform's login endpoint, where its storage answers (empty if not registered)."""
        iss, client_id = self.get_argument("iss", ""), self.get_argument("client_id", "")
        for p in platforms.load(self.setup.data_dir):
            if p.issuer == iss and (p.client_id == client_id or not client_id):
                parts = urlsplit(p.auth_login_url)
                return f"{parts.scheme}://{parts.netloc}"
        return ""


class LaunchHandler(_LtiHandler):
    """The platform's id_token, posted by the browser; on success a redirect to the launched page."""

    def check_xsrf_cookie(self) -> None:
        pass

    async def post(self) -> None:
        def validate() -> tuple[dict, str]:
            conf, storage = self.conf_and_storage()
            launch = TornadoLaunch(self, conf, storage, self.setup.key_sets, TimedSession())
            launch.set_launch_data_lifetime(PICK_SECONDS)  # kept for a deep-linking launch's pick
            body = launch.validate().get_launch_data()
            self.open_class(body)
            self.update_roster(launch, body)
            self.keep_score_link(launch, body)
            return body, launch.get_launch_id()

        try:
            body, launch_id = await IOLoop.current().run_in_executor(LTI_WORK, validate)
        except NeedsPlatformStorage as needed:  # no cookie: the page asks the platform's storage, and posts again
            self.set_header("Cache-Control", "no-store")
            self.finish(render("lti_storage.html", mode="get", target=needed.target, origin=needed.origin,
                               key=needed.key, value="", next_url="", fallback="/",
                               id_token=self.get_argument("id_token", ""), state=self.get_argument("state", "")))
            return
        except (LtiException, OIDCException) as error:
            self.refuse(403, f"The launch was refused: {error}.", ADMIN)
            return
        except StoreUnavailable:
            self.refuse(503, "The class database cannot be reached just now.", "the server's database is down.")
            return
        if body.get(who.CLAIM + "message_type") == "LtiDeepLinkingRequest":
            if not who.teaches(body.get(who.CLAIM + "roles") or []):
                self.refuse(403, "Only a course's instructors can add blocktrace to it.", ADMIN)
                return
            self.set_header("Cache-Control", "no-store")
            self.finish(render("lti_picker.html", launch_id=launch_id, choices=content_picker.choices(), state="",
                               error=""))
            return
        target = self.target(body.get(who.CLAIM + "target_link_uri"))
        try:
            launched = who.from_launch(current_classroom().secret, body, target)
        except (KeyError, ValueError) as error:
            self.refuse(403, f"The launch was refused: {error}.", ADMIN)
            return
        log.info("LTI launch: class %s, %s", launched.class_code, "teacher" if launched.teacher else "learner")
        token = urlencode({"lti": who.token(current_classroom().secret, launched)})
        self.set_header("Cache-Control", "no-store")
        if launched.teacher:  # the room (in a window of its own) or the students' page
            self.redirect(f"/lti/teacher?{token}", status=303)
        else:
            self.redirect(target + ("&" if "?" in target else "?") + token, status=303)

    def open_class(self, body: dict) -> None:
        """The course's class exists from its first launch, so its learners may join it (app/classroom/join.py)."""
        classroom = current_classroom()
        try:
            code = who.from_launch(classroom.secret, body, "/").class_code
        except (KeyError, ValueError):
            return  # refused below, with the reason
        try:
            made = classroom.store.open_class(code)
        except StoreUnavailable:  # the launch goes on: its pages let its learners in by their token (learner.identify)
            log.warning("LTI class %s not opened: the class database cannot be reached", code)
            return
        if made:
            classroom.thread.submit(lambda: classroom.thread.opened(code))  # on the thread that reads the classes

    def keep_score_link(self, launch: TornadoLaunch, body: dict) -> None:
        """A learner's launch from a course that takes scores: keep where their scores go (grades.py)."""
        link = grades.link_from_launch(body, launch.get_client_id())
        if link is None or who.teaches(body.get(who.CLAIM + "roles") or []):
            return
        classroom = current_classroom()
        launched = who.from_launch(classroom.secret, body, "/")
        classroom.store.lti_link(launched.class_code, launched.learner_id, link)

    def update_roster(self, launch: TornadoLaunch, body: dict) -> None:
        """A teacher's launch of a course that offers its roster: fill the class with it (a failure is logged;
        the launch goes on)."""
        if not who.teaches(body.get(who.CLAIM + "roles") or []) or not launch.has_nrps():
            return
        classroom = current_classroom()
        class_code = who.from_launch(classroom.secret, body, "/").class_code
        try:
            joined = fill_roster(launch, classroom.store, classroom.secret, class_code)
        except (LtiException, requests.RequestException, StoreUnavailable, ValueError) as error:
            log.warning("LTI roster of class %s not read: %s", class_code, error)
            return
        log.info("LTI roster: %d learner(s) in class %s", joined, class_code)

    def target(self, link: object) -> str:
        """The page the launch names (target_link_uri), if it is one of ours; else the index."""
        parts = urlsplit(link if isinstance(link, str) else "")
        if parts.path in self.setup.pages and parts.path != "/":
            return parts.path + (f"?{parts.query}" if parts.query else "")
        return "/"


class PickHandler(_LtiHandler):
    """POST /lti/pick: the teacher's choice from the content picker, answered with the LMS's resource link."""

    def check_xsrf_cookie(self) -> None:  # the launch id, known only to the picker's page, is the form's key
        pass

    async def post(self) -> None:
        launch_id = self.get_body_argument("launch_id", "")
        route, state = self.get_body_argument("route", ""), self.get_body_argument("state", "")
        picked = next((c for c in content_picker.choices() if c.route == route), None)
        try:
            query = content_picker.starting_query(state, route)
        except ValueError as error:
            self.finish(render("lti_picker.html", launch_id=launch_id, choices=content_picker.choices(),
                               state=state, error=f"{str(error).capitalize()}."))
            return
        if picked is None:
            self.refuse(400, "There is no such page to add.", "pick one of the pages the picker lists.")
            return
        base = self.base()

        def answer() -> tuple[str, str]:
            conf, storage = self.conf_and_storage()
            launch = TornadoLaunch(self, conf, storage, self.setup.key_sets)
            body = launch.get_session_service().get_launch_data(launch_id) if launch_id.startswith(
                "lti1p3-launch-") else None
            if not body or not storage.take(launch_id):
                raise LtiException("this picker has been used already, or has expired; add blocktrace again")
            launch.set_launch_id(launch_id).set_auto_validation(enable=False).set_jwt({"body": body})
            launch.set_restored().validate_registration()
            if not launch.is_deep_link_launch() or not who.teaches(body.get(who.CLAIM + "roles") or []):
                raise LtiException("this launch may not add content")
            link = launch.get_deep_link()
            settings = body[DEEP_LINKING + "deep_linking_settings"]
            return settings["deep_link_return_url"], link.get_response_jwt([content_picker.resource_for(
                base, picked, query)])

        try:
            return_url, token = await IOLoop.current().run_in_executor(LTI_WORK, answer)
        except (LtiException, KeyError) as error:
            self.refuse(403, f"The content picker was refused: {error}.", ADMIN)
            return
        log.info("LTI deep link: %s", picked.route)
        self.set_header("Cache-Control", "no-store")
        self.finish(render("lti_return.html", return_url=return_url, jwt=token, title=picked.title))


class JwksHandler(_LtiHandler):
    def get(self) -> None:
        self.set_header("Content-Type", "application/json")
        self.set_header("Cache-Control", "public, max-age=300")
        self.finish(json.dumps(tool_keys.load_or_create(self.setup.data_dir).jwks()))


class CanvasConfigHandler(_LtiHandler):
    def get(self) -> None:
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(canvas_config(self.base()), indent=1))


def lti_patterns(data_dir: Path, pages: frozenset[str]) -> list[tuple]:
    """The LTI routes, for the server's extra patterns."""
    setup = LtiSetup(Path(data_dir), frozenset(pages), KeySets())
    handlers = [(r"/lti/login", LoginHandler), (r"/lti/launch", LaunchHandler), (r"/lti/pick", PickHandler),
                (r"/lti/jwks\.json", JwksHandler), (r"/lti/canvas\.json", CanvasConfigHandler)]
    return [(path, handler, {"setup": setup}) for path, handler in handlers] + teacher_room_patterns()
