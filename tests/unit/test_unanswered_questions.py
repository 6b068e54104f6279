"""A question shows no answer chosen until the student picks one, and nothing chosen is never an answer."""

from __future__ import annotations

from blocktrace.explorables.components.checkpoint import Checkpoint, CheckpointView, Option
from blocktrace.explorables.components.prediction import Prediction, PredictionGate

CHOICES = {"keep": "It is kept.", "lose": "It is lost."}


def test_prediction_gate_starts_with_nothing_chosen_and_refuses_to_commit_it() -> None:
    """The gate's radio group has no option checked (Bokeh's `active` is None), offers only real answers,
    and Commit with nothing chosen leaves the prediction uncommitted with a message."""
    prediction = Prediction(CHOICES)
    gate = PredictionGate(prediction, "What happens to the stream?")
    group = gate._choice
    assert group.value is None
    assert group.get_root().active is None
    assert list(group.options) == list(CHOICES.values())
    gate._commit()
    assert not prediction.committed and prediction.choice is None
    assert "Pick one of the answers" in gate._message.object
    group.value = CHOICES["lose"]
    gate._commit()
    assert prediction.committed and prediction.choice == "lose"


def test_checkpoint_starts_with_nothing_chosen_and_does_not_count_a_check_of_nothing() -> None:
    """Checking with nothing chosen asks for an answer and records no attempt; a chosen answer is checked."""
    checkpoint = Checkpoint("q", "Why add?", [Option("To keep it.", True, "Yes."), Option("To lose it.", False, "No.")])
    view = CheckpointView(checkpoint)
    assert view.choice.value is None and view.choice.get_root().active is None
    view._check()
    assert checkpoint.attempts == 0 and checkpoint.answer is None
    assert "Pick an answer first" in view.feedback.object
    view.choice.value = "To keep it."
    view._check()
    assert checkpoint.attempts == 1 and checkpoint.answer == 0
