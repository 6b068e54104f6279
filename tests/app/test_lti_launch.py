"""LTI 1.3 launches against a real server and a test LMS with real RS256 keys served over HTTP: the login,
the launch, who the page then records for, and every attack the issue names refused with a clear page."""

from __future__ import annotations

import base64
import html
import json
import re
import time
from collections.abc import Iterator
from urllib.parse import parse_qsl, quote, urlsplit

import jwt
import pytest
import requests

from blocktrace.app.classroom.store import EventStore, default_url
from blocktrace.app.lti import who
from blocktrace.app.server.catalogue import explorable
from tests.conftest import Server, module_server, sent_to_login
from tests.lti_platform import INSTRUCTOR, LEARNER, SigningKey, TestPlatform, lti_command, registered_platform

TARGET_PATH = "/explorables/decoder-block-lab"


@pytest.fixture(scope="module")
def lti_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    yield from module_server(tmp_path_factory, "lti", "--access-log")  # one test reads the access log


@pytest.fixture(scope="module")
def lms(lti_server: Server) -> Iterator[TestPlatform]:
    with registered_platform(lti_server.data_dir, lti_server.base_url) as platform:
        yield platform


def lti(server: Server, *args: str) -> str:
    return lti_command(server.data_dir, *args)


def login(server: Server, lms: TestPlatform, session: requests.Session, target: str = "") -> dict[str, str]:
    """The platform's login initiation; returns the tool's authorisation request (its query). The first answer is
    PyLTI1p3's check for cookies, whose script comes back with lti1p3_new_window=1 where cookies are kept."""
    params = lms.login_params(target or server.url(TARGET_PATH))
    check = session.get(server.url("/lti/login"), params=params, allow_redirects=False)
    assert check.status_code == 200 and "lti1p3_test_cookie" in check.text and "new window" in check.text
    answer = session.get(server.url("/lti/login"), params={**params, "lti1p3_new_window": "1"},
                         allow_redirects=False)
    assert answer.status_code == 302, answer.text
    location = answer.headers["Location"]
    assert location.startswith(lms.url + "/auth?")
    return dict(parse_qsl(urlsplit(location).query))


def launch(server: Server, session: requests.Session, id_token: str, state: str) -> requests.Response:
    return session.post(server.url("/lti/launch"), data={"id_token": id_token, "state": state},
                        allow_redirects=False)


def good_launch(server: Server, lms: TestPlatform, **claims) -> tuple[requests.Session, dict, requests.Response]:
    session = requests.Session()
    auth = login(server, lms, session)
    body = {**lms.claims(auth["nonce"], server.url(TARGET_PATH)), **claims}
    return session, auth, launch(server, session, lms.sign(body), auth["state"])


def refused(answer: requests.Response, words: str) -> None:
    assert answer.status_code in (400, 403), answer.status_code
    text = html.unescape(answer.text)
    assert "blocktrace could not open from your LMS" in text and words in text, text
    assert "Traceback" not in answer.text


# --- the launch --------------------------------------------------------------------------------


def test_the_authorisation_request_is_what_the_specification_asks(lti_server: Server, lms: TestPlatform) -> None:
    auth = login(lti_server, lms, requests.Session())
    assert auth["scope"] == "openid" and auth["response_type"] == "id_token"
    assert auth["response_mode"] == "form_post" and auth["prompt"] == "none"
    assert auth["client_id"] == lms.client_id and auth["redirect_uri"] == lti_server.url("/lti/launch")
    assert auth["login_hint"].startswith("hint-") and len(auth["nonce"]) >= 32 and auth["state"]


def test_a_launch_opens_the_page_for_the_platforms_learner_and_course(lti_server: Server, lms: TestPlatform) -> None:
    session, _, answer = good_launch(lti_server, lms)
    assert answer.status_code == 303
    location = answer.headers["Location"]
    assert urlsplit(location).path == TARGET_PATH
    token = dict(parse_qsl(urlsplit(location).query))["lti"]
    secret = lti_server.secret()
    launched = who.read_token(secret, token)
    assert launched == who.Launched(who.learner_for(secret, lms.issuer, "student-1"),
                                    who.class_for(secret, lms.issuer, lms.deployment_id, "course-101"),
                                    False, TARGET_PATH)
    page = requests.get(lti_server.url(location))  # a browser that keeps no cookie at all
    assert page.status_code == 200
    assert page.cookies.get("bt_class") == launched.class_code
    assert launched.learner_id in base64.b64decode(page.cookies["bt_learner"].split("|")[4].split(":")[1]).decode()


def test_the_same_person_is_the_same_learner_and_another_course_another_class(lti_server: Server,
                                                                               lms: TestPlatform) -> None:
    secret = lti_server.secret()

    def launched(**claims) -> who.Launched:
        answer = good_launch(lti_server, lms, **claims)[2]
        return who.read_token(secret, dict(parse_qsl(urlsplit(answer.headers["Location"]).query))["lti"])

    first, again = launched(), launched()
    other_course = launched(**{who.CLAIM + "context": {"id": "course-202"}})
    teacher = launched(sub="teacher-1", **{who.CLAIM + "roles": [INSTRUCTOR]})
    assert first.learner_id == again.learner_id and first.class_code == again.class_code
    assert other_course.learner_id == first.learner_id and other_course.class_code != first.class_code
    assert teacher.teacher and not first.teacher and teacher.class_code == first.class_code


def test_a_target_that_is_not_one_of_our_pages_opens_the_index(lti_server: Server, lms: TestPlatform) -> None:
    answer = good_launch(lti_server, lms, **{who.CLAIM + "target_link_uri": "https://evil.example/x"})[2]
    assert answer.status_code == 303 and answer.headers["Location"].startswith("/?lti=")


# --- attacks -----------------------------------------------------------------------------------


def test_a_replayed_id_token_is_refused(lti_server: Server, lms: TestPlatform) -> None:
    session, auth = requests.Session(), None
    auth = login(lti_server, lms, session)
    token = lms.sign(lms.claims(auth["nonce"], lti_server.url(TARGET_PATH)))
    assert launch(lti_server, session, token, auth["state"]).status_code == 303
    refused(launch(lti_server, session, token, auth["state"]), "Invalid Nonce")


def test_a_nonce_the_tool_never_issued_is_refused(lti_server: Server, lms: TestPlatform) -> None:
    session = requests.Session()
    auth = login(lti_server, lms, session)
    refused(launch(lti_server, session, lms.sign(lms.claims("made-up-" + "0" * 40, TARGET_PATH)), auth["state"]),
            "Invalid Nonce")


@pytest.mark.parametrize(("claims", "words"), [
    ({"aud": "another-tool"}, "Registration not found"),
    ({"aud": ["another-tool", "blocktrace-client"], "azp": "another-tool"}, "Registration not found"),
    ({"aud": ["blocktrace-client", "another-tool"]}, "azp"),
    ({"aud": ["blocktrace-client", "another-tool"], "azp": "another-tool"}, "azp"),
    ({who.CLAIM + "deployment_id": "deployment-9"}, "Unable to find deployment"),
    ({"iss": "https://lms.elsewhere.example"}, "Registration not found"),
], ids=["wrong-audience", "wrong-audience-first", "no-azp", "wrong-azp", "unregistered-deployment",
        "unknown-issuer"])
def test_a_token_with_a_wrong_claim_is_refused(lti_server: Server, lms: TestPlatform, claims: dict, words: str) -> None:
    refused(good_launch(lti_server, lms, **claims)[2], words)


@pytest.mark.parametrize(("claim", "seconds_from_now", "words"), [
    ("exp", -600, "expired"),
    ("iat", 600, "not yet valid"),
], ids=["expired", "issued-in-the-future"])
def test_a_token_outside_its_time_is_refused(lti_server: Server, lms: TestPlatform, claim: str,
                                             seconds_from_now: int, words: str) -> None:
    # The time is read when the test runs: read at collection, it is long past in a suite that runs 20 minutes.
    refused(good_launch(lti_server, lms, **{claim: int(time.time()) + seconds_from_now})[2], words)


def test_a_small_clock_skew_is_allowed(lti_server: Server, lms: TestPlatform) -> None:
    assert good_launch(lti_server, lms, iat=int(time.time()) + 30)[2].status_code == 303


def test_a_forged_role_breaks_the_signature(lti_server: Server, lms: TestPlatform) -> None:
    session = requests.Session()
    auth = login(lti_server, lms, session)
    header, payload, signature = lms.sign(lms.claims(auth["nonce"], TARGET_PATH)).split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    claims[who.CLAIM + "roles"] = [INSTRUCTOR]
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    refused(launch(lti_server, session, f"{header}.{forged}.{signature}", auth["state"]), "Signature")


def test_a_token_signed_with_a_key_the_platform_never_published_is_refused(lti_server: Server,
                                                                           lms: TestPlatform) -> None:
    session = requests.Session()
    auth = login(lti_server, lms, session)
    before = lms.jwks_fetches
    stranger = SigningKey()
    refused(launch(lti_server, session, lms.sign(lms.claims(auth["nonce"], TARGET_PATH), stranger), auth["state"]),
            "Unable to find public key")
    assert lms.jwks_fetches == before + 1  # an unknown kid: the key set is fetched again, once


def test_a_platform_that_rotated_its_key_is_followed(lti_server: Server, lms: TestPlatform) -> None:
    assert good_launch(lti_server, lms)[2].status_code == 303  # the key set is cached now
    lms.keys.insert(0, SigningKey())
    try:
        assert good_launch(lti_server, lms)[2].status_code == 303
    finally:
        lms.keys.pop(0)


def test_a_launch_without_the_logins_state_is_refused(lti_server: Server, lms: TestPlatform) -> None:
    session = requests.Session()
    auth = login(lti_server, lms, session)
    token = lms.sign(lms.claims(auth["nonce"], TARGET_PATH))
    refused(launch(lti_server, requests.Session(), token, auth["state"]), "State not found")  # another browser
    refused(launch(lti_server, session, token, ""), "Missing state")


def test_a_login_from_an_unregistered_platform_is_refused(lti_server: Server, lms: TestPlatform) -> None:
    answer = requests.get(lti_server.url("/lti/login"), allow_redirects=False,
                          params={**lms.login_params(""), "iss": "https://x.example", "lti1p3_new_window": "1"})
    refused(answer, "Could not find registration details")


def test_a_learners_token_does_not_open_the_teachers_room(lti_server: Server, lms: TestPlatform) -> None:
    location = good_launch(lti_server, lms)[2].headers["Location"]
    token = dict(parse_qsl(urlsplit(location).query))["lti"]
    assert sent_to_login(requests.get(lti_server.url("/teacher"), params={"lti": token}, allow_redirects=False))


def test_a_tampered_or_stale_page_token_names_nobody(lti_server: Server, lms: TestPlatform) -> None:
    location = good_launch(lti_server, lms)[2].headers["Location"]
    token = dict(parse_qsl(urlsplit(location).query))["lti"]
    secret = lti_server.secret()
    assert who.read_token(secret, token[:-2] + ("AA" if not token.endswith("AA") else "BB")) is None
    stale = who.token(secret, who.read_token(secret, token))
    assert who.read_token(secret, stale) is not None
    from blocktrace.app.signing import LTI_SESSION, unsign
    assert unsign(secret, LTI_SESSION, stale, clock=lambda: time.time() + 13 * 3600) is None


def test_every_refusal_is_one_log_line_and_no_traceback(lti_server: Server, lms: TestPlatform) -> None:
    refused(good_launch(lti_server, lms, aud="nobody")[2], "Registration")
    log = lti_server.log()
    assert "Traceback" not in log
    assert re.search(r"LTI launch refused: The launch was refused: Registration not found", log)


# --- what an admin pastes -------------------------------------------------------------------------


def test_the_tools_keys_and_configuration_are_published(lti_server: Server, lms: TestPlatform) -> None:
    jwks = requests.get(lti_server.url("/lti/jwks.json")).json()
    assert [k["kty"] for k in jwks["keys"]] == ["RSA"] and "d" not in jwks["keys"][0]
    printed = lti(lti_server, "config", "--url", "https://blocktrace.example.edu")
    assert "https://blocktrace.example.edu/lti/login" in printed and jwks["keys"][0]["kid"] in printed
    canvas = json.loads(lti(lti_server, "config", "--url", "https://blocktrace.example.edu", "--canvas-json"))
    assert canvas["oidc_initiation_url"] == "https://blocktrace.example.edu/lti/login"
    assert canvas["public_jwk_url"] == "https://blocktrace.example.edu/lti/jwks.json"
    key_file = lti_server.data_dir / "lti-tool-keys.json"
    assert key_file.stat().st_mode & 0o777 == 0o600
    old = jwks["keys"][0]["kid"]
    assert "earlier key" in lti(lti_server, "rotate-key")
    rotated = requests.get(lti_server.url("/lti/jwks.json")).json()
    assert [k["kid"] for k in rotated["keys"]][1] == old and rotated["keys"][0]["kid"] != old


# --- without cookies: the platform's storage ---------------------------------------------------------


def _attribute(page: str, name: str) -> str:
    return html.unescape(re.search(rf'{name}="([^"]*)"', page).group(1))


def test_a_launch_without_cookies_is_proven_through_the_platforms_storage(lti_server: Server,
                                                                           lms: TestPlatform) -> None:
    """The login keeps a value in the platform's storage (the page's script) and goes on to the LMS; the launch,
    with no cookie, asks for it back; posted again with it, the launch opens the page. Nothing else will do."""
    params = {**lms.login_params(lti_server.url(TARGET_PATH)), "lti_storage_target": "_parent"}
    put = requests.get(lti_server.url("/lti/login"), params=params, allow_redirects=False)
    assert put.status_code == 200 and 'data-mode="put"' in put.text and "/assets/js/lti-storage.js" in put.text
    assert _attribute(put.text, "data-origin") == lms.url and _attribute(put.text, "data-target") == "_parent"
    auth = dict(parse_qsl(urlsplit(_attribute(put.text, "data-next")).query))
    assert _attribute(put.text, "data-key") == f"state_{auth['state']}"
    value = _attribute(put.text, "data-value")
    assert len(value) >= 32 and value not in _attribute(put.text, "data-next")
    assert "lti_storage_target" not in _attribute(put.text, "data-fallback")
    token = lms.sign(lms.claims(auth["nonce"], lti_server.url(TARGET_PATH)))
    get = launch(lti_server, requests.Session(), token, auth["state"])  # no cookie at all
    assert get.status_code == 200 and 'data-mode="get"' in get.text
    assert _attribute(get.text, "data-key") == f"state_{auth['state']}" and value not in get.text
    wrong = requests.post(lti_server.url("/lti/launch"), allow_redirects=False,
                          data={"id_token": token, "state": auth["state"], "lti_storage_value": "x" * 32})
    refused(wrong, "another value")
    right = requests.post(lti_server.url("/lti/launch"), allow_redirects=False,
                          data={"id_token": token, "state": auth["state"], "lti_storage_value": value})
    assert right.status_code == 303 and "?lti=" in right.headers["Location"]
    again = requests.post(lti_server.url("/lti/launch"), allow_redirects=False,
                          data={"id_token": token, "state": auth["state"], "lti_storage_value": value})
    refused(again, "Invalid Nonce")


# --- the teacher's room --------------------------------------------------------------------------


def _token(answer: requests.Response) -> str:
    return dict(parse_qsl(urlsplit(answer.headers["Location"]).query))["lti"]


def test_an_instructor_enters_the_room_of_their_course_only_without_the_password(lti_server: Server,
                                                                                 lms: TestPlatform) -> None:
    answer = good_launch(lti_server, lms, sub="teacher-1", **{who.CLAIM + "roles": [INSTRUCTOR]})[2]
    assert answer.status_code == 303 and answer.headers["Location"].startswith("/lti/teacher?lti=")
    token = _token(answer)
    choice = requests.get(lti_server.url(answer.headers["Location"]))
    assert "Open the teacher&#39;s room for this course" in choice.text or "teacher's room" in choice.text
    assert 'target="_blank"' in choice.text and f"{TARGET_PATH}?lti=" in choice.text
    browser = requests.Session()
    enter = browser.get(lti_server.url("/teacher/lti"), params={"lti": token}, allow_redirects=False)
    course = who.read_token(lti_server.secret(), token).class_code
    assert enter.status_code == 302 and enter.headers["Location"] == f"/teacher?class={course}"
    room = browser.get(lti_server.url(enter.headers["Location"]))
    assert room.status_code == 200 and course in room.text and "period-3" not in room.text
    assert "every score so far has been sent" in room.text
    with EventStore(default_url(lti_server.data_dir)) as store:
        store.enqueue("lti-score", [(f"score:{course}:x:transformer-block:1", {}),
                                    ("score:lti-someone-else:x:transformer-block:1", {})])
    room = browser.get(lti_server.url(enter.headers["Location"]))
    assert "1 score waiting to be sent" in room.text
    other = browser.get(lti_server.url("/teacher"), params={"class": "period-3"}, allow_redirects=False)
    assert other.status_code == 302 and f"class={course}" in other.headers["Location"]
    export = browser.get(lti_server.url("/teacher/events.csv"), allow_redirects=False)
    assert export.status_code == 302 and f"class={course}" in export.headers["Location"]
    form = browser.post(lti_server.url("/teacher/reveal"), data={"class": "period-3", "question": "q"})
    assert form.status_code == 403 and "its own class only" in form.text
    assert sent_to_login(requests.get(lti_server.url(f"/teacher?class={course}"), allow_redirects=False))  # no cookie


def test_a_students_launch_does_not_open_the_teachers_room(lti_server: Server, lms: TestPlatform) -> None:
    token = _token(good_launch(lti_server, lms)[2])
    entry = requests.get(lti_server.url("/teacher/lti"), params={"lti": token}, allow_redirects=False)
    assert entry.status_code == 403 and "instructors" in entry.text and "bt_lti_teacher" not in entry.headers.get(
        "Set-Cookie", "")
    assert requests.get(lti_server.url("/lti/teacher"), params={"lti": token}).status_code == 403
    forged = requests.get(lti_server.url("/teacher"), cookies={"bt_lti_teacher": "period-3"}, allow_redirects=False)
    assert sent_to_login(forged)


# --- the content picker (deep linking) -----------------------------------------------------------------

DL = "https://purl.imsglobal.org/spec/lti-dl/claim/"


def deep_linking_launch(server: Server, lms: TestPlatform, roles=(INSTRUCTOR,)) -> requests.Response:
    return good_launch(server, lms, sub="teacher-1", **{
        who.CLAIM + "message_type": "LtiDeepLinkingRequest", who.CLAIM + "roles": list(roles),
        DL + "deep_linking_settings": {"deep_link_return_url": lms.url + "/deep-link-return",
                                       "accept_types": ["ltiResourceLink"],
                                       "accept_presentation_document_targets": ["iframe", "window"],
                                       "data": "opaque-123"}})[2]


def test_a_teacher_picks_a_page_and_its_state_and_the_lms_gets_a_signed_link(lti_server: Server,
                                                                              lms: TestPlatform) -> None:
    picker = deep_linking_launch(lti_server, lms)
    assert picker.status_code == 200 and "Add blocktrace to your course" in picker.text
    assert "Lesson: " in picker.text and "Explorable: " in picker.text
    launch_id = _attribute(picker.text.split('name="launch_id"')[1], "value")
    pasted = lti_server.url("/explorables/decoder-block-lab?residual=replace&d=16&lti=someone&class=x")
    answer = requests.post(lti_server.url("/lti/pick"), data={
        "launch_id": launch_id, "route": "/explorables/decoder-block-lab", "state": pasted})
    assert answer.status_code == 200
    assert _attribute(answer.text, "action") == lms.url + "/deep-link-return"
    token = _attribute(answer.text.split('name="JWT"')[1], "value")
    keys = jwt.PyJWKClient(lti_server.url("/lti/jwks.json"))  # the tool's published key, over HTTP
    message = jwt.decode(token, keys.get_signing_key_from_jwt(token).key, algorithms=["RS256"], audience=lms.issuer)
    assert message["iss"] == lms.client_id and message[who.CLAIM + "deployment_id"] == lms.deployment_id
    assert message[who.CLAIM + "message_type"] == "LtiDeepLinkingResponse" and message[DL + "data"] == "opaque-123"
    [item] = message[DL + "content_items"]
    assert item["type"] == "ltiResourceLink" and item["title"] == "blocktrace: " + explorable("decoder-block-lab").title
    assert item["url"] == lti_server.url("/explorables/decoder-block-lab?residual=replace&d=16")
    # the LMS launches the link it was given: the page opens in that state
    opened = good_launch(lti_server, lms, **{who.CLAIM + "target_link_uri": item["url"]})[2]
    assert urlsplit(opened.headers["Location"]).path == "/explorables/decoder-block-lab"
    assert "residual=replace&d=16&lti=" in opened.headers["Location"]
    again = requests.post(lti_server.url("/lti/pick"), data={
        "launch_id": launch_id, "route": "/explorables/decoder-block-lab", "state": ""})
    refused(again, "used already")


def test_the_picker_refuses_students_strangers_and_other_pages(lti_server: Server, lms: TestPlatform) -> None:
    refused(deep_linking_launch(lti_server, lms, roles=(LEARNER,)), "Only a course's instructors")
    refused(requests.post(lti_server.url("/lti/pick"), data={"launch_id": "lti1p3-launch-made-up", "route": "/"}),
            "There is no such page")
    refused(requests.post(lti_server.url("/lti/pick"), data={
        "launch_id": "lti1p3-launch-made-up", "route": "/explorables/block-floor"}), "used already")
    picker = deep_linking_launch(lti_server, lms)
    launch_id = _attribute(picker.text.split('name="launch_id"')[1], "value")
    elsewhere = requests.post(lti_server.url("/lti/pick"), data={
        "launch_id": launch_id, "route": "/explorables/block-floor", "state": lti_server.url("/explorables/x?a=1")})
    assert elsewhere.status_code == 200 and "another page" in elsewhere.text
    assert "<script>" not in requests.post(lti_server.url("/lti/pick"), data={
        "launch_id": launch_id, "route": "/explorables/block-floor", "state": "<script>" + "x" * 2100}).text


# --- the roster (Names and Role Provisioning Services) -------------------------------------------------

NRPS = "https://purl.imsglobal.org/spec/lti-nrps/claim/namesroleservice"


def test_a_teachers_launch_fills_the_class_with_the_lms_roster(lti_server: Server, lms: TestPlatform) -> None:
    lms.members = [
        {"user_id": "student-1", "roles": [LEARNER], "name": "Ada Lovelace", "status": "Active"},
        {"user_id": "student-2", "roles": [LEARNER], "given_name": "Alan", "family_name": "Turing"},
        {"user_id": "student-3", "roles": [LEARNER], "name": "<b>Grace</b>", "status": "Active"},
        {"user_id": "student-4", "roles": [LEARNER], "name": "Gone", "status": "Inactive"},
        {"user_id": "teacher-1", "roles": [INSTRUCTOR], "name": "Prof. Teacher", "status": "Active"},
    ]
    before = lms.token_requests
    answer = good_launch(lti_server, lms, sub="teacher-1", **{
        who.CLAIM + "roles": [INSTRUCTOR],
        NRPS: {"context_memberships_url": lms.url + "/memberships", "service_versions": ["2.0"]}})[2]
    assert answer.status_code == 303 and lms.token_requests == before + 1
    secret = lti_server.secret()
    course = who.class_for(secret, lms.issuer, lms.deployment_id, "course-101")
    with EventStore(default_url(lti_server.data_dir)) as store:
        names = {user: store.display_name(course, who.learner_for(secret, lms.issuer, user))
                 for user in ("student-1", "student-2", "student-3", "student-4", "teacher-1")}
    assert names == {"student-1": "Ada Lovelace", "student-2": "Alan Turing", "student-3": "<b>Grace</b>",
                     "student-4": None, "teacher-1": None}
    browser = requests.Session()
    browser.get(lti_server.url("/teacher/lti"), params={"lti": _token(answer)})
    room = browser.get(lti_server.url("/teacher"), params={"class": course}).text
    assert "Ada Lovelace" in room and "&lt;b&gt;Grace&lt;/b&gt;" in room and "<b>Grace</b>" not in room


def test_a_roster_the_lms_will_not_give_does_not_stop_the_launch(lti_server: Server, lms: TestPlatform) -> None:
    answer = good_launch(lti_server, lms, sub="teacher-1", **{
        who.CLAIM + "roles": [INSTRUCTOR],
        NRPS: {"context_memberships_url": lms.url + "/no-such-roster", "service_versions": ["2.0"]}})[2]
    assert answer.status_code == 303
    assert "LTI roster of class" in lti_server.log() and "Traceback" not in lti_server.log()


def test_a_learners_launch_keeps_where_their_scores_go(lti_server: Server, lms: TestPlatform) -> None:
    scopes = ["https://purl.imsglobal.org/spec/lti-ags/scope/lineitem",
              "https://purl.imsglobal.org/spec/lti-ags/scope/score"]
    answer = good_launch(lti_server, lms, sub="student-9", **{
        "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint": {"lineitems": lms.url + "/lineitems",
                                                                    "scope": scopes}})[2]
    assert answer.status_code == 303
    secret = lti_server.secret()
    learner = who.learner_for(secret, lms.issuer, "student-9")
    with EventStore(default_url(lti_server.data_dir)) as store:
        links = {(c, lid): link for c, lid, link in store.lti_links()}
    course = who.class_for(secret, lms.issuer, lms.deployment_id, "course-101")
    assert links[(course, learner)] == {"issuer": lms.issuer, "client_id": lms.client_id, "user_id": "student-9",
                                        "lineitems": lms.url + "/lineitems", "scope": scopes}


def test_the_access_log_keeps_no_launch_token(lti_server: Server, lms: TestPlatform) -> None:
    location = good_launch(lti_server, lms)[2].headers["Location"]
    assert requests.get(lti_server.url(location)).status_code == 200
    token = dict(parse_qsl(urlsplit(location).query))["lti"]
    log = lti_server.log()
    assert token not in log and quote(token, safe="") not in log and "?lti=…" in log
