"""A race (train-the-block) in the classroom: the race a prediction is for, stored; and a teacher's race pushed.

A race's prediction is about a set-up. The state holds the set-up it was committed for (`predicted_setup`) until
the server has decided that race (`decided`, set from the runner's slices, never from anything a page sends).
`RaceRecord` stores both as one "race" event per learner and question (store_validation.RACE): the set-up held
at the commit (outcome None), then the outcome once decided. The teacher's summary counts the first outcome
stored for a committed prediction (class_summary.py), and a new page of the learner's puts the stored race back:
held again, so reloading with another address does not swap the race a prediction is scored on, or decided.

A teacher's push is a set-up, which shows no result: `RaceScreen` applies it before the commit too, so the class
predicts for the teacher's race. A student whose set-up is held (committed, race not decided) is moved too: their
prediction stands for the pushed race, which starts from step 0; only the push, read from the store, does this.
Whatever a page sends is still set back by the state's hold. "Stop showing" leaves a held race as it is.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from blocktrace.app.classroom.pacing import PUSH_ENDED, PushedView
from blocktrace.app.classroom.recorder import SessionRecorder, newest_per_slot
from blocktrace.app.classroom.store_validation import RACE
from blocktrace.app.server.registry import EXPLORABLE_SPECS

__all__ = ["PUSH_HELD_KEPT", "PUSH_MOVED", "PUSH_RACE", "RaceRecord", "RaceScreen"]

log = logging.getLogger(__name__)

PUSH_RACE = "Your teacher set up this race for the whole class."
PUSH_MOVED = ("Your teacher set up this race for the whole class: your prediction now stands for it, and it starts "
              "from step 0.")
PUSH_HELD_KEPT = ("Your teacher stopped showing their race. Yours stays as it is until it is decided: your "
                  "prediction stands for it.")


class RaceRecord:
    """One page's race in the store: the set-up a commit holds, its outcome once decided, and both put back."""

    def __init__(self, state: Any, explorable_id: str, question: str, recorder: SessionRecorder) -> None:
        self.state, self.explorable_id, self.question, self.recorder = state, explorable_id, question, recorder
        self.keys = EXPLORABLE_SPECS[explorable_id].query_keys()
        self._quiet = 0
        state.param.watch(self._changed, ["predicted_setup", "decided"])

    @contextmanager
    def restoring(self) -> Iterator[None]:
        """While what the store already holds is put back: nothing to store again."""
        self._quiet += 1
        try:
            yield
        finally:
            self._quiet -= 1

    def _changed(self, *_events) -> None:
        state = self.state
        if self._quiet or state.predicted_setup is None or not state.prediction.committed:
            return  # a skipped or uncommitted prediction holds no race
        self.recorder.emit(RACE, {"question": self.question, "setup": self._written(state.predicted_setup),
                                  "outcome": state.decided}, self.explorable_id)

    def _written(self, setup: Mapping[str, Any]) -> dict[str, str]:
        """The set-up as its address writes it ({"task": "copy", "vs": "residual", ...})."""
        return {key: spec.write(setup[spec.param]) for key, spec in self.keys.items() if spec.param in setup}

    def _read(self, written: object) -> dict[str, Any] | None:
        """A stored set-up read as the controls read a link; None unless it names every held parameter validly."""
        if not isinstance(written, Mapping):
            return None
        values = {}
        for key, text in written.items():
            if key in self.keys:
                try:
                    values[self.keys[key].param] = self.keys[key].read(str(text))
                except (ValueError, TypeError):
                    return None
        return values if set(values) == set(self.state.predicted_setup or ()) else None

    def put_back(self, payload: Mapping[str, Any]) -> None:
        """A race this learner's earlier page stored for the prediction now restored: held again, or decided."""
        state = self.state
        if not state.prediction.committed or payload.get("question") != self.question or state.decided is not None:
            return
        setup, outcome = self._read(payload.get("setup")), payload.get("outcome")
        if setup is None or (outcome is not None and outcome not in state.prediction.choices):
            log.info("a stored race was not put back: its set-up or outcome is not one this page accepts")
            return
        with self.restoring():
            if outcome is None:  # the server's hold again, whatever set-up the new page's address named
                state.param.update(predicted_setup=setup, **setup)
            else:  # decided: that race is scored; the page's own set-up is free
                state.param.update(predicted_setup=setup, decided=outcome)

    def refetch(self) -> None:
        """Another page of this learner's committed first: hold the race that page stored, if it has."""
        def found(events: list) -> None:
            races = [e for e in newest_per_slot(events) if e.kind == RACE and e.explorable == self.explorable_id]
            self.recorder.remember(races)
            for event in races:
                self.put_back(event.payload)

        self.recorder.restore_events(found)


class RaceScreen(PushedView):
    """A student's race under the teacher's pushes: set before the commit too, and moving a held race."""

    before_commit = True

    def _apply(self, values: dict[str, Any]) -> None:
        state = self.state
        if state.setup_held:  # the teacher's push, and nothing a page sends, moves the race a prediction is for
            held = {**state.predicted_setup, **{k: v for k, v in values.items() if k in state.predicted_setup}}
            state.param.update(predicted_setup=held, **values)
            self.shown_note = PUSH_MOVED
        else:
            state.param.update(**values)
            self.shown_note = PUSH_RACE

    def give_back(self) -> bool:
        if self.set and self.state.setup_held:  # the race the prediction stands for stays until it is decided
            self.own, self.set = {}, {}
            self.ended_note = PUSH_HELD_KEPT
            return True
        self.ended_note = PUSH_ENDED
        return super().give_back()

