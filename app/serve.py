"""`blocktrace serve`: the explorables and lessons for one browser or a whole classroom."""

from __future__ import annotations

import argparse
import contextlib
import ipaddress
import logging
import multiprocessing
import os
import secrets
import signal
import socket
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

__all__ = ["DATA_DIR_NAME", "PASSWORD_ENV", "READY_LINE", "SECRET_ENV", "add_serve_arguments", "banner", "child_pids",
           "lan_addresses", "run_serve"]


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--port", type=int, default=5006, help="port to listen on (default 5006)")
    parser.add_argument("--address", default="127.0.0.1",
                        help="address to listen on (default 127.0.0.1: this computer only; 0.0.0.0 lets the "
                             "classroom's network in, and the start-up message then lists this computer's addresses "
                             "for students)")
    parser.add_argument("--allow-websocket-origin", action="append", default=[], metavar="HOST[:PORT]",
                        help="a host students' browsers use to reach this server, or a page embedding it; "
                             "repeat for several")
    parser.add_argument("--num-procs", type=int, default=1, metavar="N",
                        help="worker processes sharing the port (default 1)")
    parser.add_argument("--data-dir", default=None, metavar="DIR",
                        help="where the class database, the cookie secret and the teacher password live "
                             f"(default ./{DATA_DIR_NAME})")
    parser.add_argument("--db", default=None, metavar="URL",
                        help="database URL, e.g. postgresql+psycopg://user:pw@host/db "
                             "(default: SQLite in the data dir)")
    parser.add_argument("--teacher-password", default=None, metavar="PW",
                        help=f"password of the teacher's room, /teacher (or set {PASSWORD_ENV}; this flag comes "
                             "first). Without either, the server makes one the first time, keeps it in the data "
                             "folder (file teacher-password) and shows it each time it starts")
    parser.add_argument("--new-password", action="store_true",
                        help="replace the teacher password kept in the data folder with a new one (logs every "
                             "browser out of the teacher's room)")
    parser.add_argument("--access-log", action="store_true",
                        help="log every request (Tornado's access log and Bokeh's websocket lines); by default only "
                             "warnings and errors are logged")
    parser.add_argument("--no-classroom", action="store_true", help="record nothing (no database, no /teacher)")
    parser.add_argument("--no-tuning", action="store_true",
                        help="run on stock Panel, Bokeh and Tornado: apply none of app/tuning's patches")
    parser.add_argument("--unused-session-lifetime", type=int, default=UNUSED_LIFETIME_MS, metavar="MS",
                        help="how long the page of a closed tab (or of a request no browser followed) is kept "
                             f"before its memory is freed, in milliseconds (default {UNUSED_LIFETIME_MS}, Bokeh's)")
    parser.add_argument("--xapi-endpoint", default=None, metavar="URL",
                        help="send learning records (xAPI 1.0.3) to this LRS, e.g. https://lrs.example.edu/xAPI/, as "
                             "BLOCKTRACE_XAPI_USERNAME with BLOCKTRACE_XAPI_PASSWORD")
    parser.add_argument("--public-url", default=None, metavar="URL",
                        help="the address students reach this server at, for learning records' activity ids "
                             "(default http://ADDRESS:PORT)")
    parser.add_argument("--use-xheaders", action="store_true",
                        help="trust X-Forwarded-For from a load balancer in front (for the teacher-login limit)")


def websocket_origins(args: argparse.Namespace, lan: tuple[str, ...] | None = None) -> list[str]:
    """Origins the server accepts: the local names for its own port, the address it listens on, and on every
    interface (--address 0.0.0.0) this computer's network addresses, the ones the banner tells students to open;
    plus any given. `lan`: those addresses (found if None)."""
    origins = [f"localhost:{args.port}", f"127.0.0.1:{args.port}"]
    if args.address in ("0.0.0.0", "::", ""):
        origins += [f"{_url_host(a)}:{args.port}" for a in (lan_addresses() if lan is None else lan)]
    elif args.address not in ("127.0.0.1", "localhost"):
        origins.append(f"{_url_host(args.address)}:{args.port}")
    return list(dict.fromkeys(origins + list(args.allow_websocket_origin)))


def session_expiry(args: argparse.Namespace) -> dict[str, int]:
    """Bokeh's settings for discarding sessions no browser holds: the lifetime given, checked at least as often."""
    lifetime = args.unused_session_lifetime
    return {"unused_session_lifetime_milliseconds": lifetime,
            "check_unused_sessions_milliseconds": min(CHECK_UNUSED_MS, max(MIN_CHECK_MS, lifetime))}


UNUSED_LIFETIME_MS = 15_000  # Bokeh's defaults
CHECK_UNUSED_MS = 17_000
MIN_CHECK_MS = 250
DATA_DIR_NAME = "blocktrace-data"
PASSWORD_ENV = "BLOCKTRACE_TEACHER_PASSWORD"
SECRET_ENV = "BLOCKTRACE_SECRET"  # the same value on every machine behind one load balancer


def xapi_target(args: argparse.Namespace):
    """The LRS learning records go to (--xapi-endpoint), or None."""
    if not args.xapi_endpoint:
        return None
    from blocktrace.app.settings import settings
    from blocktrace.app.xapi.delivery import XapiTarget

    public = (args.public_url or f"http://{args.address}:{args.port}").rstrip("/")
    for name, url in (("--xapi-endpoint", args.xapi_endpoint), ("--public-url", public)):
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"{name} must be an http:// or https:// URL, got {url!r}")
    found = settings()
    return XapiTarget(args.xapi_endpoint, found.xapi_username, found.xapi_password, public, found.xapi_names)


@dataclass(frozen=True)
class Classroom:
    """What `classroom_setup` made: the routes of the teacher's room and the rest, the server's secret, the data
    folder, and the teacher password with where it came from (`source`: a flag, a variable or the kept file)."""

    routes: list
    secret: bytes
    data_dir: Path
    password: str
    source: str


def teacher_password(args: argparse.Namespace, data_dir: Path) -> tuple[str, str]:
    """The teacher password and where it comes from: --teacher-password, else PASSWORD_ENV, else the one kept in
    the data folder (made the first time, and again with --new-password)."""
    from blocktrace.app.classroom.login_guard import PASSWORD_FILE, load_or_create_password

    for given, source in ((args.teacher_password, "--teacher-password"), (os.environ.get(PASSWORD_ENV), PASSWORD_ENV)):
        if given:
            if args.new_password:
                raise ValueError(f"--new-password makes a password of its own; the password is given by {source}")
            return given, source
    return load_or_create_password(data_dir, new=args.new_password), str(data_dir / PASSWORD_FILE)


def classroom_setup(args: argparse.Namespace) -> Classroom | None:
    """Configure the store and the teacher's room (None with --no-classroom)."""
    from blocktrace.app.classroom.identity import load_or_create_secret
    from blocktrace.app.classroom.learner import ClassroomSettings, configure
    from blocktrace.app.classroom.store import default_url
    from blocktrace.app.classroom.teacher import Guard, teacher_patterns
    from blocktrace.app.server.hardening import private_data_dir

    if args.no_classroom:
        configure(None)
        return None
    os.umask(0o077)  # every file this server makes (database, journal, secret, password) is its own alone
    data_dir = private_data_dir(Path(args.data_dir or DATA_DIR_NAME).resolve())
    secret_text = os.environ.get(SECRET_ENV)
    secret = secret_text.encode("utf-8") if secret_text else load_or_create_secret(data_dir)
    configure(ClassroomSettings(db_url=args.db or default_url(data_dir), secret=secret, data_dir=data_dir,
                                xapi=xapi_target(args)))
    # Made here, before pn.serve forks any --num-procs workers: they all check the same password.
    password, source = teacher_password(args, data_dir)
    from blocktrace.app.exercises.handlers import exercise_patterns

    routes = teacher_patterns(Guard(password, secret), websocket_origins(args)) + exercise_patterns(secret, data_dir)
    return Classroom(routes, secret, data_dir, password, source)


READY_LINE = "blocktrace is ready"  # the banner's first line: printed once a page can be served


def _url_host(address: str) -> str:
    """`address` as the host of a URL: an IPv6 address in brackets."""
    return f"[{address}]" if ":" in address else address


@cache  # read once: the websocket origins, the join link and the banner name the same addresses
def lan_addresses() -> tuple[str, ...]:
    """This computer's IPv4 addresses on its networks (not loopback): the one it reaches other networks from, and
    those its host name resolves to."""
    found = []
    with contextlib.suppress(OSError), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("192.0.2.1", 9))  # a UDP "connect" sends nothing; it only picks the outgoing address
        found.append(probe.getsockname()[0])
    with contextlib.suppress(OSError):
        found += [info[4][0] for info in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)]
    return tuple(a for a in dict.fromkeys(found) if not ipaddress.ip_address(a).is_loopback
                 and not ipaddress.ip_address(a).is_unspecified)


def banner(address: str, port: int, classroom: Classroom | None, lan: tuple[str, ...] | None = None) -> str:
    """What `blocktrace serve` prints once it can serve a page: where students and the teacher go, the password
    (unless the teacher gave it), the data folder and how to stop. `lan`: this computer's addresses (found if None)."""
    everywhere = address in ("0.0.0.0", "::", "")
    local = address in ("127.0.0.1", "localhost", "::1")
    here = "127.0.0.1" if everywhere or local else _url_host(address)
    if everywhere:
        hosts = lan if lan is not None else lan_addresses()
        students = [f"http://{h}:{port}/" for h in hosts] or [
            f"http://THIS-COMPUTER'S-ADDRESS:{port}/ (no network address found: is it connected?)"]
    else:
        students = [f"http://{_url_host(address)}:{port}/" + (
            "   (this computer only: start with --address 0.0.0.0 to let the class in)" if local else "")]
    lines = [f"{READY_LINE} (Ctrl-C stops it)."]
    lines += [f"  {'Students open:' if n == 0 else '':<15} {url}" for n, url in enumerate(students)]
    if classroom is None:
        lines.append(f"  {'Records:':<15} none (--no-classroom): no teacher's room, nothing is kept")
    else:
        lines.append(f"  {'Teacher room:':<15} http://{here}:{port}/teacher")
        if classroom.source in ("--teacher-password", PASSWORD_ENV):
            lines.append(f"  {'Password:':<15} the one given by {classroom.source}")
        else:
            lines.append(f"  {'Password:':<15} {classroom.password}   (kept in {classroom.source}; "
                         "--new-password makes a new one)")
        lines.append(f"  {'Data folder:':<15} {classroom.data_dir}")
    return "\n".join(lines)


def child_pids(parent: int) -> list[int]:
    """The processes `parent` started (for the server: its --num-procs workers), from /proc."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as stat:
                    ppid = int(stat.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            if ppid == parent:
                found.append(int(entry))
    return found


def stop_workers_with_parent() -> None:
    """With --num-procs, SIGTERM to the parent also stops the workers it forked.

    Tornado's parent process only waits for its workers and restarts any that die; killed by SIGTERM,
    it left them serving on the port. The handler is inherited by the workers, where it does what
    SIGTERM always did.
    """
    parent = os.getpid()

    def terminate(signum: int, _frame) -> None:
        if os.getpid() != parent:  # a worker
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        for pid in child_pids(parent):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, terminate)


def race_data_dir(args: argparse.Namespace, classroom: Classroom | None) -> Path | None:
    """Where computed races are kept: the class's data folder; with --no-classroom, only a --data-dir given."""
    if classroom is not None:
        return classroom.data_dir
    return Path(args.data_dir).resolve() if args.data_dir else None


def run_serve(args: argparse.Namespace) -> int:
    import panel as pn
    from bokeh.util.logconfig import basicConfig

    from blocktrace.app.server import quiet_logs
    from blocktrace.app.server.build_limits import share_build_limits
    from blocktrace.app.server.build_pacing import paced_applications
    from blocktrace.app.server.hardening import server_settings
    from blocktrace.app.server.page_requests import page_requests, session_signing
    from blocktrace.app.server.routes import page_titles, routes, server_kwargs
    from blocktrace.app.settings import settings
    from blocktrace.app.signing import cookie_secret

    if not 1 <= args.port <= 65535 and args.port != 0:
        sys.stderr.write(f"error: port must be between 1 and 65535, got {args.port}\n")
        return 2
    if args.num_procs < 1:
        sys.stderr.write("error: --num-procs must be at least 1\n")
        return 2
    if args.unused_session_lifetime < 1:
        sys.stderr.write("error: --unused-session-lifetime must be at least 1 millisecond\n")
        return 2
    try:
        settings()  # the BLOCKTRACE_* settings, read once here: the workers inherit them
    except ValueError as error:
        sys.stderr.write(f"error: {error}\n")
        return 2
    # Build every page once at start, so the first student does not wait for imports. Bokeh refuses to fork
    # workers once application code has run, so with --num-procs each worker warms up on its first page.
    warm = args.num_procs == 1 and settings().warm_up
    # Said at once, so a teacher waiting for the banner knows the server is on its way
    why = ": it builds every page once first, so that the first students do not wait (a few seconds, longer on a " \
          "busy computer)" if warm else ""
    print(f"blocktrace is starting{why} ...", flush=True)
    # Bokeh's own wrapper: one handler and format for every logger (Bokeh's included, which otherwise has its own)
    basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    quiet_logs.install(access_log=args.access_log)
    try:
        classroom = classroom_setup(args)
    except (ValueError, OSError) as error:
        sys.stderr.write(f"error: {error}\n")
        return 2
    if args.num_procs > 1:
        stop_workers_with_parent()
    try:
        pages = routes(tuned=not args.no_tuning)  # applies the tuning layer first, so server_kwargs sees it
    except ValueError as error:  # BLOCKTRACE_TUNING_WITHOUT names no patch
        sys.stderr.write(f"error: BLOCKTRACE_TUNING_WITHOUT: {error}\n")
        return 2
    kwargs = server_kwargs()
    kwargs["extra_patterns"] = kwargs["extra_patterns"] + (classroom.routes if classroom else [])
    secret = classroom.secret if classroom else secrets.token_bytes(32)
    if classroom is not None:  # an LMS's launches land in the class database
        from blocktrace.app.lti.handlers import lti_patterns
        from blocktrace.app.lti.platforms import FrameOrigins

        kwargs["extra_patterns"] += lti_patterns(classroom.data_dir, frozenset(pages))
        kwargs.update(server_settings(args.allow_websocket_origin, FrameOrigins(classroom.data_dir)))
    else:
        kwargs.update(server_settings(args.allow_websocket_origin))
    # Signed sessions (a key from the classroom secret, so a reconnect after a restart still works), and
    # every page request tidied: no session chosen by the client, the learner cookie set by the server.
    kwargs.update(session_signing(secret))
    kwargs["transforms"] = kwargs["transforms"] + [page_requests(classroom.secret if classroom else None, pages)]
    kwargs.update(session_expiry(args))
    share_build_limits()  # like every per-client table, made before pn.serve forks the workers, so they share it
    # Shared by the workers Tornado forks (as rate_limits.py's locks are): the first one listening prints the banner
    announced = multiprocessing.get_context("fork").Value("b", False)
    server = pn.serve(
        # each session built in its turn (build_pacing.py); computed races kept in the data folder
        paced_applications(pages, page_titles(pages), race_data_dir(args, classroom)),
        port=args.port,
        address=args.address,
        websocket_origin=websocket_origins(args),
        num_procs=args.num_procs,
        use_xheaders=args.use_xheaders,
        warm=warm,
        cookie_secret=cookie_secret(secret),  # Tornado's signed cookies: the teacher's login
        show=False,
        verbose=False,  # Panel's "Launching server at …": the banner says it, once the server answers
        start=False,
        **kwargs,
    )

    def announce() -> None:
        """Print the banner: this runs on the server's loop, so it is listening and a request is answered."""
        with announced.get_lock():
            if announced.value:
                return
            announced.value = True
        print(banner(args.address, server.port, classroom), flush=True)

    server.io_loop.add_callback(announce)
    server.start()
    server.io_loop.start()
    return 0
