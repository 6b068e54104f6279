"""The synthetic training tasks: each rule recomputed independently, the masks, the streams and the chance levels."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from blocktrace.explorables.engine.config import ConfigError
from blocktrace.explorables.engine.tasks import (
    MAX_SEQUENCES,
    TASKS,
    Batch,
    Task,
    accuracy,
    held_out,
    make_task,
    training_batch,
)

ROOT = Path(__file__).resolve().parents[2]
DEFAULTS = [make_task(task_id) for task_id in TASKS]
EDGES = [  # the smallest and largest sizes each task allows
    make_task("copy", symbols=3, seq_len=5, k=4),
    make_task("reverse", symbols=2, m=2),
    make_task("sort", symbols=26, m=7),
    make_task("induction", symbols=5, seq_len=7, min_pattern=2, max_pattern=5),
    make_task("sum", symbols=2, seq_len=2),
    make_task("sum", symbols=26, seq_len=64),
]
EVERY = DEFAULTS + EDGES


def _name(task: Task) -> str:
    return "-".join([task.id, *(f"{k}{v}" for k, v in task.options)])


every_task = pytest.mark.parametrize("task", EVERY, ids=[_name(t) for t in EVERY])


def _rule(task: Task, tokens: np.ndarray) -> np.ndarray:
    """The answer at every position worked out from the tokens alone with plain loops, 0 where there is none."""
    opt = dict(task.options)
    out = np.zeros_like(tokens)
    for i, row in enumerate(tokens.tolist()):
        for t in range(len(row)):
            if task.id == "copy" and t >= opt["k"]:
                out[i, t] = row[t - opt["k"]]
            elif task.id in ("reverse", "sort") and t >= opt["m"]:
                inputs = row[: opt["m"]]
                out[i, t] = (inputs[::-1] if task.id == "reverse" else sorted(inputs))[t - opt["m"]]
            elif task.id == "induction" and row[t] in row[:t]:
                last = max(j for j in range(t) if row[j] == row[t])
                out[i, t] = row[last + 1]  # the token after the current token's last appearance
            elif task.id == "sum" and t >= 1:
                out[i, t] = (row[t - 1] + row[t]) % opt["symbols"]
    return out


def _expected_scored(task: Task, tokens: np.ndarray) -> np.ndarray:
    """Which positions have a determined answer, worked out from the definitions."""
    opt = dict(task.options)
    t = np.arange(task.seq_len)
    if task.id == "copy":
        return np.broadcast_to(t >= opt["k"], tokens.shape)
    if task.id in ("reverse", "sort"):
        return np.broadcast_to(t >= opt["m"], tokens.shape)
    if task.id == "induction":  # exactly where the current token has appeared before
        return np.array([[row[p] in row[:p] for p in range(len(row))] for row in tokens.tolist()])
    return np.broadcast_to(t >= 1, tokens.shape)  # sum: every position with one before it


def test_menu_has_the_five_tasks_in_order() -> None:
    """The menu order is copy, reverse, sort, induction, sum, and each id makes the task of that id."""
    assert TASKS == ("copy", "reverse", "sort", "induction", "sum")
    assert [t.id for t in DEFAULTS] == list(TASKS)
    for task in DEFAULTS:
        assert task.title and len(task.title) <= 24
        assert task.needs.endswith(".") and task.needs.count(". ") == 0, "needs is one sentence"


def test_options_rebuild_the_same_task_and_differences_show() -> None:
    """A task's options rebuild an equal task; tasks differing in one option are unequal (a race relies on it)."""
    for task in EVERY:
        assert make_task(task.id, **dict(task.options)) == task
    assert make_task("copy", k=2) != make_task("copy", k=3)
    assert make_task("sum", symbols=5) != make_task("sum", symbols=6)


def test_causal_flag_marks_the_tasks_whose_answers_appear_later() -> None:
    """Reverse, sort and induction are the causal ones; copy and sum answer from the past."""
    assert {t.id for t in DEFAULTS if t.causal} == {"reverse", "sort", "induction"}


@every_task
def test_shapes_dtypes_and_vocabulary(task: Task) -> None:
    """Tokens and targets are int64 [n, seq_len], scored is bool, tokens index the vocab and answers are symbols."""
    b = training_batch(task, 3, 0, 50)
    assert b.tokens.shape == b.targets.shape == b.scored.shape == (50, task.seq_len)
    assert b.tokens.dtype == np.int64 and b.targets.dtype == np.int64 and b.scored.dtype == np.bool_
    assert len(set(task.vocab)) == len(task.vocab)
    assert b.tokens.min() >= 0 and b.tokens.max() < len(task.vocab)
    assert b.targets[b.scored].min() >= 0 and b.targets[b.scored].max() < task.answers
    assert b.scored.any(axis=1).all(), "every sequence has something to score"


@every_task
def test_targets_follow_the_rule(task: Task) -> None:
    """At every scored position the target is the answer the task's rule gives, recomputed here from the tokens."""
    b = training_batch(task, 11, 4, 300)
    expected = _rule(task, b.tokens)
    np.testing.assert_array_equal(b.targets[b.scored], expected[b.scored])


@every_task
def test_scored_mask_is_where_the_answer_is_determined(task: Task) -> None:
    """Scored: t ≥ k (copy), from the separator on (reverse, sort), the repeats (induction), from the second (sum)."""
    b = training_batch(task, 5, 2, 300)
    np.testing.assert_array_equal(b.scored, _expected_scored(task, b.tokens))


@pytest.mark.parametrize("task_id", ["reverse", "sort"])
def test_separator_layout(task_id: str) -> None:
    """tokens = [a1..am, SEP, b1..b(m-1)], targets from SEP on = b1..bm: reversed, or np.sort of the inputs."""
    task = make_task(task_id, m=5)
    b = training_batch(task, 0, 9, 400)
    m, sep = 5, task.vocab.index("SEP")
    assert (b.tokens[:, m] == sep).all() and (np.delete(b.tokens, m, axis=1) != sep).all()
    inputs = b.tokens[:, :m]
    outputs = inputs[:, ::-1] if task_id == "reverse" else np.sort(inputs, axis=1)
    np.testing.assert_array_equal(b.targets[:, m:], outputs)
    np.testing.assert_array_equal(b.tokens[:, m + 1:], outputs[:, :-1])  # teacher forcing


@pytest.mark.parametrize("task", [t for t in EVERY if t.causal], ids=[_name(t) for t in EVERY if t.causal])
def test_causal_tasks_show_each_answer_next(task: Task) -> None:
    """In a causal task the target at t is the input at t + 1, so without the causal mask the model could read it."""
    b = training_batch(task, 2, 0, 200)
    inner = b.scored[:, :-1]
    assert inner.any()
    np.testing.assert_array_equal(b.targets[:, :-1][inner], b.tokens[:, 1:][inner])


def test_induction_pattern_length_varies() -> None:
    """The pattern length is drawn per sequence over its whole range, so no fixed offset answers by position."""
    task = make_task("induction", min_pattern=3, max_pattern=6)
    first_scored = training_batch(task, 0, 0, 400).scored.argmax(axis=1)
    assert set(first_scored.tolist()) == {3, 4, 5, 6}


def test_chance_levels_follow_answers() -> None:
    """chance_loss is ln(answers) and chance_accuracy is 1 / answers."""
    for task in EVERY:
        assert task.answers == dict(task.options)["symbols"]
        assert task.chance_loss == pytest.approx(math.log(task.answers), rel=1e-15)
        assert task.chance_accuracy == pytest.approx(1.0 / task.answers, rel=1e-15)
    assert make_task("copy", symbols=8).chance_loss == pytest.approx(2.0794415416798357)


@every_task
def test_answers_are_equally_likely(task: Task) -> None:
    """Over a large batch the scored targets take exactly `answers` values, each within 15% of 1/answers."""
    b = training_batch(task, 21, 0, MAX_SEQUENCES)
    values, counts = np.unique(b.targets[b.scored], return_counts=True)
    assert len(values) == task.answers
    np.testing.assert_allclose(counts / counts.sum(), 1.0 / task.answers, rtol=0.15)


@every_task
def test_rule_follower_is_perfect_and_a_constant_guess_is_at_chance(task: Task) -> None:
    """Predicting by the rule scores 1.0; always predicting one symbol scores about chance_accuracy."""
    b = held_out(task, 8, 1000)
    assert accuracy(_rule(task, b.tokens), b) == 1.0
    for symbol in (0, task.answers - 1):
        guess = accuracy(np.full_like(b.targets, symbol), b)
        assert guess == pytest.approx(task.chance_accuracy, rel=0.25)


def test_accuracy_counts_only_scored_positions() -> None:
    """Accuracy is the fraction right among scored positions; unscored positions never count."""
    b = Batch(tokens=np.zeros((1, 4), np.int64), targets=np.array([[1, 2, 3, 4]]),
              scored=np.array([[True, True, True, False]]))
    assert accuracy(np.array([[1, 2, 0, 4]]), b) == pytest.approx(2 / 3)
    assert accuracy(np.array([[1, 2, 3, 0]]), b) == 1.0
    with pytest.raises(ValueError, match="shape"):
        accuracy(np.zeros((1, 3), np.int64), b)


def test_training_batches_are_a_function_of_seed_and_step() -> None:
    """Step s is the same batch whatever was drawn before; another step or another seed gives another batch."""
    task = make_task("sort")
    direct = training_batch(task, 4, 17, 64)
    for s in range(17):
        training_batch(task, 4, s, 64)
    again = training_batch(task, 4, 17, 64)
    for name in ("tokens", "targets", "scored"):
        np.testing.assert_array_equal(getattr(direct, name), getattr(again, name))
    assert not np.array_equal(direct.tokens, training_batch(task, 4, 18, 64).tokens)
    assert not np.array_equal(direct.tokens, training_batch(task, 5, 17, 64).tokens)


def test_held_out_is_fixed_and_apart_from_training() -> None:
    """The held-out set is the same on every call and differs from every early training batch of its seed."""
    task = make_task("copy")
    a, b = held_out(task, 3, 64), held_out(task, 3, 64)
    np.testing.assert_array_equal(a.tokens, b.tokens)
    for step in range(200):
        assert not np.array_equal(a.tokens, training_batch(task, 3, step, 64).tokens)
    assert not np.array_equal(a.tokens, held_out(task, 4, 64).tokens)


@pytest.mark.parametrize(("task_id", "options", "message"), [
    ("parity", {}, "no task 'parity'; choose one of copy, reverse, sort, induction, sum"),
    ("copy", {"m": 3}, "the copy task has no option 'm'; its options are symbols, seq_len, k"),
    ("copy", {"symbols": 1}, "symbols must be between 2 and 26, got 1"),
    ("copy", {"symbols": 27}, "symbols must be between 2 and 26, got 27"),
    ("copy", {"k": 0}, r"k \(places back, less than seq_len\) must be between 1 and 11, got 0"),
    ("copy", {"seq_len": 4, "k": 4}, "between 1 and 3, got 4"),
    ("copy", {"seq_len": 65}, "seq_len must be between 2 and 64, got 65"),
    ("copy", {"k": 2.0}, "k must be a whole number, got 2.0"),
    ("copy", {"k": True}, "k must be a whole number, got True"),
    ("reverse", {"m": 1}, r"m \(symbols to reverse\) must be between 2 and 32, got 1"),
    ("sort", {"m": "5"}, "m must be a whole number, got '5'"),
    ("induction", {"max_pattern": 9}, r"max_pattern \(at most symbols .*\) must be between 2 and 8, got 9"),
    ("induction", {"seq_len": 6}, "max_pattern .* must be between 2 and 5, got 6"),
    ("induction", {"min_pattern": 7}, r"min_pattern \(at most max_pattern\) must be between 2 and 6, got 7"),
    ("sum", {"seq_len": 1}, "seq_len must be between 2 and 64, got 1"),
])
def test_bad_options_raise_config_error(task_id: str, options: dict, message: str) -> None:
    """An unknown task or option, or a size out of bounds, raises ConfigError saying what is allowed."""
    with pytest.raises(ConfigError, match=message):
        make_task(task_id, **options)


@pytest.mark.parametrize(("call", "message"), [
    (lambda t: training_batch(t, 0, 0, 0), "n .* must be between 1 and 4096, got 0"),
    (lambda t: training_batch(t, 0, 0, MAX_SEQUENCES + 1), "got 4097"),
    (lambda t: training_batch(t, -1, 0, 8), "seed must be between"),
    (lambda t: training_batch(t, 0, 2**32, 8), "step must be between"),
    (lambda t: training_batch(t, 0, 1.5, 8), "step must be a whole number"),
    (lambda t: held_out(t, True, 8), "seed must be a whole number"),
])
def test_bad_stream_arguments_raise_config_error(call, message: str) -> None:
    """A batch size, seed or step out of bounds raises ConfigError instead of drawing a strange batch."""
    with pytest.raises(ConfigError, match=message):
        call(make_task("copy"))


def test_tasks_import_no_ui_library() -> None:
    """The tasks module is engine code: importing and using it loads no panel, bokeh or param."""
    code = ("import json, sys\nfrom blocktrace.explorables.engine import tasks\n"
            "tasks.held_out(tasks.make_task('induction'), 0, 4)\n"
            "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          check=True)
    loaded = set(json.loads(done.stdout.splitlines()[-1]))
    assert "numpy" in loaded and not loaded & {"panel", "bokeh", "param"}
