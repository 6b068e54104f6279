"""What the teacher is told about the class database: writes waiting, no answer, a deleted file.

The students' pages say "your progress is not being saved" from the same facts (recorder.SessionRecorder);
the teacher's dashboard shows these sentences above the counts, so counts read while writes are failing
are never shown as if all was well. Each server process keeps its own outbox: with `--num-procs` a
sentence speaks for the process that answered the dashboard.
"""

from __future__ import annotations

from typing import Any

from blocktrace.app.classroom.rendering import render

__all__ = ["store_notices", "store_status_html"]


def store_notices(classroom: Any) -> list[str]:
    """Plain sentences for the teacher, most urgent first; empty while everything is being saved."""
    notices = []
    pending = classroom.outbox.pending
    if classroom.thread.stalled():
        notices.append("The class database is not answering: what learners do now is kept in this server's "
                       "memory and saved once it answers again.")
    if pending:
        why = classroom.outbox.last_error or "the database cannot be written"
        notices.append(f"{pending} learner action{'s' if pending != 1 else ''} not saved yet ({why}). They are kept "
                       "in this server's memory and saved as soon as the database can be written; the counts "
                       "below do not include them, and a restart of the server now would lose them.")
    if classroom.store.file_notice:
        notices.append(classroom.store.file_notice)
    return notices


def store_status_html(classroom: Any) -> str:
    """The notices as an alert block for the dashboard (templates/store_status.html escapes them), or "" when
    there is nothing to say."""
    notices = store_notices(classroom)
    if not notices:
        return ""
    return render("store_status.html", notices=notices)
