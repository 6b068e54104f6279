"""The tuning layer: every patch of Panel, Bokeh or Tornado internals, and nothing else.

The rest of blocktrace runs on stock Panel; this folder makes it faster (and mends two embed bugs).
A reader can skip it, and `blocktrace serve --no-tuning` switches all of it off. Each patch is one
module here with an `apply()`; `PATCHES` below is the one table of what each saves and the library
versions it was verified on (see "Verified on" below). `apply()` of this
package applies a patch only when every library it touches is within its verified range; otherwise
the patch stands down, one log line says so, and that part of the app runs on the stock path.

Each patch, what it changes, and what it saves as measured (the module's docstring tells how):
- design_params: Panel asks the design for stylesheets only when they change; on Panel 1.10 (Python
  3.12+) a drawn block trace's change costs 1.42 ms of server CPU instead of 2.17 (1.53x;
  `benchmarks/browser_view.py --variants each`); on Panel 1.9 the difference is within noise.
- socket_tuning: TCP_NODELAY on websockets and the frames of one message corked together; up to
  40 ms of delayed-acknowledgement wait per update.
- early_page: a page's HTML goes out before its session is built; the HTML arrives after 8-13 ms
  instead of 186-286 ms.
- compressed_static: scripts and stylesheets gzipped once per process for browsers on other machines;
  0.73 MB instead of 2.7 MB, and over 20 Mbit/s 1.3 s to an interactive page instead of 2.3 s
  (stop 12's measurement; README gives the latest).
- work_on_loop: Bokeh 3.10 builds documents and applies browser changes on the loop's thread, not in six
  threads fighting over the GIL; with 30 of 100 students reopening on Python 3.13, the others' longest
  wait 242-303 ms instead of 8.1 s (Bokeh 3.9 does this work on the loop's thread already).
- panel_fixes: script-tag embeds get absolute URLs and Panel's CSS from this server (a fix: offline
  embeds would otherwise ask Panel's CDN).

Gone with the pages of many server-side models (issue 39): update_serializer, lean_properties,
container_owners, shared_stylesheets, control_events, live_html and first_load. On the browser-drawn
pages none of them bought 1.3x on any figure: CPU a change and memory a session
(`benchmarks/browser_view.py --variants each`), the latency figures (`benchmarks/latency.py
--compare-without`). shared_stylesheets halved the block trace's document (194 KB to 106 KB), but the page
was interactive no sooner: 0.97x here, 1.06x over 20 Mbit/s. first_load (no es-module-shims on the pages) made
the block trace interactive 1.12x sooner (670 against 750 ms, quiet, `--compare-without first_load`); without it
the page is 1.08x the empty Panel page, inside that figure's aim. The closing note of issue 39 has the table.

Verified on (the ranges in `PATCHES`): Panel 1.9.0 to 1.10, Bokeh 3.9.1 to 3.10, Tornado 6.2 to 6.6.
CI runs each patch's own tests (tests/app) on Python 3.11 with Panel 1.9.4 and Bokeh
3.9.2 and on Python 3.13 with Panel 1.10 and Bokeh 3.10; on the lowest versions pyproject.toml declares
(Panel 1.9.0, Bokeh 3.9.1, Tornado 6.3) it runs the unit tests and every page of the tuned
server in Chromium.

`benchmarks/latency.py --compare-tuning` measures the tuned and the stock server in one run.

UPSTREAM.md says, for each patch, the upstream issue or pull request that would retire it (or the
text of the one to open).
"""

from __future__ import annotations

import importlib
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version

log = logging.getLogger(__name__)

# (lowest verified, highest verified minor): a release in [lowest, next minor after highest) is in range.
PANEL = ("1.9.0", "1.10")
BOKEH = ("3.9.1", "3.10")
TORNADO = ("6.2", "6.6")


@dataclass(frozen=True)
class Patch:
    name: str  # module in this package
    libraries: dict[str, tuple[str, str]]  # distribution -> verified range


PATCHES: tuple[Patch, ...] = (
    Patch("design_params", {"panel": PANEL}),
    Patch("socket_tuning", {"panel": PANEL, "tornado": TORNADO}),
    Patch("early_page", {"panel": PANEL, "bokeh": BOKEH}),
    Patch("compressed_static", {"bokeh": BOKEH, "tornado": TORNADO}),
    Patch("panel_fixes", {"panel": PANEL}),
    Patch("work_on_loop", {"bokeh": BOKEH}),
)

_applied: list[str] = []
_decided = False


def release(text: str) -> tuple[int, ...]:
    """The numeric release of a version string: '3.10.2' -> (3, 10, 2); '1.10.0rc1' -> (1, 10, 0)."""
    match = re.match(r"\d+(?:\.\d+)*", text)
    return tuple(int(part) for part in match.group(0).split(".")[:3]) if match else ()


def within(found: str, verified: tuple[str, str]) -> bool:
    """Whether `found` is at least the lowest verified release and no newer than the highest verified minor."""
    lowest, highest = (release(v) for v in verified)
    have = release(found)
    return have >= lowest and have[: len(highest)] <= highest


def installed(distribution: str) -> str | None:
    try:
        return version(distribution)
    except PackageNotFoundError:
        return None


def out_of_range(patch: Patch, version_of: Callable[[str], str | None] = installed) -> list[str]:
    """The libraries whose installed version the patch was not verified on, as 'name X (verified A to B.x)'."""
    problems = []
    for name, verified in patch.libraries.items():
        found = version_of(name)
        if found is None or not within(found, verified):
            problems.append(f"{name} {found} (verified {verified[0]} to {verified[1]}.x)")
    return problems


def stand_down_line(name: str, reason: str) -> str:
    return f"tuning: {name} stands down: {reason}; the stock path runs instead"


def apply(enabled: bool = True, version_of: Callable[[str], str | None] = installed,
          without: tuple[str, ...] = ()) -> list[str]:
    """Apply every patch whose libraries are in range (once per process), but those named in `without` (to
    measure what one patch buys: benchmarks/browser_view.py); returns the names applied.

    The first call decides: later calls return the same list, whatever they ask. A patch outside its
    verified range, or whose apply() finds an internal gone, logs one line and is left out.
    """
    global _decided
    unknown = set(without) - {patch.name for patch in PATCHES}
    if unknown:
        raise ValueError(f"no tuning patch named {', '.join(sorted(unknown))}")
    if _decided:
        return list(_applied)
    _decided = True
    if not enabled:
        log.info("tuning: off (--no-tuning); Panel, Bokeh and Tornado run unpatched")
        return []
    for patch in PATCHES:
        if patch.name in without:
            log.info("tuning: %s left out", patch.name)
            continue
        problems = out_of_range(patch, version_of)
        if problems:
            log.warning(stand_down_line(patch.name, ", ".join(problems)))
            continue
        try:
            importlib.import_module(f"{__name__}.{patch.name}").apply()
        except (ImportError, AttributeError) as error:  # an internal it needs has moved
            log.warning(stand_down_line(patch.name, f"{type(error).__name__}: {error}"))
            continue
        _applied.append(patch.name)
    log.info("tuning: applied %s", ", ".join(_applied) or "nothing")
    return list(_applied)


def applied() -> list[str]:
    return list(_applied)


def is_applied(name: str) -> bool:
    return name in _applied
