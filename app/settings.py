"""The server's tunables: one `Settings`, read once from `BLOCKTRACE_*` environment variables.

    from blocktrace.app.settings import settings
    burst, per_second = settings().page_builds

As Bokeh's `bokeh.settings` and Panel's `pn.config` do, each setting has a type, a documented default and an
environment variable: `BLOCKTRACE_` and its name in capitals (`BLOCKTRACE_PAGE_BUILDS=300,4`). A pair is two
numbers with a comma; a yes/no is 1/0, true/false, yes/no or on/off. The environment is read the first time
`settings()` is called (`blocktrace serve` calls it at start, before it forks its workers) and never again.

Adding a setting is one line of `Settings`: its name, type, default and meaning; and a row of the table in
docs/settings.md (a test checks that every setting has one). Code takes its numbers from `settings()` when it
builds what uses them; a test passes its own numbers to what it builds, or, for code that reads the settings
itself, sets them for a while: `with overridden(page_builds=(1, 0.001)): ...`.
"""

from __future__ import annotations

import os
import typing
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, fields, replace
from typing import Any

__all__ = ["ENV_PREFIX", "Settings", "env_name", "overridden", "settings"]

ENV_PREFIX = "BLOCKTRACE_"


def _setting(default: Any, doc: str) -> Any:
    return field(default=default, metadata={"doc": doc})


@dataclass(frozen=True)
class Settings:
    """Every tunable of the server, with its default; `Settings.from_environ()` reads the `BLOCKTRACE_*` ones set."""

    # Per-client limits, counted in tables every worker of --num-procs shares (app/server/rate_limits.py)
    limit_table_keys: int = _setting(10_000, "clients each shared limit table holds; a client given up starts afresh")
    limit_lock_timeout: float = _setting(0.1, "seconds a request waits for a limit table's lock, then is let through")
    new_learners: tuple[float, float] = _setting((1000.0, 1.0), "new learners per client at once, then per second "
                                                              "(a school behind one router is one client)")
    page_builds: tuple[float, float] = _setting((1000.0, 4.0), "page builds per client at once, then per second")
    pending_eager: int = _setting(2, "pages per client built before their browser loads them; more wait for it")
    report_gap: float = _setting(1.0, "seconds between two exercise reports of one learner for one exercise")
    in_page_gap: float = _setting(3.0, "seconds between two checks of one learner's in-page exercise (a guess "
                                       "per second would soon find the lines by trying)")
    # The teacher login's limits on wrong passwords (app/classroom/login_guard.py)
    login_failures: int = _setting(5, "wrong teacher passwords a client may send in a window, then it is refused")
    login_failures_total: int = _setting(30, "wrong teacher passwords from all clients in a window, then all refused")
    login_window: float = _setting(60.0, "seconds a wrong teacher password counts against its client and the total")
    login_clients: int = _setting(1024, "clients the wrong-password table holds; the one that failed longest ago goes")
    # The tuning layer (app/tuning)
    tuning_without: str = _setting("", "tuning patches left out, by name, comma-separated (to measure what one buys)")
    # Closed pages' memory (app/server/session_memory.py)
    session_reclaim: bool = _setting(True, "a closed page's own cycles taken apart as it closes (session_reclaim.py); "
                                           "off, the quiet-time full collection frees it")
    young_collection_every: int = _setting(20_000, "allocations between collections of the young generation "
                                                   "(Python's default: 700)")
    memory_check_every: float = _setting(1.0, "seconds between looks at closed pages and the class's activity")
    freeze_every: float = _setting(5.0, "seconds between freezes of what was made since (its garbage collected first)")
    quiet_after: float = _setting(10.0, "seconds in which no browser changed anything: the class is quiet")
    long_collection_ms: float = _setting(100.0, "milliseconds: a collection that holds the server longer is logged")
    reclaim_gap: float = _setting(60.0, "seconds: at most one full reclaim in this long, even in a quiet class")
    reclaim_forced_after: int = _setting(50, "closed pages left behind that force the full reclaim in a busy class ...")
    reclaim_forced_share: float = _setting(1.0, "... once they are also this share of the pages still open")
    housekeeping_after: int = _setting(100, "pages freed by their own step after which a quiet class's full reclaim "
                                            "also runs (for what each leaves)")
    reclaim_figures_kept: int = _setting(1000, "the last closed pages' own reclaim figures kept (/health/memory)")
    take_apart_tries: int = _setting(3, "tries to take a closed page apart while something still holds it ...")
    take_apart_retry: float = _setting(2.0, "... seconds apart")
    reclaim_walk_limit: int = _setting(200_000, "objects a closed page's walk may reach, else nothing is taken apart")
    reclaim_step_objects: int = _setting(10_000, "objects walked per step of a closed page's reclaim (15-25 ms)")
    warm_up: bool = _setting(True, "every page built once at start (about 6 s), so the first student's page waits for "
                                   "no imports; off starts at once (the test suite's servers)")
    url_write_ms: int = _setting(500, "milliseconds without a control change before the browser's address is "
                                      "written (once per burst of changes, after its last)")
    # The event loop's pauses, reported by /health/memory (app/server/loop_pauses.py)
    loop_probe_every: float = _setting(0.05, "seconds between looks at how late the event loop runs a timer")
    loop_pause_kept_ms: float = _setting(20.0, "milliseconds: a pause this long or longer is kept for /health/memory")
    loop_pauses_kept: int = _setting(2000, "the newest long pauses kept")
    # Page builds taking turns (explorables/components/build_turns.py; set by app/server/build_pacing.py)
    build_gap: float = _setting(0.02, "seconds the loop is left to other work after each build step ...")
    build_gap_share: float = _setting(1.0, "... or, while more steps wait, this share of the step's time, if longer")
    build_behind: float = _setting(0.01, "seconds late a rest's timer fires when the loop is still behind: rest on ...")
    build_busy_share: float = _setting(0.2, "... if the loop's thread was busy this share of the rest")
    build_max_rest: float = _setting(0.5, "seconds after a build step the next one starts at the latest")
    build_stuck: float = _setting(5.0, "seconds after which a step not reported done frees the queue")
    # Races of train-the-block, trained in worker processes (explorables/train_the_block/runner.py)
    race_workers: int = _setting(0, "worker processes that train races (0: one per core)")
    race_slice_steps: int = _setting(50, "training steps one slice of a race takes at most ...")
    race_slice_cpu: float = _setting(0.08, "... or the CPU seconds after which it ends")
    max_races: int = _setting(64, "races training at once in one server process; a new one beyond is refused")
    race_niceness: int = _setting(10, "how much nicer than the server the race workers run (os.nice), so the "
                                      "students' sliders come first")
    lti_grades_every: float = _setting(10.0, "seconds between two rounds of scores sent to the LMSs' gradebooks "
                                             "(app/lti/grades.py)")
    xapi_every: float = _setting(2.0, "seconds between two rounds of learning records sent to the LRS "
                                      "(app/xapi/delivery.py)")
    xapi_username: str = _setting("", "the user blocktrace posts learning records to the LRS as (--xapi-endpoint)")
    xapi_password: str = _setting("", "... and its password")
    xapi_names: bool = _setting(False, "learners' names go into their learning records (off: an account id only)")
    race_store_mb: float = _setting(64.0, "megabytes of computed races kept in the data folder (races/, filled by "
                                          "`blocktrace warm` and by every race played); the least recently used go "
                                          "first; 0 keeps none")
    race_session_work: int = _setting(480_000, "floor-steps one page may train over all its races (a step of an "
                                               "n-floor model counts n; the default is 20 races of 12 floors)")
    # How often an open page looks for news (app/lessons/page.py, app/server/session_setup.py)
    pace_poll_ms: int = _setting(3000, "milliseconds between a lesson page's looks for the teacher's hold or release")
    exercise_poll_ms: int = _setting(2000, "milliseconds between a lesson page's looks for `blocktrace check` results")
    reveal_poll_ms: int = _setting(4000, "milliseconds between an explorable page's looks for the class's pace, "
                                         "push and revealed answers")

    # The class's store (app/classroom): its thread, the outbox of writes waiting for it, each page's recorder
    store_refresh: float = _setting(4.0, "seconds between the store thread's retries of waiting writes and its reads")
    store_stalled_after: float = _setting(5.0, "seconds a database call may run before it counts as not answering")
    results_window: float = _setting(60.0, "seconds back each refresh reads exercise results stored by any process")
    results_kept: int = _setting(10_000, "learners' newest exercise results a process keeps in memory")
    outbox_events: int = _setting(100_000, "writes waiting for the database, at most; past that a write is refused")
    outbox_chars: int = _setting(20_000_000, "characters of the writes waiting for the database, at most")
    coalesce_ms: int = _setting(1000, "milliseconds within which a page's control changes are stored as one event")
    session_store_calls: int = _setting(8, "store calls one page may have waiting on the store thread")
    session_waiting_slots: int = _setting(32, "kinds of events one page may hold back beyond those; then the oldest go")
    commit_retry_ms: int = _setting(2000, "milliseconds between tries of a prediction the store did not take yet")
    sqlite_busy_timeout_ms: int = _setting(10_000, "milliseconds an SQLite write waits for another process's lock")
    db_pool_timeout: float = _setting(15.0, "seconds a thread waits for a free pooled database connection")
    db_connect_timeout: int = _setting(5, "seconds before an unreachable PostgreSQL host counts as down")

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """The defaults, with each setting whose `BLOCKTRACE_*` variable is set in `environ` (os.environ) read
        from it; ValueError naming the variable if its value is not of the setting's type."""
        environ = os.environ if environ is None else environ
        types = typing.get_type_hints(cls)
        return cls(**{f.name: _parse(environ[env_name(f.name)], types[f.name], env_name(f.name))
                      for f in fields(cls) if env_name(f.name) in environ})


def env_name(setting: str) -> str:
    """The environment variable of a setting: `page_builds` is BLOCKTRACE_PAGE_BUILDS."""
    return ENV_PREFIX + setting.upper()


_current: Settings | None = None


def settings() -> Settings:
    """The server's settings: read from the environment on the first call, the same object after."""
    global _current
    if _current is None:
        _current = Settings.from_environ()
    return _current


@contextmanager
def overridden(**values: Any) -> Iterator[Settings]:
    """For a test: `settings()` gives these values (the rest as before) until the block ends."""
    global _current
    before = _current
    _current = replace(settings(), **values)
    try:
        yield _current
    finally:
        _current = before


# Private API


_TRUE, _FALSE = {"1", "true", "yes", "on"}, {"0", "false", "no", "off"}


def _parse(text: str, kind: Any, name: str) -> Any:
    """`text` as a value of type `kind` (bool, int, float, str, or a tuple of those)."""
    if typing.get_origin(kind) is tuple:
        parts, kinds = text.split(","), typing.get_args(kind)
        if Ellipsis in kinds:
            kinds = (kinds[0],) * len(parts)
        if len(parts) != len(kinds):
            raise ValueError(f"{name}: expected {len(kinds)} values separated by commas, got {text!r}")
        return tuple(_parse(part, each, name) for part, each in zip(parts, kinds, strict=True))
    value = text.strip()
    if kind is bool:
        if value.lower() not in _TRUE | _FALSE:
            raise ValueError(f"{name}: expected 1 or 0 (true or false), got {text!r}")
        return value.lower() in _TRUE
    if kind is str:
        return text
    try:
        return kind(value)
    except ValueError:
        raise ValueError(f"{name}: expected {'a whole number' if kind is int else 'a number'}, got {text!r}") from None
