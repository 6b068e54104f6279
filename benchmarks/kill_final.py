"""`kill -9` of the server while students commit: answers shown as final, and how many were lost.

usage: python benchmarks/kill_final.py [--kills 20] [--students 8] [--offsets 0,0.05,0.2,0.5,1,2,final]
                                       [--flood 3000] [--flood-every 2]

One data directory; for each kill a server is started on it (`python -m blocktrace.app.cli serve`),
--students learners open the block trace over the Bokeh websocket (a page request with their
signed cookie, as a returning browser makes it) and commit a prediction at once; the server is
killed with SIGKILL the offset after the last commit was sent (the offsets are cycled; 0 is right
after). Every --flood-every'th kill, one more student first presses "Check answer" --flood times on
the block floor (alternating two answers). Then the server restarts on the same data directory
and each student reopens the page: an answer their page had shown as final and the store does not
hold is lost; a gate that disagrees with the store (or, with nothing stored, cannot be committed
to final) is inconsistent. The scenario is tests/app/kill_scenario.py (the test runs a few kills).

Prints one line per kill and the totals. Run it against another checkout by putting that
checkout's import root first on PYTHONPATH (the figures before a change).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.app.kill_scenario import Round, run_kills  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--students", type=int, default=8)
    parser.add_argument("--offsets", default="0,0.05,0.2,0.5,1,2,final",
                        help="seconds after the last commit, cycled ('final': once every page shows final)")
    parser.add_argument("--flood", type=int, default=3000, help='"Check answer" presses of one more student')
    parser.add_argument("--flood-every", type=int, default=2, help="flood before every n-th kill (0: never)")
    args = parser.parse_args()
    offsets = [None if x == "final" else float(x) for x in args.offsets.split(",")]
    plan = [offsets[n % len(offsets)] for n in range(args.kills)]
    floods = [args.flood if args.flood_every and n % args.flood_every == args.flood_every - 1 else 0
              for n in range(args.kills)]
    started = time.perf_counter()
    print(f"{args.kills} kills, {args.students} students each; offsets {offsets} s; flood {args.flood} presses "
          f"every {args.flood_every or 'never'}", flush=True)
    print(f"{'kill':>4} {'offset s':>8} {'flood':>5} {'final':>5} {'lost':>4} {'stored, not final':>17} "
          f"{'inconsistent':>12}", flush=True)
    rounds: list[Round] = []

    def report(result: Round) -> None:
        n = len(rounds)
        rounds.append(result)
        offset = "final" if result.offset_s is None else f"{result.offset_s:.2f}"
        print(f"{n + 1:>4} {offset:>8} {floods[n]:>5} {result.shown_final:>5} {result.lost:>4} "
              f"{result.stored_not_shown:>17} {result.inconsistent:>12}", flush=True)
        for problem in result.problems:
            print(f"       {problem}", flush=True)

    with tempfile.TemporaryDirectory(prefix="kill-final-") as tmp:
        run_kills(Path(tmp), plan, args.students, floods, report=report)
    shown = sum(r.shown_final for r in rounds)
    print(f"\ntotal: {len(rounds)} kills, {len(rounds) * args.students} commits, {shown} shown as final, "
          f"{sum(r.lost for r in rounds)} of those lost, {sum(r.stored_not_shown for r in rounds)} stored but not "
          f"yet shown final, {sum(r.inconsistent for r in rounds)} inconsistent gates after the restart "
          f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
