"""What one refresh of the teacher's dashboard costs the server with a class of 100 students.

usage: python benchmarks/teacher_roster.py [--students 100] [--events 60] [--rounds 15]

Fills a fresh SQLite store (in a temporary folder) with a class that has worked through the first lesson:
each student a name, a committed prediction, `--events` control changes, two checkpoint answers, an
experiment, an exercise result and an explanation (about 66 rows each, 6,600 for the class). Then times,
in this process, what the dashboard's GET does on its worker thread: the three lessons' summaries (the
store reads) and the HTML built from them (teacher_view). Prints the median and the largest of the
rounds, and the page's size. The page refreshes itself every 5 s, so the median over 5 s is the share of
one core the open dashboard keeps busy.

Measured on 2026-12-01 (2-core machine, helpers' tests running beside it): 100 students, 6,600 events:
median 42 ms, max 230 ms over 15 rounds, a 45 KB page body, 0.8 % of one core at one refresh per 5 s.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT.parent))  # so `blocktrace` imports from a checkout that is not installed

from blocktrace.app.classroom.store import EventStore, new_event_id  # noqa: E402
from blocktrace.app.classroom.teacher_view import lesson_section  # noqa: E402
from blocktrace.app.lessons.loading import load_lessons  # noqa: E402
from blocktrace.app.server.registry import EXPLORABLE_SPECS  # noqa: E402
from blocktrace.app.server.session_setup import question_id  # noqa: E402

CLASS, LESSON, EXPLORABLE = "period3", "transformer-block", "transformer-block-trace"


def fill(store: EventStore, students: int, changes: int) -> int:
    rows = 0
    for i in range(students):
        learner = uuid.uuid4().hex
        store.join(CLASS, learner, f"Student number {i}" if i % 3 else None)
        store.commit_prediction(new_event_id(), CLASS, learner, question_id(EXPLORABLE),
                                "keep-erase" if i % 4 else "keep-both", None, LESSON, EXPLORABLE)
        events = [("param", {"name": "attention_scale", "value": (k % 20) / 20}, EXPLORABLE) for k in range(changes)]
        events += [("experiment", {"id": "zero-add"}, EXPLORABLE),
                   ("checkpoint", {"checkpoint": "zero-updates", "answer": 1, "correct": i % 5 != 0}, None),
                   ("checkpoint", {"checkpoint": "constant-vector", "answer": 0, "correct": True}, None),
                   ("exercise", {"id": "transformer-block-residual", "passed": i % 2 == 0}, None),
                   ("explanation", {"text": "Adding zero keeps the stream; replacing it erases the input. " * 3},
                    None)]
        for kind, payload, explorable in events:
            store.record(new_event_id(), CLASS, learner, kind, payload, LESSON, explorable)
        rows += len(events) + 1
    return rows


def refresh(store: EventStore) -> str:
    """What DashboardHandler._body does for the lessons, without the request."""
    questions = {question_id(eid): (spec.title(), spec.choices()) for eid, spec in EXPLORABLE_SPECS.items()}
    parts = []
    for lesson in load_lessons():
        checkpoints = {str(d.attrs.get("id")): str(d.attrs.get("question")) for d in lesson.directives("checkpoint")}
        parts.append(lesson_section(lesson.title, store.summary(CLASS, lesson.id), questions, checkpoints,
                                    "token", "light"))
    return "".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=100)
    parser.add_argument("--events", type=int, default=60, help="control changes per student")
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        store = EventStore(f"sqlite:///{Path(folder) / 'class.db'}")
        store.upgrade()
        began = time.perf_counter()
        rows = fill(store, args.students, args.events)
        print(f"filled {args.students} students, {rows} events, in {time.perf_counter() - began:.1f} s")
        refresh(store)  # warm: lessons parsed, connections pooled
        times, size = [], 0
        for _ in range(args.rounds):
            t0 = time.perf_counter()
            size = len(refresh(store))
            times.append(time.perf_counter() - t0)
        store.close()
    median = statistics.median(times)
    print(f"dashboard refresh: median {median * 1000:.0f} ms, max {max(times) * 1000:.0f} ms over {args.rounds} "
          f"rounds; page body {size / 1024:.0f} KB; {100 * median / 5:.1f} % of one core at one refresh per 5 s")


if __name__ == "__main__":
    main()
