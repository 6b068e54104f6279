"""`blocktrace check` without pytest: the exercise's own tests, the numbers the server checks, the ticket."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import numpy as np
import pytest

from blocktrace.app.exercises import challenge
from blocktrace.app.exercises.bundle import TICKET, bundle, exercises, new_ticket, ticket_is_genuine
from blocktrace.app.exercises.check_command import challenge_outputs, run_check
from blocktrace.app.exercises.runner import load_module, run_tests

ROOT = Path(__file__).resolve().parents[2]
RESIDUAL, DECODER = "lessons/transformer-block/exercise", "lessons/decoder-block/exercise"
TRAINING = "lessons/train-the-block/exercise"
SOLUTIONS = ROOT / "tests" / "exercise_solutions"
STARTER_FAILS = {"test_constant_vector_survives", "test_vector_with_a_mean_matches_the_formula",
                 "test_zero_update_returns_the_input", "test_update_is_added_to_the_untouched_input",
                 "test_a_sequence_keeps_its_shape"}  # what pytest finds too (tests/app/test_exercises.py)
SECRET = b"s" * 32


def outcomes(folder: str, implementation: Path):
    module = load_module(implementation, f"under_test_{implementation.stem}")
    return [o for t in sorted((ROOT / folder).glob("test_*.py")) for o in run_tests(t, module)]


def test_the_runner_finds_what_pytest_finds_on_the_starter():
    found = outcomes(RESIDUAL, ROOT / RESIDUAL / "residual.py")
    assert {o.name for o in found if not o.passed} == STARTER_FAILS and len(found) == 12
    centring = next(o for o in found if o.name == "test_constant_vector_survives")
    assert "your RMSNorm subtracts the mean" in centring.message


@pytest.mark.parametrize(("folder", "solution", "count"), [(RESIDUAL, "transformer_block.py", 12),
                                                            (DECODER, "decoder_block.py", 11),
                                                            (TRAINING, "train_the_block.py", 11)])
def test_the_reference_passes_every_test_and_the_servers_numbers(folder, solution, count):
    module = load_module(SOLUTIONS / solution, f"reference_{solution[:-3]}")
    found = [o for t in sorted((ROOT / folder).glob("test_*.py")) for o in run_tests(t, module)]
    assert len(found) == count and all(o.passed for o in found), [o for o in found if not o.passed]
    outputs = json.loads(json.dumps(challenge_outputs(module, folder, "00c0ffee12345678")))  # as sent
    assert all(challenge.verify(folder, "00c0ffee12345678", outputs).values())
    float32 = {k: np.asarray(v, dtype=np.float32).tolist() for k, v in outputs.items()}
    assert all(challenge.verify(folder, "00c0ffee12345678", float32).values()), "float32 work passes"
    assert not any(challenge.verify(folder, "0000000000000001", outputs).values()), "another nonce, other inputs"


def test_wrong_or_missing_functions_do_not_match():
    starter = load_module(ROOT / RESIDUAL / "residual.py", "starter_residual")
    checked = challenge.verify(RESIDUAL, "1234", challenge_outputs(starter, RESIDUAL, "1234"))
    assert checked == {"rms_norm": False, "residual_sublayer": False}
    unwritten = load_module(ROOT / DECODER / "decoder.py", "starter_decoder")
    assert challenge_outputs(unwritten, DECODER, "1234") == dict.fromkeys(challenge.cases(DECODER, "1234"))
    assert not any(challenge.verify(DECODER, "1234", {"rms_norm": "not numbers"}).values())
    unwritten = load_module(ROOT / TRAINING / "optimiser.py", "starter_optimiser")
    assert challenge_outputs(unwritten, TRAINING, "1234") == dict.fromkeys(challenge.cases(TRAINING, "1234"))


def test_the_clipping_check_compares_every_array_and_the_norm():
    """A result that is a dict and a norm is compared as numbers: clipping each array on its own does not match."""
    reference = load_module(SOLUTIONS / "train_the_block.py", "reference_clip")

    class EachOnItsOwn:
        @staticmethod
        def clip_by_global_norm(grads, max_norm):
            clipped = {k: g * min(1.0, max_norm / (np.linalg.norm(g) + 1e-6)) for k, g in grads.items()}
            return clipped, reference.clip_by_global_norm(grads, max_norm)[1]

    right = challenge_outputs(reference, TRAINING, "abc123")
    wrong = challenge_outputs(EachOnItsOwn, TRAINING, "abc123")
    assert challenge.verify(TRAINING, "abc123", right)["clip_by_global_norm"]
    assert not challenge.verify(TRAINING, "abc123", wrong)["clip_by_global_norm"]


def test_a_ticket_holds_only_for_its_learner_and_nonce():
    exercise = exercises()["transformer-block-residual"]
    ticket = new_ticket(SECRET, exercise, "a" * 32, "period3", "http://127.0.0.1:5006")
    assert ticket_is_genuine(SECRET, ticket)
    for field, value in (("learner", "b" * 32), ("nonce", "0" * 16), ("class", "period4"), ("exercise", "x")):
        assert not ticket_is_genuine(SECRET, {**ticket, field: value}), field
    assert not ticket_is_genuine(b"other" * 8, ticket)
    assert not ticket_is_genuine(SECRET, {**ticket, "token": None})


def test_the_download_holds_the_starter_its_tests_and_the_ticket():
    exercise = exercises()["transformer-block-residual"]
    ticket = new_ticket(SECRET, exercise, "a" * 32, "period3", "http://127.0.0.1:5006")
    names = zipfile.ZipFile(io.BytesIO(bundle(exercise, ticket))).namelist()
    top = "transformer-block-residual/"
    assert {top + n for n in ("residual.py", "test_residual.py", "conftest.py", "README.md", TICKET)} <= set(names)
    assert not any("__pycache__" in n for n in names)


def test_check_without_a_ticket_runs_the_tests_and_sends_nothing(tmp_path):
    for name in ("residual.py", "test_residual.py"):
        (tmp_path / name).write_bytes((ROOT / RESIDUAL / name).read_bytes())
    out = io.StringIO()
    assert run_check(str(tmp_path), out) == 1
    assert "7 of 12 tests pass" in out.getvalue() and "the result stays on this laptop" in out.getvalue()
    (tmp_path / "residual.py").write_bytes((SOLUTIONS / "transformer_block.py").read_bytes())
    assert run_check(str(tmp_path), io.StringIO()) == 0
    assert run_check(str(tmp_path / "nothing"), io.StringIO()) == 2


def test_a_report_refused_as_too_soon_is_sent_again_once_after_the_wait(monkeypatch):
    """A student who checks again within the server's one-report-a-second limit still reaches the teacher;
    a refusal with no wait, or a wait too long to sit through, is not retried."""
    from blocktrace.app.exercises import check_command

    answers, waits = [], []
    monkeypatch.setattr(check_command, "_post", lambda *_: answers.pop(0))
    monkeypatch.setattr(check_command.time, "sleep", waits.append)
    too_soon = {"recorded": False, "error": "too soon after your last report (one every 1 s)", "retry_after": 0.4}
    answers[:] = [too_soon, {"recorded": True, "passed": True}]
    assert check_command.send({}, [], {}) == {"recorded": True, "passed": True} and waits == [0.4]
    answers[:] = [too_soon, too_soon]
    assert check_command.send({}, [], {}) == too_soon and waits == [0.4, 0.4], "sent again once, not forever"
    for refusal in ({"recorded": False, "error": "forged"}, {**too_soon, "retry_after": 60}):
        answers[:] = [refusal]
        assert check_command.send({}, [], {}) == refusal and waits == [0.4, 0.4]
