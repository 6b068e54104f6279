"""The fourth lesson, train-the-block: every figure it quotes is the sweep's, and the sweep is the engine's.

lessons/train-the-block/sweep.json is what `benchmarks/race_sweep.py --seeds 20 --json …` wrote (on NumPy 2.4.6):
per race, the summary the benchmark prints and every seed's outcome. Here:

- each count, median and accuracy the lesson prints is made from that file, formatted as the lesson prints it;
- the summaries follow from the outcomes by the benchmark's own `summarise`;
- the benchmark, run again for seed 0 of every race, gives exactly the stored outcomes (bit for bit on the same
  NumPy: the reached steps and accuracies are counts, so only a changed engine moves them);
- each race the lesson asks a student to set up on the page is the sweep's race, input for input.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from blocktrace.app.lessons.loading import Lesson, load_lessons
from blocktrace.explorables.engine import tasks
from blocktrace.explorables.engine.optim import warmup_lr
from blocktrace.explorables.engine.training import DEFAULT_SETUPS, HELD_OUT, TrainSettings
from blocktrace.explorables.train_the_block.runner import EVALUATE_EVERY
from blocktrace.explorables.train_the_block.state import (
    BUDGET,
    QUERY_KEYS,
    TARGET,
    TOGETHER_STEPS,
    RaceState,
    outcome,
)
from tests.benchmark_module import load_benchmark

ROOT = Path(__file__).resolve().parents[2]
LESSON_ID = "train-the-block"
SWEEP_FILE = ROOT / "lessons" / LESSON_ID / "sweep.json"
BENCHMARK = ROOT / "benchmarks" / "race_sweep.py"
SEED = 0  # the page's default seed, the one the lesson's steps quote race by race

# The sweep's races as the lesson names them in its table, in the table's order.
ROWS = {
    "pre-vs-post-12": "Pre-norm against post-norm, rate 0.01",
    "pre-vs-post-12-warmup": "The same, 100 warm-up steps",
    "add-vs-replace-12": "Add against replace, rate 0.01",
    "pre-vs-post-12-lr0.003": "Pre-norm against post-norm, rate 0.003",
    "pre-vs-post-12-lr0.003-warmup": "The same, 200 warm-up steps",
    "depth-2-vs-12": "2 floors against 12, *Continue the pattern*",
}
# The set-up on the page (RaceState's parameters) that races each of them, as the lesson's steps set it.
PAGE_SETUPS = {
    "pre-vs-post-12": {"task": "copy", "difference": "placement", "floors": 12, "lr": 0.01, "warmup": 0},
    "pre-vs-post-12-warmup": {"task": "copy", "difference": "placement", "floors": 12, "lr": 0.01, "warmup": 100},
    "add-vs-replace-12": {"task": "copy", "difference": "residual", "floors": 12, "lr": 0.01, "warmup": 0},
    "pre-vs-post-12-lr0.003": {"task": "copy", "difference": "placement", "floors": 12, "lr": 0.003, "warmup": 0},
    "pre-vs-post-12-lr0.003-warmup": {"task": "copy", "difference": "placement", "floors": 12, "lr": 0.003,
                                      "warmup": 200},
    "depth-2-vs-12": {"task": "induction", "difference": "depth", "floors": 12, "lr": 0.01, "warmup": 0},
}
PRE_AGAINST_POST = [name for name in ROWS if name.startswith("pre-vs-post")]


SWEEP = load_benchmark("race_sweep")
STORED = json.loads(SWEEP_FILE.read_text(encoding="utf-8"))
S = STORED["summaries"]


def lesson() -> Lesson:
    return next(x for x in load_lessons() if x.id == LESSON_ID)


def flat(text: str) -> str:
    return " ".join(text.split())


def text() -> str:
    """The whole lesson file, whitespace collapsed: prose, answers, checkpoints and all."""
    return flat(lesson().path.read_text(encoding="utf-8"))


def outcomes(name: str, which: str) -> list:
    """The stored outcomes of one side of one race, by seed, as the benchmark's Outcome."""
    side = STORED["outcomes"][f"{name}/{which}"]
    return [SWEEP.Outcome(**side[str(seed)]) for seed in range(len(side))]


def seed_of(name: str, which: str, seed: int = SEED):
    return outcomes(name, which)[seed]


# --- the lesson's formats -------------------------------------------------------------------------------

def count(fraction: float, seeds: int = 20) -> str:
    """A share of the seeds as the lesson prints it: '18 of 20'."""
    n = round(fraction * seeds)
    assert abs(n - fraction * seeds) < 1e-9
    return f"{n} of {seeds}"


def pct(accuracy: float) -> str:
    """An accuracy as the page and the lesson print it: '13.3 %'."""
    return f"{100 * accuracy:.1f} %"


def median(step: float | None) -> str:
    """A median step: '250', '862.5', or 'none' when no seed got there."""
    return "none" if step is None else f"{step:g}"


def steps(name: str) -> str:
    return f"{SWEEP.PRESETS[name].steps:,}"


def together(name: str) -> int:
    """How many of the race's seeds the page's rule calls together (reaching 90 % within TOGETHER_STEPS)."""
    verdicts = Counter(outcome(a.reached, b.reached) for a, b in zip(outcomes(name, "a"), outcomes(name, "b"),
                                                                          strict=True))
    return verdicts["together"]


# --- the sweep file -----------------------------------------------------------------------------------------

def test_the_sweep_holds_every_race_over_at_least_20_seeds():
    """Each race of the benchmark, both sides, seeds 0 … n−1 with n ≥ 20: nothing left out, nothing else in."""
    assert set(S) == set(SWEEP.PRESETS) == set(ROWS)
    for name in SWEEP.PRESETS:
        assert S[name]["seeds"] >= 20
        for which in ("a", "b"):
            assert sorted(STORED["outcomes"][f"{name}/{which}"], key=int) == [str(s) for s in range(S[name]["seeds"])]


def test_the_summaries_follow_from_the_outcomes():
    """The stored summaries are the benchmark's `summarise` of the stored outcomes."""
    for name, preset in SWEEP.PRESETS.items():
        assert SWEEP.summarise(preset, outcomes(name, "a"), outcomes(name, "b")) == S[name], name


def test_the_sweep_reads_the_race_as_the_page_does():
    """The benchmark reads held-out accuracy as often as the page, and counts the page's 90 % as learned."""
    assert SWEEP.EVALUATE_EVERY == EVALUATE_EVERY
    assert all(p.target == TARGET for p in SWEEP.PRESETS.values())
    assert all(p.steps <= BUDGET for p in SWEEP.PRESETS.values())


@pytest.fixture(scope="module")
def rerun(tmp_path_factory) -> dict:
    """The benchmark itself, run again for seed 0 of every race (both sides), on every core."""
    out = tmp_path_factory.mktemp("sweep") / "seed0.json"
    # In a process group of its own: a run that never ends is stopped with all its workers, none left behind to
    # load the machine. The bound is for a hang, not for speed: 75-150 s on CI, over 280 s on a busy machine.
    with subprocess.Popen([sys.executable, str(BENCHMARK), "--seeds", "1", "--json", str(out)], cwd=ROOT,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          start_new_session=True) as run:
        try:
            printed, _ = run.communicate(timeout=900)
        except subprocess.TimeoutExpired:
            os.killpg(run.pid, signal.SIGKILL)
            raise
    assert run.returncode == 0, printed
    return json.loads(out.read_text(encoding="utf-8"))


def test_the_stored_outcomes_are_the_engines(rerun):
    """Seed 0 of every race, rerun by the benchmark, comes out exactly as stored: the step each side reached 90 %,
    whether it diverged, and its last held-out accuracy."""
    for key, side in rerun["outcomes"].items():
        assert side[str(SEED)] == STORED["outcomes"][key][str(SEED)], key
    assert set(rerun["outcomes"]) == set(STORED["outcomes"])


def test_each_race_the_lesson_sets_up_is_the_sweeps():
    """The page's race for each set-up the lesson's steps describe has the sweep's task, data, models and training:
    a student who follows a step races the very race the lesson quotes (for any seed)."""
    for name, setup in PAGE_SETUPS.items():
        preset = SWEEP.PRESETS[name]
        for seed in (SEED, 7):
            spec = RaceState(**setup, seed=seed).spec
            base = DEFAULT_SETUPS[preset.task].config
            assert spec.task == tasks.make_task(preset.task) and spec.data_seed == seed, name
            assert spec.config_a == base.with_(**preset.shared, **preset.a, seed=seed), name
            assert spec.config_b == base.with_(**preset.shared, **preset.b, seed=seed), name
            assert spec.settings_a == TrainSettings(**{**preset.settings, **preset.settings_a}), name
            assert spec.settings_b == TrainSettings(**{**preset.settings, **preset.settings_b}), name


def test_the_lessons_explorable_opens_the_race_of_its_bet():
    """The explorable and the prediction open on the default race of the sweep's first row, seed 0; the add race
    is that same pre-norm model, so it comes out the same in every seed."""
    [directive] = lesson().directives("explorable")
    state = {QUERY_KEYS[key].param: QUERY_KEYS[key].read(str(value)) for key, value in directive.attrs["state"].items()}
    assert state == {**PAGE_SETUPS["pre-vs-post-12"], "seed": SEED}
    assert [d.attrs["explorable"] for d in lesson().directives("predict")] == [LESSON_ID]
    add, pre = SWEEP.PRESETS["add-vs-replace-12"], SWEEP.PRESETS["pre-vs-post-12"]
    base = DEFAULT_SETUPS["copy"].config
    assert base.with_(**add.shared, **add.a) == base.with_(**pre.shared, **pre.a) and add.settings == pre.settings
    assert outcomes("add-vs-replace-12", "a") == outcomes("pre-vs-post-12", "a")


# --- what the lesson says --------------------------------------------------------------------------------------

def test_the_set_up_the_lesson_describes_is_the_engines():
    """Task, model, training and the page's rules, as the lesson states them."""
    t = text()
    copy, induction = tasks.make_task("copy"), tasks.make_task("induction")
    config, settings = DEFAULT_SETUPS["copy"].config, TrainSettings(lr=0.01)
    options = dict(induction.options)
    assert (copy.title, copy.seq_len, copy.vocab[0], copy.vocab[-1], dict(copy.options)["k"]) == \
        ("Copy 2 back", 12, "A", "H", 2)
    assert f"shows sequences of {copy.seq_len} letters drawn from {copy.vocab[0]} to {copy.vocab[-1]}" in t
    assert f"Guessing is right 1 time in {copy.answers}, {100 * copy.chance_accuracy:g} %" in t
    assert (config.d_model, config.n_heads, config.norm, config.mlp) == (16, 2, "rmsnorm", "swiglu")
    assert f"12 floors of width {config.d_model}, with {config.n_heads} attention heads, RMSNorm and a SwiGLU" in t
    assert all(p.shared.get("n_layers", 12) == 12 and p.b.get("n_layers", 12) == 12 for p in SWEEP.PRESETS.values())
    assert (settings.optimizer, settings.clip) == ("adam", 1.0)
    assert f"batches of {settings.batch} sequences" in t and "learn with Adam" in t
    assert f"clips the gradients to a global norm of {settings.clip:g}" in t
    assert f"Every {EVALUATE_EVERY} steps each model answers {HELD_OUT} held-out sequences" in t
    assert f"held-out accuracy reaches {TARGET:.0%}".replace("%", " %") in t
    assert f"has not caught up within {TOGETHER_STEPS} more steps" in t
    assert f"up to step {BUDGET:,}" in t
    assert f"(a pattern of {options['min_pattern']} to {options['max_pattern']} letters repeats" in t
    assert induction.title == "Continue the pattern"
    assert f"six races were each run twenty times, with the seeds 0 to {S['pre-vs-post-12']['seeds'] - 1}" in t
    assert S["pre-vs-post-12"]["seeds"] == 20
    assert len(SWEEP.PRESETS) == 6
    rise = warmup_lr(0.003, 0, 200)
    assert f"a 200-step warm-up at 0.003 starts at {rise:.6f} and reaches 0.003 at step 199" in t
    assert warmup_lr(0.003, 199, 200) == 0.003 and warmup_lr(0.003, 198, 200) < 0.003


def test_the_guided_steps_quote_the_sweep():
    """Every count, median and accuracy of the comparison's steps, made from the stored file."""
    t = text()
    pp, pw, ar = S["pre-vs-post-12"], S["pre-vs-post-12-warmup"], S["add-vs-replace-12"]
    p3, p3w, dp = S["pre-vs-post-12-lr0.003"], S["pre-vs-post-12-lr0.003-warmup"], S["depth-2-vs-12"]
    chance = pct(tasks.make_task("copy").chance_accuracy)
    n = steps("pre-vs-post-12")
    # 1-2: the bet's race, seed 0, then 20 seeds
    assert seed_of("pre-vs-post-12", "b").reached is None
    assert (f"With seed 0, pre-norm reaches 90 % at step {seed_of('pre-vs-post-12', 'a').reached}, and the race "
            f"stops {TOGETHER_STEPS} steps later without post-norm. Press **Keep training**: at step {n} post-norm's "
            f"held-out accuracy is {pct(seed_of('pre-vs-post-12', 'b').final_accuracy)}") in t
    assert (f"pre-norm reached 90 % first in {count(pp['a_first'])}. Post-norm reached it within {n} steps in "
            f"{count(pp['b_reached'])}, and its median accuracy at step {n} was {pct(pp['b_final_accuracy'])}, "
            f"against {chance} for guessing. Pre-norm's median was step {median(pp['a_median_steps'])}.") in t
    assert all(S[name][f"{w}_diverged"] == 0 for name in S for w in "ab")
    assert "No run of the sweep diverged" in t
    # 3: warm-up alone
    assert (f"pre-norm first in {count(pw['a_first'])}, post-norm at 90 % within {steps('pre-vs-post-12-warmup')} "
            f"steps in {count(pw['b_reached'])}, with a median accuracy of {pct(pw['b_final_accuracy'])} at step "
            f"{steps('pre-vs-post-12-warmup')}") in t
    # 4: a smaller rate
    assert SWEEP.PRESETS["pre-vs-post-12-lr0.003"].steps == BUDGET
    assert f"These races ran for {steps('pre-vs-post-12-lr0.003')} steps, as long as the page's." in t
    assert (f"Post-norm reached 90 % in {count(p3['b_reached'])} seeds, at a median step of "
            f"{median(p3['b_median_steps'])} among those seeds, and its median accuracy at the end was "
            f"{pct(p3['b_final_accuracy'])}. Pre-norm reached it in {count(p3['a_reached'])} (median step "
            f"{median(p3['a_median_steps'])}), first every time.") in t
    assert p3["a_first"] == 1.0 and seed_of("pre-vs-post-12-lr0.003", "b").reached is not None
    assert (f"pre-norm gets there at step {seed_of('pre-vs-post-12-lr0.003', 'a').reached}, and with **Keep "
            f"training** post-norm at step {seed_of('pre-vs-post-12-lr0.003', 'b').reached}.") in t
    # 5: a smaller rate and a warm-up
    assert p3w["a_median_steps"] > p3["a_median_steps"]
    assert (f"Post-norm reached 90 % in {count(p3w['b_reached'])} seeds, at a median step of "
            f"{median(p3w['b_median_steps'])}, with a median accuracy of {pct(p3w['b_final_accuracy'])} at the end. "
            f"Pre-norm still reached it first in {count(p3w['a_first'])}, and the warm-up slowed it too: its median "
            f"step went from {median(p3['a_median_steps'])} to {median(p3w['a_median_steps'])}.") in t
    assert (f"With seed 0, pre-norm reaches 90 % at step {seed_of('pre-vs-post-12-lr0.003-warmup', 'a').reached} and, "
            f"with **Keep training**, post-norm at step {seed_of('pre-vs-post-12-lr0.003-warmup', 'b').reached}.") in t
    # 6: add against replace
    n = steps("add-vs-replace-12")
    assert f"with seed 0 it reaches 90 % at step {seed_of('add-vs-replace-12', 'a').reached} again" in t
    assert (f"Over 20 seeds adding reached 90 % first in {count(ar['a_first'])} (median step "
            f"{median(ar['a_median_steps'])}); replacing reached it within {n} steps in {count(ar['b_reached'])}, "
            f"with a median accuracy of {pct(ar['b_final_accuracy'])} at step {n}.") in t
    # 7: depth
    assert dp["a_reached"] == dp["b_reached"] == 1.0
    assert (f"Both learned in {count(1.0)} seeds, at median steps of {median(dp['a_median_steps'])} (2 floors) and "
            f"{median(dp['b_median_steps'])} (12 floors). The 2-floor model read 90 % first in {count(dp['a_first'])} "
            f"seeds, the 12-floor one in {count(dp['b_first'])}, and in {count(dp['same_reading'])} they got there at "
            f"the same reading. By the page's rule, {together('depth-2-vs-12')} of the 20 races end together.") in t


def test_the_table_is_the_sweeps_summary():
    """One row per race, every cell made from the stored summary (counts of seeds, out of the sweep's 20)."""
    t = lesson().path.read_text(encoding="utf-8")
    assert "every count is out of its 20 seeds" in flat(t)

    def seeds(fraction: float) -> int:
        return int(count(fraction).split()[0])

    for name, label in ROWS.items():
        s = S[name]
        assert s["seeds"] == 20
        row = (f"| {label} | {steps(name)} | {seeds(s['a_first'])} | {seeds(s['a_reached'])} / "
               f"{seeds(s['b_reached'])} | {median(s['a_median_steps'])} / {median(s['b_median_steps'])} | "
               f"{pct(s['a_final_accuracy'])} / {pct(s['b_final_accuracy'])} |")
        assert row in t, row


def test_the_conclusions_and_failure_modes_quote_the_sweep():
    """What the lesson concludes for each claim, its failure modes and its checkpoints hold in the stored file."""
    t = text()
    ar, pw, p3, p3w = (S[k] for k in ("add-vs-replace-12", "pre-vs-post-12-warmup", "pre-vs-post-12-lr0.003",
                                       "pre-vs-post-12-lr0.003-warmup"))
    assert (f"a 12-floor stack learned the copy task within {steps('add-vs-replace-12')} steps in "
            f"{count(ar['a_reached'])} seeds; without it, in {count(ar['b_reached'])}") in t
    assert all(S[name]["a_first"] == 1.0 for name in PRE_AGAINST_POST)
    assert "Pre-norm reached 90 % first in every seed of every setting tried." in t
    assert f"with a warm-up of 200 steps and a rate of 0.003 it learned in {count(p3w['b_reached'])} seeds" in t
    assert p3["b_reached"] < 0.5 and pw["b_reached"] < 0.5, "neither change alone was enough"
    assert f"seed 0's post-norm reached 90 %, but only {count(p3['b_reached'])} seeds did" in t
    assert f"Rate 0.003 with 200 warm-up steps: {count(p3w['b_reached'])} seeds" in t
    assert f"Rate 0.01 with 100 warm-up steps: {count(pw['b_reached'])} seeds" in t
    assert f"post-norm stayed near {pct(tasks.make_task('copy').chance_accuracy)}" in t
    assert f"2 and 12 floors together in {together('depth-2-vs-12')} of 20 races" in t
    widths = {DEFAULT_SETUPS[p.task].config.d_model for p in SWEEP.PRESETS.values()}
    depths = {p.shared.get("n_layers") or p.b.get("n_layers") for p in SWEEP.PRESETS.values()}
    assert widths == {16} and depths == {12}
    assert "Nothing wider than 16 or deeper than 12 was raced" in t
    checkpoint = next(d for d in lesson().directives("checkpoint") if d.attrs["id"] == "warm-up-alone")
    [right] = [o for o in checkpoint.attrs["options"] if o["correct"]]
    assert pw["b_reached"] == 0 and right["text"] == "None of them."
    assert right["feedback"].startswith(f"{count(pw['b_reached'])}.")
    assert pct(pw["b_final_accuracy"]) in flat(str(checkpoint.attrs))


def test_every_figure_in_the_lesson_is_one_the_sweep_or_the_set_up_gives():
    """A catch-all: each 'n of 20', each percentage and each step the lesson names is a figure of the stored file
    (or a setting of the race), so no figure can be added without its source."""
    t = text()
    summaries = list(S.values())
    fractions = {k: v for s in summaries for k, v in s.items() if k.endswith(("first", "reached", "same_reading",
                                                                              "neither"))}
    counts = {count(v) for s in summaries for k, v in s.items() if k in fractions} | {count(1.0)}
    counts |= {f"{together(name)} of 20" for name in S}
    for found in re.findall(r"\b\d+ of \d+\b", t):
        assert found in counts, found
    seed_accuracies = [seed_of(name, w).final_accuracy for name in S for w in "ab"]
    accuracies = {pct(s[f"{w}_final_accuracy"]) for s in summaries for w in "ab"} | {pct(a) for a in seed_accuracies}
    accuracies |= {f"{100 * TARGET:g} %", pct(tasks.make_task("copy").chance_accuracy)}
    for found in re.findall(r"\b\d+(?:\.\d+)? %", t):
        assert found in accuracies, found
    steps_named = {str(seed_of(name, w).reached) for name in S for w in "ab"}
    steps_named |= {median(s[f"{w}_median_steps"]) for s in summaries for w in "ab"}
    steps_named |= {steps(name) for name in S} | {"0", "199"}  # a race's start; the last warm-up step
    for found in re.findall(r"\bsteps? (\d[\d,]*(?:\.\d+)?)\b", t):
        assert found in steps_named, found
