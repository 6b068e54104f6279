"""What the teacher's dashboard counts for one lesson of a class, from the rows the store reads.

Each learner counts once per question: their committed prediction, their latest claim in an
explorable, their latest answer to a checkpoint, their latest explanation and exercise result
(pressing "Check answer" again changes the answer shown, not how many answered), and the outcome of the
race they predicted: the first race decided for their committed prediction (app/classroom/race.py), so
neither a race without a prediction nor a second race run after the first counts.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, TypedDict

from blocktrace.app.classroom.store_engine import as_utc
from blocktrace.app.classroom.store_validation import PREDICTION, RACE

__all__ = [
    "DISCUSSED_KINDS", "MISCONCEPTIONS", "STEPS", "STEP_KINDS", "STEP_LABELS", "Misconception", "Outcomes",
    "RosterEntry", "Summary", "exercise_way", "exercise_words", "learner_label", "summarize",
]

# question -> (the choice that names a misconception, its name for the teacher).
MISCONCEPTIONS: dict[str, tuple[str, str]] = {
    "transformer-block-trace/prediction": ("keep-both", "Replacing the residual stream is harmless"),
}

STEPS = ("predict", "experiment", "implement", "explain")  # a lesson's steps, as the lesson page counts them
# What students and the teacher alike call each step ("implement" is the exercise, whichever way it is done).
STEP_LABELS = {"predict": "Predict", "experiment": "Experiment", "implement": "Exercise", "explain": "Explain"}
STEP_KINDS = {PREDICTION: "predict", "param": "experiment", "experiment": "experiment", "claim": "experiment",
              "exercise": "implement", "explanation": "explain"}
DISCUSSED_KINDS = ("claim", "checkpoint", "explanation", "exercise", RACE)  # the events whose payloads are counted


class Misconception(TypedDict):
    name: str  # e.g. "Replacing the residual stream is harmless"
    question: str
    choice: str
    learners: list[str]  # display names (or learner ids), sorted


class RosterEntry(TypedDict):
    label: str  # the display name, or an anonymous label from the learner id ("Student 3f9a1c")
    committed: bool  # a prediction committed in this lesson
    done: list[str]  # of STEPS, in order: the lesson's steps this learner has done
    current: str  # the first step not done yet, or "done"
    last_active: datetime | None  # their newest event in this lesson (UTC), None if none yet
    exercise: str | None  # their latest exercise result: "passed", "3 of 12 tests pass", ...; None: none yet
    exercise_way: str | None  # how they did it: "laptop", "page" or "self-report" (exercise_way); None: not yet
    outcome: bool | None  # the race they predicted came out as they said (None: no race of theirs decided yet)


class Outcomes(TypedDict):
    came_out: dict[str, int]  # choice -> learners whose predicted race came out that way (largest first)
    borne_out: int  # of them, learners whose prediction the race bore out
    setups: int  # different set-ups among those races (one: the class compared like with like)


class Summary(TypedDict):
    class_code: str
    epoch: int | None  # None for a class nobody has joined yet
    lesson: str
    joined: int  # learners who joined the class this epoch
    committed: int  # learners who committed at least one prediction in this lesson
    distributions: dict[str, dict[str, int]]  # question -> choice -> count, this lesson
    revealed: list[str]  # questions revealed to the class this epoch
    claims: dict[str, int]  # divergence-claim verdict -> learners (each learner's latest claim per explorable)
    checkpoints: dict[str, dict[str, int]]  # checkpoint -> {"correct": n, "incorrect": m}, each learner's latest
    roster: list[RosterEntry]  # every learner of the class this epoch, by label
    explanations: list[tuple[str, str]]  # (display name or learner id, latest text), one per learner, oldest first
    misconceptions: list[Misconception]  # for questions of this lesson that have predictions
    outcomes: dict[str, Outcomes]  # question -> how the races its committed predictions were for came out


def exercise_way(payload: Mapping[str, Any]) -> str:
    """How an exercise result was made: "laptop" (`blocktrace check`, checked by the server), "page" (the in-page
    version, checked by the server) or "self-report" (the old buttons, not checked)."""
    if not payload.get("checked"):
        return "self-report"
    return "page" if payload.get("way") == "page" else "laptop"


def exercise_words(payload: Mapping[str, Any]) -> str:
    """An exercise result in a few words for the teacher."""
    if exercise_way(payload) == "page":
        if payload.get("passed") is True:
            return "passed (checked)"
        return f"{payload.get('tests_passed')} of {payload.get('tests_total')} functions right"
    if not payload.get("checked"):
        return "reported passing (not checked)" if payload.get("passed") is True else "reported failing"
    if payload.get("passed") is True:
        return "passed (checked)"
    if payload.get("tests_passed") == payload.get("tests_total"):
        return "tests pass, numbers wrong"
    return f"{payload.get('tests_passed')} of {payload.get('tests_total')} tests pass"


def learner_label(learner_id: str, display_name: str | None) -> str:
    """How the teacher sees a learner: their name, or a short label that names no one."""
    return display_name or f"Student {learner_id[:6]}"


def summarize(class_code: str, epoch: int | None, lesson: str, names: Mapping[str, str],
              answers: list[tuple[str, str, str]], revealed: list[str],
              discussed: Iterable[tuple[str, str, str]], activity: Iterable[tuple[str, str, datetime]],
              misconceptions: Mapping[str, tuple[str, str]]) -> Summary:
    """The dashboard's counts from the rows of one lesson in the class's current epoch.

    `names`: learner -> label, of every learner of the epoch; `answers`: (learner, question, choice)
    of the lesson's predictions; `revealed`: the epoch's revealed questions, sorted; `discussed`:
    (learner, kind, payload JSON) of the lesson's events of DISCUSSED_KINDS, oldest first; `activity`:
    (learner, kind, newest time) of the lesson's events; `misconceptions`: question -> (choice, name).
    """
    distributions: dict[str, Counter[str]] = {}
    for _learner, question, choice in answers:
        distributions.setdefault(question, Counter())[choice] += 1
    # Later rows replace earlier ones: each learner's latest counts.
    latest_claims: dict[tuple[str, str], str] = {}
    latest_checks: dict[tuple[str, str], bool] = {}
    latest_texts: dict[str, str] = {}
    latest_exercise: dict[str, tuple[str, str]] = {}  # learner -> (words, way)
    first_races: dict[tuple[str, str], tuple[str, str]] = {}  # (learner, question) -> (outcome, set-up)
    for learner, kind, payload_text in discussed:
        try:
            payload = json.loads(payload_text)
        except ValueError:
            continue  # not written by this store; nothing to count
        if not isinstance(payload, dict):
            continue
        if kind == "claim" and isinstance(payload.get("verdict"), str):
            latest_claims[(learner, str(payload.get("explorable")))] = payload["verdict"]
        elif kind == "checkpoint" and isinstance(payload.get("correct"), bool) \
                and isinstance(payload.get("checkpoint"), str):
            latest_checks[(learner, str(payload.get("checkpoint")))] = payload["correct"]
        elif kind == "exercise":
            latest_exercise[learner] = (exercise_words(payload), exercise_way(payload))
        elif kind == "explanation" and isinstance(payload.get("text"), str) and payload["text"].strip():
            latest_texts.pop(learner, None)  # re-inserted: the list follows each learner's latest one
            latest_texts[learner] = payload["text"]
        elif kind == RACE and isinstance(payload.get("outcome"), str) and isinstance(payload.get("question"), str):
            first_races.setdefault((learner, payload["question"]),
                                   (payload["outcome"], json.dumps(payload.get("setup"), sort_keys=True)))
    claims = Counter(latest_claims.values())
    checkpoints: dict[str, dict[str, int]] = {}
    for (_learner, checkpoint), correct in sorted(latest_checks.items(), key=lambda item: item[0][1]):
        counts = checkpoints.setdefault(checkpoint, {"correct": 0, "incorrect": 0})
        counts["correct" if correct else "incorrect"] += 1
    predicted = {(learner, question): choice for learner, question, choice in answers}
    came_out: dict[str, Counter[str]] = {}
    borne_out: Counter[str] = Counter()
    setups: dict[str, set[str]] = {}
    own_outcome: dict[str, bool] = {}
    steps: dict[str, set[str]] = {}
    for (learner, question), (outcome, setup) in first_races.items():
        if (learner, question) not in predicted:
            continue  # no committed prediction in this lesson: not a race anyone predicted
        came_out.setdefault(question, Counter())[outcome] += 1
        borne_out[question] += outcome == predicted[(learner, question)]
        setups.setdefault(question, set()).add(setup)
        own_outcome[learner] = outcome == predicted[(learner, question)]
        steps.setdefault(learner, set()).add("experiment")  # a race run to its verdict
    last: dict[str, datetime] = {}
    for learner, kind, moment in activity:
        if kind in STEP_KINDS:
            steps.setdefault(learner, set()).add(STEP_KINDS[kind])
        moment = as_utc(moment)
        last[learner] = max(last.get(learner, moment), moment)
    roster = []
    for learner, label in sorted(names.items(), key=lambda item: (item[1].casefold(), item[0])):
        done = [step for step in STEPS if step in steps.get(learner, ())]
        roster.append(RosterEntry(label=label, committed="predict" in done, done=done,
                                  current=next((s for s in STEPS if s not in done), "done"),
                                  last_active=last.get(learner),
                                  exercise=latest_exercise.get(learner, (None, None))[0],
                                  exercise_way=latest_exercise.get(learner, (None, None))[1],
                                  outcome=own_outcome.get(learner)))
    explanations = [(names.get(learner, learner), text) for learner, text in latest_texts.items()]
    found: list[Misconception] = [
        Misconception(name=name, question=question, choice=choice, learners=sorted(
            names.get(learner, learner) for learner, q, c in answers if q == question and c == choice))
        for question, (choice, name) in misconceptions.items() if question in distributions
    ]
    return Summary(
        class_code=class_code, epoch=epoch, lesson=lesson, joined=len(names),
        committed=len({learner for learner, _q, _c in answers}),
        distributions={q: dict(sorted(c.items(), key=lambda item: (-item[1], item[0])))
                       for q, c in sorted(distributions.items())},
        revealed=revealed, claims=dict(sorted(claims.items())), checkpoints=checkpoints,
        explanations=explanations, misconceptions=found, roster=roster,
        outcomes={q: Outcomes(came_out=dict(sorted(c.items(), key=lambda item: (-item[1], item[0]))),
                              borne_out=borne_out[q], setups=len(setups[q])) for q, c in sorted(came_out.items())},
    )
