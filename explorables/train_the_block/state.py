"""The single source of truth for the train-the-block explorable: the race's set-up, and what it did.

A race is two models on one task, the same data and seeds, differing in the one choice the student picks
(`difference`). Everything that decides the race is a parameter here and a key in the address, so the same
link replays the same race, bit for bit, on the same NumPy. Nothing here runs the race: the page's view asks
the runner (runner.py) for slices and records them with `record`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np
import param

from blocktrace.explorables.components.prediction import Prediction
from blocktrace.explorables.components.url_state import QueryKey, read_choice, read_int, read_number, write_number
from blocktrace.explorables.engine import tasks as task_data
from blocktrace.explorables.engine.training import DEFAULT_SETUPS, HELD_OUT, StepRecord, TrainSettings
from blocktrace.explorables.train_the_block.runner import RaceSpec, Reading, Slice

__all__ = ["BUDGET", "DIFFERENCES", "FLOORS", "LESSON_RACES", "PREDICTION_CHOICES", "QUERY_KEYS", "RATES",
           "SETUP_PARAMS", "TARGET", "TARGET_TEXT", "TOGETHER_STEPS", "WARMUPS", "Difference", "RaceState", "Side",
           "outcome", "outcome_sentence", "race_spec", "verdict_sentence"]

TARGET = 0.9  # held-out accuracy that counts as learned
TARGET_TEXT = f"{100 * TARGET:.0f} %"  # as every text on the page writes it ("90 %", with its space)
TOGETHER_STEPS = 50  # reaching the target this close together counts as a tie
BUDGET = 1000  # steps a race takes unless stopped (the server's cap is training.MAX_STEPS)
FLOORS = (2, 6, 12, 24)
RATES = (0.001, 0.003, 0.01, 0.03)  # Adam's learning rates on offer
WARMUPS = (0, 100, 200)  # warm-up steps on offer (both models, unless warm-up is the difference)
SETUP_PARAMS = ("task", "difference", "floors", "lr", "warmup", "seed")  # what decides a race
MAX_SEED = 9999
# The races the lesson asks every student to play (lessons/train-the-block, "Run the comparison", steps 1-7), by a
# short name: `blocktrace warm` computes them ahead of class. Each is a set-up of SETUP_PARAMS.
LESSON_RACES = {
    "placement": {"task": "copy", "difference": "placement", "floors": 12, "lr": 0.01, "warmup": 0, "seed": 0},
    "placement-warmup-100": {"task": "copy", "difference": "placement", "floors": 12, "lr": 0.01, "warmup": 100,
                             "seed": 0},
    "placement-rate-0.003": {"task": "copy", "difference": "placement", "floors": 12, "lr": 0.003, "warmup": 0,
                             "seed": 0},
    "placement-rate-0.003-warmup-200": {"task": "copy", "difference": "placement", "floors": 12, "lr": 0.003,
                                        "warmup": 200, "seed": 0},
    "residual": {"task": "copy", "difference": "residual", "floors": 12, "lr": 0.01, "warmup": 0, "seed": 0},
    "depth-pattern": {"task": "induction", "difference": "depth", "floors": 12, "lr": 0.01, "warmup": 0, "seed": 0},
}


@dataclass(frozen=True)
class Difference:
    """The one choice two models differ in: its menu label, each side's name and what each side changes."""

    label: str
    name_a: str
    name_b: str
    config_a: tuple[tuple[str, object], ...] = ()  # BlockConfig changes
    config_b: tuple[tuple[str, object], ...] = ()
    settings_a: tuple[tuple[str, object], ...] = ()  # TrainSettings changes
    settings_b: tuple[tuple[str, object], ...] = ()


DIFFERENCES: dict[str, Difference] = {
    "placement": Difference("Where the norm sits", "pre-norm", "post-norm",
                            (("placement", "pre"),), (("placement", "post"),)),
    "residual": Difference("Add or replace the stream", "add", "replace",
                           (("residual", "add"),), (("residual", "replace"),)),
    "norm": Difference("Which norm", "RMSNorm", "LayerNorm", (("norm", "rmsnorm"),), (("norm", "layernorm"),)),
    "depth": Difference("How deep", "2 floors", "{floors} floors", (("n_layers", 2),)),
    "lr": Difference("Learning rate", "rate {lr_a:g}", "rate {lr_b:g}", settings_b=(("lr", 10.0),)),
    "warmup": Difference("Warm-up", "no warm-up", "100 warm-up steps", settings_a=(("warmup", 0),),
                         settings_b=(("warmup", 100),)),
}

PREDICTION_CHOICES = {
    "a-first": f"A reaches {TARGET_TEXT} held-out accuracy first.",
    "b-first": f"B reaches {TARGET_TEXT} held-out accuracy first.",
    "together": f"They reach it within {TOGETHER_STEPS} steps of each other.",
    "neither": f"Neither reaches it within {BUDGET:,} steps.",
}


def outcome(reached_a: int | None, reached_b: int | None) -> str:
    """Which prediction the race bore out, from the step at which each side first read TARGET (None: never)."""
    if reached_a is None and reached_b is None:
        return "neither"
    if reached_a is not None and reached_b is not None and abs(reached_a - reached_b) <= TOGETHER_STEPS:
        return "together"
    if reached_b is None or (reached_a is not None and reached_a < reached_b):
        return "a-first"
    return "b-first"


def outcome_sentence(result: str, names: tuple[str, str], reached: tuple[int | None, int | None],
                     stopped: tuple[bool, bool]) -> str:
    """What happened, as one whole sentence: `result` is outcome()'s, `names` the sides' ("pre-norm",
    "post-norm"), `reached` the step at which each read TARGET (None: not yet) and `stopped` whether each has
    stopped training. Whole sentences only: a sentence built from pieces of others read "first. (not what
    happened)." (issue 38)."""
    a, b = (f"{side} ({name})" for side, name in zip("AB", names, strict=True))
    if result == "neither":
        return f"Neither reached {TARGET_TEXT} held-out accuracy before both stopped."
    if result == "together":
        return (f"Both reached {TARGET_TEXT} held-out accuracy within {TOGETHER_STEPS} steps of each other: "
                f"{a} at step {reached[0]:,}, {b} at step {reached[1]:,}.")
    first, other = (0, 1) if result == "a-first" else (1, 0)
    winner, loser = (a, b) if first == 0 else (b, a)
    text = f"{winner} reached {TARGET_TEXT} held-out accuracy first, at step {reached[first]:,}; "
    if reached[other] is not None:
        return text + f"{loser} reached it at step {reached[other]:,}."
    if stopped[other]:
        return text + f"{loser} stopped without reaching it."
    return text + f"{loser} had not reached it {TOGETHER_STEPS} steps later."


def verdict_sentence(predicted: str, result: str) -> str:
    """The student's prediction against the race, as whole sentences: the judgement, then the prediction as
    the page offered it (a sentence of its own)."""
    judgement = "Your prediction was right." if predicted == result else "Your prediction was not what happened."
    return f"{judgement} You predicted: {PREDICTION_CHOICES[predicted]}"


QUERY_KEYS = {
    "task": QueryKey("task", read_choice(*task_data.TASKS)),
    "vs": QueryKey("difference", read_choice(*DIFFERENCES)),
    "floors": QueryKey("floors", lambda text: _one_of(FLOORS, read_int(1, max(FLOORS))(text))),
    "lr": QueryKey("lr", lambda text: _one_of(RATES, read_number(0, 1)(text)), write_number),
    "warmup": QueryKey("warmup", lambda text: _one_of(WARMUPS, read_int(0, max(WARMUPS))(text))),
    "seed": QueryKey("seed", read_int(0, MAX_SEED)),
}


def _one_of(choices: tuple, value):
    if value not in choices:
        raise ValueError(value)
    return value


@dataclass
class Side:
    """What one model did so far: every step's record and each held-out reading (step, loss, accuracy)."""

    steps: list[StepRecord]
    held_out: list[Reading]
    running: bool = True
    diverged_at: int | None = None  # the step whose update was refused (loss or weights no longer finite)

    @property
    def reached(self) -> int | None:
        """The step count at the first held-out reading of at least TARGET."""
        return next((step for step, _, accuracy in self.held_out if accuracy >= TARGET), None)



@lru_cache(maxsize=256)
def race_spec(task: str, difference: str, floors: int, seed: int, lr: float, warmup: int) -> RaceSpec:
    """The race a set-up describes (frozen, so one is shared by every page and update that asks: a page reads it
    several times an update)."""
    d = DIFFERENCES[difference]
    base = DEFAULT_SETUPS[task].config.with_(n_layers=floors, seed=seed)
    settings = TrainSettings(lr=lr, warmup=warmup)

    def side(config_changes, settings_changes):
        changes = dict(settings_changes)
        if "lr" in changes:  # a factor of the chosen rate
            changes["lr"] = min(lr * changes["lr"], 1.0)
        return base.with_(**dict(config_changes)), replace(settings, **changes)

    config_a, settings_a = side(d.config_a, d.settings_a)
    config_b, settings_b = side(d.config_b, d.settings_b)
    return RaceSpec(task_data.make_task(task), seed, config_a, config_b, settings_a, settings_b)

class RaceState(param.Parameterized):
    """The race's set-up, and both models' progress."""

    task = param.Selector(default="copy", objects=list(task_data.TASKS), doc="The task both models learn.")
    difference = param.Selector(default="placement", objects=list(DIFFERENCES),
                                doc="The one choice the two models differ in.")
    floors = param.Selector(default=12, objects=list(FLOORS),
                            doc="Floors in each model (B's depth when the race is about depth).")
    lr = param.Selector(default=0.01, objects=list(RATES),
                        doc="Adam's learning rate, for both (A's when racing rates).")
    warmup = param.Selector(default=0, objects=list(WARMUPS),
                            doc="Steps over which both models' rate rises to its full value (unless warm-up is "
                                "the difference).")
    seed = param.Integer(default=0, bounds=(0, MAX_SEED), doc="Seeds both models' weights and the data.")

    generation = param.Integer(default=0, doc="Counts set-up changes and resets: a slice of an older race is ignored.")
    predicted_setup = param.Dict(default=None, allow_None=True,
                                 doc="The set-up the prediction was committed for: held until its race is decided.")
    decided = param.String(default=None, allow_None=True, doc="The verdict of the race the prediction was for.")

    def __init__(self, **params):
        super().__init__(**params)
        self.prediction = Prediction(PREDICTION_CHOICES)
        self.a, self.b = Side([], []), Side([], [])
        self.prediction.param.watch(self._remember_setup, ["committed"])
        # Last of the watchers (the widgets' links among them), so each has seen a refused change before it is
        # set back (as components/locked_controls.py does for the other explorables).
        self.param.watch(self._hold_setup, list(SETUP_PARAMS), precedence=1_000_000)
        self._race_setup = self._setup()
        self.param.watch(self._setup_changed, list(SETUP_PARAMS), precedence=1_000_001)  # after the hold

    def _setup(self) -> dict:
        return {name: getattr(self, name) for name in SETUP_PARAMS}

    def _remember_setup(self, *_events) -> None:
        if self.prediction.committed and self.predicted_setup is None:
            self.predicted_setup = self._setup()

    @property
    def setup_held(self) -> bool:
        """True from the commit until the race it was made for is decided: the set-up cannot change meanwhile."""
        return self.predicted_setup is not None and self.decided is None

    def _hold_setup(self, *_events) -> None:
        if self.setup_held and self._setup() != self.predicted_setup:
            self.param.update(**self.predicted_setup)  # whatever the page sent, the server keeps the race

    def _setup_changed(self, *_events) -> None:
        if self._setup() != self._race_setup:  # not a change the hold just set back
            self._race_setup = self._setup()
            self.reset()

    def reset(self) -> None:
        """A new set-up (or the Reset button): both sides start again from step 0."""
        self.a, self.b = Side([], []), Side([], [])
        self.generation += 1

    def side_names(self) -> tuple[str, str]:
        """What A and B are in this race, with its numbers: ("pre-norm", "post-norm"), ("2 floors", "24 floors")."""
        d, spec = DIFFERENCES[self.difference], self.spec
        numbers = {"floors": self.floors, "lr_a": spec.settings_a.lr, "lr_b": spec.settings_b.lr}  # as raced
        return d.name_a.format(**numbers), d.name_b.format(**numbers)

    @property
    def spec(self) -> RaceSpec:
        """The race these parameters describe."""
        return race_spec(self.task, self.difference, self.floors, self.seed, self.lr, self.warmup)

    def example_tokens(self, example: int) -> np.ndarray:
        """The tokens of held-out sequence `example` of this race (the one runner.look shows). # -> [pos]"""
        task = task_data.make_task(self.task)
        return task_data.held_out(task, self.seed, HELD_OUT).tokens[example]

    def record(self, generation: int, part: Slice) -> bool:
        """Add a slice from the runner; False (and nothing added) when it belongs to an older set-up."""
        if generation != self.generation:
            return False
        for side, steps, held_out, running, diverged in (
                (self.a, part.a, part.held_out_a, part.running_a, part.diverged_a),
                (self.b, part.b, part.held_out_b, part.running_b, part.diverged_b)):
            side.steps.extend(steps)
            side.held_out.extend(held_out)
            side.running = running and len(side.steps) < BUDGET
            side.diverged_at = diverged
        if self.decided is None and self.predicted_setup is not None and self._setup() == self.predicted_setup:
            self.decided = self.result()
        return True

    @property
    def finished(self) -> bool:
        return not (self.a.running or self.b.running)

    def result(self) -> str | None:
        """The prediction the race bore out, as soon as it is decided: both reached the target; one did and the
        other had not within TOGETHER_STEPS more steps (or stopped); or the race ended."""
        ra, rb = self.a.reached, self.b.reached
        if (ra is not None and rb is not None) or self.finished:
            return outcome(ra, rb)
        for reached, other in ((ra, self.b), (rb, self.a)):
            if reached is not None and (not other.running or len(other.steps) > reached + TOGETHER_STEPS):
                return outcome(ra, rb)
        return None
