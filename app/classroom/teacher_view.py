"""The teacher's dashboard as HTML: per lesson a roster, the class's answers as bars, and the forms that act on them.

Pure functions from store summaries to escaped HTML; the handlers in teacher.py fetch and serve them. Every
value that came from a learner (names, explanations) is escaped here.
"""

from __future__ import annotations

from datetime import UTC, datetime
from html import escape
from urllib.parse import urlencode

from blocktrace.app.classroom.store import STEPS, Summary

STEP_LABELS = {"predict": "Predict", "experiment": "Experiment", "implement": "Exercise", "explain": "Explain",
               "done": "All done"}
CLAIM_LABELS = {"too_early": "Too early", "right_on": "Right on", "too_late": "Too late",
                "they_do_diverge": "Said “never”, but they diverge",
                "no_split_here": "Named a stage; they never diverge"}


def plural(n: int, one: str, many: str | None = None) -> str:
    """'1 answer', '2 answers', '0 answers'."""
    return f"{n} {one if n == 1 else (many or one + 's')}"


def counted(n: int, one: str) -> str:
    """'<strong>1</strong> learner': the number stands out."""
    return f"<strong>{n}</strong> {plural(n, one).split(' ', 1)[1]}"


def teacher_href(path: str, code: str, theme: str, **extra: str) -> str:
    """A link to a teacher page of this class, keeping the theme."""
    query = {"class": code, **({"theme": theme} if theme == "dark" else {}), **extra}
    return f"{path}?{urlencode(query)}"


def bars(counts: dict[str, int], labels: dict[str, str], caption: str) -> str:
    total = sum(counts.values())
    rows = []
    for key, label in labels.items():
        n = counts.get(key, 0)
        share = 100 * n / total if total else 0
        rows.append(f'<tr><th scope="row">{escape(label)}</th><td class="num norm">{n}</td>'
                    f'<td class="bar-cell"><progress max="100" value="{share:.0f}"></progress>'
                    f" {share:.0f}%</td></tr>")
    return (f'<table class="bt-table teacher-bars"><caption>{escape(caption)} ({plural(total, "answer")})</caption>'
            '<thead><tr><th scope="col">Answer</th><th scope="col">Learners</th><th scope="col">Share</th></tr>'
            f'</thead><tbody>{"".join(rows)}</tbody></table>')


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
    """Each learner of the class: committed or not, the step they are on, what they have done, when last seen."""
    now = now or datetime.now(UTC)
    roster = summary["roster"]
    if not roster:
        return '<p class="bt-muted">Nobody has joined this class yet.</p>'
    if not any(entry["done"] or entry["last_active"] for entry in roster):
        return '<p class="bt-muted">Nobody has started this lesson yet.</p>'
    rows = []
    for entry in roster:
        committed = ('<span class="bt-ok">committed</span>' if entry["committed"]
                     else '<span class="bt-bad">not yet</span>')
        done = ", ".join(STEP_LABELS[s] for s in entry["done"]) or "nothing yet"
        rows.append(f'<tr class="{"" if entry["committed"] else "waiting"}"><th scope="row">{escape(entry["label"])}'
                    f"</th><td>{committed}</td><td>{STEP_LABELS[entry['current']]}</td>"
                    f'<td>{len(entry["done"])} of {len(STEPS)}: {done}</td>'
                    f'<td>{escape(entry.get("exercise") or "no result yet")}</td>'
                    f'<td>{_ago(entry["last_active"], now)}</td></tr>')
    waiting = sum(not e["committed"] for e in roster)
    caption = (f"Roster: {plural(len(roster), 'learner')}, "
               f"{'everyone has committed' if not waiting else plural(waiting, 'learner') + ' not committed yet'}")
    return ('<div class="bt-table-wrap"><table class="bt-table teacher-roster">'
            f"<caption>{escape(caption)}</caption><thead><tr>"
            '<th scope="col">Learner</th><th scope="col">Prediction</th><th scope="col">Step now</th>'
            '<th scope="col">Done</th><th scope="col">Exercise</th><th scope="col">Last active</th></tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></div>')


def hidden(**fields: str) -> str:
    return "".join(f'<input type="hidden" name="{escape(k)}" value="{escape(v)}">' for k, v in fields.items())


def reveal_form(code: str, question: str, revealed: bool, token: str, theme: str) -> str:
    """Reveal the class's answers to learners who committed, or hide them again."""
    fields = hidden(_xsrf=token, **{"class": code}, question=question, theme=theme)
    if revealed:
        return ('<form method="post" action="/teacher/unreveal" class="bt-inline-form">'
                f'{fields}<p class="bt-ok">Revealed: learners who committed see these answers beside their own. '
                '<button type="submit">Hide from the class</button></p></form>')
    return (f'<form method="post" action="/teacher/reveal" class="bt-inline-form">{fields}'
            '<button type="submit">Reveal to the class</button></form>')


def lesson_section(title: str, summary: Summary, questions: dict[str, tuple[str, dict[str, str]]],
                   checkpoint_questions: dict[str, str], token: str, theme: str,
                   now: datetime | None = None, pacing: str = "") -> str:
    """One lesson's card: counts, the roster, predictions (with reveal), claims, checkpoints, misconceptions."""
    code = summary["class_code"]
    parts = [f'<section class="bt-card"><h2 class="bt-h2">{escape(title)}</h2>'
             f"<p>{counted(summary['joined'], 'learner')} joined the class · "
             f"{counted(summary['committed'], 'learner')} committed a prediction in this lesson</p>",
             pacing, roster_table(summary, now)]
    for question, (explorable_title, labels) in questions.items():
        counts = summary["distributions"].get(question)
        if not counts:
            continue
        parts.append(bars(counts, labels, f"Predictions in “{explorable_title}”"))
        parts.append(reveal_form(code, question, question in summary["revealed"], token, theme))
    if sum(summary["claims"].values()):
        parts.append(bars(summary["claims"], CLAIM_LABELS, "Divergence claims"))
    for checkpoint, counts in summary["checkpoints"].items():
        question = checkpoint_questions.get(checkpoint, checkpoint.replace("-", " "))
        parts.append(bars(counts, {"correct": "Correct", "incorrect": "Not yet correct"}, f"Checkpoint: {question}"))
    for m in summary["misconceptions"]:
        who = ", ".join(escape(n) for n in m["learners"]) or "nobody yet"
        parts.append(f'<p><strong>Misconception to discuss — “{escape(m["name"])}”:</strong> {who}</p>')
    if summary["explanations"]:
        items = "".join(f"<li><strong>{escape(who)}:</strong> {escape(text)}</li>"
                        for who, text in summary["explanations"])
        parts.append(f'<h3 class="bt-h3">Written explanations</h3><ul class="explanations">{items}</ul>')
    parts.append("</section>")
    return "".join(parts)


def archive_form(code: str, token: str, theme: str) -> str:
    """The first step: it asks the teacher to confirm on the next page."""
    return (f'<form method="post" action="/teacher/archive">{hidden(_xsrf=token, **{"class": code}, theme=theme)}'
            f'<button type="submit">Archive and reset class “{escape(code)}”…</button> '
            '<span class="bt-muted">(asks you to confirm; the history stays in the CSV export)</span></form>')


def archive_confirmation(code: str, joined: int, token: str, theme: str) -> str:
    return ('<section class="bt-card" role="alertdialog" aria-labelledby="confirm-title">'
            f'<h2 class="bt-h2" id="confirm-title">Archive and reset class “{escape(code)}”?</h2>'
            "<p>The dashboard and the students' pages start afresh: the answers, predictions and reveals of "
            f"{plural(joined, 'learner')} leave the live view. Nothing is deleted: every event stays in the CSV "
            "export.</p>"
            f'<form method="post" action="/teacher/archive">{hidden(_xsrf=token, **{"class": code}, theme=theme)}'
            '<input type="hidden" name="confirm" value="yes">'
            '<button type="submit" class="bt-danger">Yes, archive and reset</button> '
            f'<a class="bt-link" href="{escape(teacher_href("/teacher", code, theme))}">No, keep the class as it is</a>'
            "</form></section>")


def presenter_bars(summary: Summary, questions: dict[str, tuple[str, dict[str, str]]]) -> str:
    """The class's predictions for the projector: large type, one table per question, no names."""
    parts = []
    for question, (title, labels) in questions.items():
        counts = summary["distributions"].get(question)
        if counts:
            parts.append(bars(counts, labels, f"The class predicted, in “{title}”"))
    if not parts:
        return '<p class="bt-muted">No predictions committed yet.</p>'
    return "".join(parts)


def presenter_links(code: str, theme: str, lessons: list[tuple[str, str]]) -> str:
    items = " · ".join(f'<a class="bt-link" href="{escape(teacher_href("/teacher/present", code, theme, lesson=lid))}">'
                       f"Present “{escape(title)}”</a>" for lid, title in lessons)
    return f'<p class="bt-present-links">Presenter view for the projector: {items}</p>'


HOLD_LABELS = {"predict": "Predict", "experiment": "Experiment", "implement": "Exercise"}


def pace_forms(code: str, lesson: str, explorable: str, pace, token: str, theme: str, error: str = "") -> str:
    """Hold the class at a step (or release it), and show every student one state of the explorable."""
    fields = hidden(_xsrf=token, **{"class": code}, lesson=lesson, theme=theme)
    hold = pace.hold if pace else None
    now = (f"The class is held at <strong>{HOLD_LABELS.get(hold, hold)}</strong>: later steps stay closed."
           if hold else "The class moves at its own pace.")
    buttons = "".join(f'<button type="submit" name="hold" value="{step}"'
                      f'{" aria-pressed=true" if step == hold else ""}>Hold at {label}</button> '
                      for step, label in HOLD_LABELS.items())
    release = '<button type="submit" name="hold" value="release">Release</button>' if hold else ""
    pushed = pace.pushed if pace else None
    shown = ""
    if pushed:
        state = "&".join(f"{k}={v}" for k, v in pushed.get("state", {}).items())
        shown = (f'<p>Showing every student who has committed: <code>{escape(state)}</code> '
                 f'<button type="submit" name="clear" value="1">Stop showing</button> '
                 '<span class="bt-muted">(each student gets their own settings back)</span></p>')
    problem = f'<p class="bt-field-error" role="alert">{escape(error)}</p>' if error else ""
    return (f'<div class="bt-pace"><h3 class="bt-h3">Pacing</h3>'
            f'<form method="post" action="/teacher/pace" class="bt-inline-form">{fields}<p>{now}</p>'
            f"{buttons}{release}</form>"
            f'<form method="post" action="/teacher/push" class="bt-inline-form">{fields}'
            f'{hidden(explorable=explorable)}{shown}'
            f'<label>Look at this: a link from the explorable, or keys such as '
            f'<code>attention_scale=0&amp;residual=replace</code> '
            f'<input name="state" size="40" maxlength="2000" autocomplete="off"></label> '
            f'<button type="submit">Show to the class</button>{problem}</form></div>')
