"""The teacher's dashboard as HTML: per lesson a roster, the class's answers as bars, and the forms that act on them.

Pure functions from store summaries to HTML, each filling in a template of app/classroom/templates (rendering.py),
which escapes every value it is given: names and explanations learners typed reach the page as text. The
handlers in teacher.py fetch the summaries and serve the pages.
"""

from __future__ import annotations

from datetime import UTC, datetime
from urllib.parse import urlencode

from blocktrace.app.classroom.class_summary import STEP_LABELS as LESSON_STEP_LABELS
from blocktrace.app.classroom.class_summary import Outcomes
from blocktrace.app.classroom.pacing import HOLDABLE
from blocktrace.app.classroom.rendering import plural, render
from blocktrace.app.classroom.store import STEPS, Summary
from blocktrace.app.server.registry import EXPLORABLE_SPECS

__all__ = ["archive_confirmation", "archive_form", "bars", "class_links", "lesson_section", "outcome_table",
           "pace_forms", "plural", "presenter_bars", "presenter_links", "roster_table", "teacher_href"]

STEP_LABELS = {**LESSON_STEP_LABELS, "done": "All done"}
CLAIM_LABELS = {"too_early": "Too early", "right_on": "Right on", "too_late": "Too late",
                "they_do_diverge": "Said “never”, but they diverge",
                "no_split_here": "Named a stage; they never diverge"}
HOLD_LABELS = {step: LESSON_STEP_LABELS[step] for step in HOLDABLE}
PUSH_EXAMPLES = {"race": "task=copy&vs=depth&floors=2", "controls": "attention_scale=0&residual=replace"}
WAY_LABELS = {"laptop": "on their laptop", "page": "in the page", "self-report": "reported by hand"}  # exercise_way
RACE_WORDS = {True: ("as predicted", "bt-ok"), False: ("not as predicted", "bt-bad"), None: ("not decided yet", "")}


def teacher_href(path: str, code: str, theme: str, **extra: str) -> str:
    """A link to a teacher page of this class, keeping the theme."""
    query = {"class": code, **({"theme": theme} if theme == "dark" else {}), **extra}
    return f"{path}?{urlencode(query)}"


def bars(counts: dict[str, int], labels: dict[str, str], caption: str, mine: str | None = None) -> str:
    """A table of the answers `labels` names, each with its count and share of `counts`' total as a bar; the
    answer `mine` (a learner's own, on their page) is marked."""
    total = sum(counts.values())
    rows = []
    for key, label in labels.items():
        n = counts.get(key, 0)
        rows.append((key, label, n, f"{100 * n / total if total else 0:.0f}"))
    return render("bars.html", caption=caption, total=total, rows=rows, mine=mine)


def outcome_table(predicted: dict[str, int], outcomes: Outcomes, labels: dict[str, str]) -> str:
    """The class's predictions against how the races they were for came out: per answer, how many predicted it and
    how many of those races came out so; then how many were as predicted, and over how many set-ups."""
    came = outcomes["came_out"]
    rows = [(label, predicted.get(key, 0), came.get(key, 0)) for key, label in labels.items()]
    return render("outcomes.html", rows=rows, ran=sum(came.get(key, 0) for key in labels),
                  borne_out=outcomes["borne_out"], setups=outcomes["setups"])


def _charts(summary: Summary, question: str, labels: dict[str, str], caption: str) -> list[str]:
    """A question's bars, and its races' outcomes beside them once any race predicted for is decided."""
    counts = summary["distributions"].get(question)
    if not counts:
        return []
    outcomes = summary.get("outcomes", {}).get(question)
    return [bars(counts, labels, caption), *([outcome_table(counts, outcomes, labels)] if outcomes else [])]


def _ago(moment: datetime | None, now: datetime) -> str:
    if moment is None:
        return "not yet"
    seconds = max(0, int((now - moment).total_seconds()))
    if seconds < 60:
        return "just now"
    if seconds < 3600:
        return f"{plural(seconds // 60, 'minute')} ago"
    return f"{plural(seconds // 3600, 'hour')} ago"


def roster_table(summary: Summary, now: datetime | None = None) -> str:
    """Each learner of the class: committed or not, the step they are on, what they have done, their exercise's
    result and where they did it (on their laptop or in the page), when last seen."""
    now = now or datetime.now(UTC)
    roster = summary["roster"]
    rows = [{"label": entry["label"], "committed": entry["committed"], "step": STEP_LABELS[entry["current"]],
             "done": f"{len(entry['done'])} of {len(STEPS)}: "
                     f"{', '.join(STEP_LABELS[s] for s in entry['done']) or 'nothing yet'}",
             "exercise": entry.get("exercise") or "no result yet",
             "way": WAY_LABELS.get(entry.get("exercise_way") or "", "–"), "seen": _ago(entry["last_active"], now),
             **_race_cell(entry)}
            for entry in roster]
    waiting = sum(not e["committed"] for e in roster)
    caption = (f"Roster: {plural(len(roster), 'learner')}, "
               f"{'everyone has committed' if not waiting else plural(waiting, 'learner') + ' not committed yet'}")
    started = any(entry["done"] or entry["last_active"] for entry in roster)
    return render("roster.html", rows=rows, started=started, caption=caption, races=bool(summary.get("outcomes")))


def _race_cell(entry) -> dict[str, str]:
    """The roster's Race cell: whether the race the learner predicted came out as they said."""
    if not entry["committed"]:
        return {"race": "no prediction", "race_class": ""}
    words, css = RACE_WORDS[entry.get("outcome")]
    return {"race": words, "race_class": css}


def _fields(token: str, **fields: str) -> list[tuple[str, str]]:
    """A form's hidden fields, Tornado's XSRF token first."""
    return [("_xsrf", token), *fields.items()]


def reveal_form(code: str, question: str, revealed: bool, token: str, theme: str) -> str:
    """Reveal the class's answers to learners who committed, or hide them again."""
    return render("reveal_form.html", revealed=revealed,
                  fields=_fields(token, **{"class": code}, question=question, theme=theme))


def lesson_section(title: str, summary: Summary, questions: dict[str, tuple[str, dict[str, str]]],
                   checkpoint_questions: dict[str, str], token: str, theme: str,
                   now: datetime | None = None, pacing: str = "") -> str:
    """One lesson's card: counts, the roster, predictions (with reveal), claims, checkpoints, misconceptions.

    `pacing`: the card's pacing forms (pace_forms)."""
    code = summary["class_code"]
    charts = []
    for question, (explorable_title, labels) in questions.items():
        shown = _charts(summary, question, labels, f"Predictions in “{explorable_title}”")
        if shown:
            charts += [*shown, reveal_form(code, question, question in summary["revealed"], token, theme)]
    if sum(summary["claims"].values()):
        charts.append(bars(summary["claims"], CLAIM_LABELS, "Divergence claims"))
    for checkpoint, counts in summary["checkpoints"].items():
        question = checkpoint_questions.get(checkpoint, checkpoint.replace("-", " "))
        charts.append(bars(counts, {"correct": "Correct", "incorrect": "Not yet correct"}, f"Checkpoint: {question}"))
    return render("lesson_section.html", title=title, joined=summary["joined"], committed=summary["committed"],
                  pacing=pacing, roster=roster_table(summary, now), charts=charts,
                  misconceptions=[(m["name"], m["learners"]) for m in summary["misconceptions"]],
                  explanations=summary["explanations"])


def class_links(codes: list[str], code: str, theme: str) -> str:
    """The dashboard's first line: a link to each class (`code` the one shown), and the CSV exports."""
    return render("class_links.html", code=code, links=[(c, teacher_href("/teacher", c, theme)) for c in codes],
                  export=f"/teacher/events.csv?{urlencode({'class': code})}")


def archive_form(code: str, token: str, theme: str) -> str:
    """The first step: it asks the teacher to confirm on the next page."""
    return render("archive_form.html", code=code, fields=_fields(token, **{"class": code}, theme=theme))


def archive_confirmation(code: str, joined: int, token: str, theme: str) -> str:
    """The second step: archive `code` (its `joined` learners leave the live view), or go back."""
    return render("archive_confirmation.html", code=code, joined=joined,
                  fields=_fields(token, **{"class": code}, theme=theme), back=teacher_href("/teacher", code, theme))


def presenter_bars(summary: Summary, questions: dict[str, tuple[str, dict[str, str]]]) -> str:
    """The class's predictions for the projector: large type, one table per question, no names."""
    charts = [chart for question, (title, labels) in questions.items()
              for chart in _charts(summary, question, labels, f"The class predicted, in “{title}”")]
    return render("presenter_bars.html", charts=charts)


def presenter_links(code: str, theme: str, lessons: list[tuple[str, str]]) -> str:
    """A link to the presenter view of each lesson (id, title) of class `code`."""
    return render("presenter_links.html",
                  links=[(teacher_href("/teacher/present", code, theme, lesson=lid), title) for lid, title in lessons])


def pace_forms(code: str, lesson: str, explorable: str, pace, token: str, theme: str, error: str = "") -> str:
    """Hold the class at a step (or release it), and show every student one state of the explorable."""
    hold = pace.hold if pace else None
    pushed = pace.pushed if pace else None
    race = explorable in EXPLORABLE_SPECS and EXPLORABLE_SPECS[explorable].race  # its set-up lands before a commit
    return render("pace_forms.html", fields=_fields(token, **{"class": code}, lesson=lesson, theme=theme),
                  hold=hold, hold_label=HOLD_LABELS.get(hold, hold), steps=list(HOLD_LABELS.items()),
                  explorable=explorable, error=error, race=race,
                  example=PUSH_EXAMPLES["race" if race else "controls"],
                  pushed="&".join(f"{k}={v}" for k, v in pushed.get("state", {}).items()) if pushed else None)
