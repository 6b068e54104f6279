"""The single source of truth for the block-floor explorable."""

from __future__ import annotations

import param

from blocktrace.explorables.block_floor.divergence import (
    agree_at,
    first_divergence,
    never_reason,
    split_reason,
    stage_count,
    verdict,
)
from blocktrace.explorables.components.checkpoint import Checkpoint, Option
from blocktrace.explorables.components.prediction import Prediction
from blocktrace.explorables.components.url_state import QueryKey, read_int, read_on_off, write_on_off
from blocktrace.explorables.engine import ConfigError, Trace, run_preset
from blocktrace.explorables.engine.parsing import parse_phrase

__all__ = ["CORRECT_BET", "MAX_WORDS", "QUERY_KEYS", "FloorState"]

PRESET = "eat-an-orange"
DEFAULT_PHRASE = "eat an orange"
MAX_WORDS = 8
MAX_FLOORS = 6

BET_CHOICES = {
    "kept-added": "It is kept: the correction is added on top of it.",
    "replaced": "It is replaced by the MLP's output.",
    "rescaled": "It is rescaled to length 1, then the correction is added.",
    "multiplied": "It is multiplied, component by component, by the correction.",
}
CORRECT_BET = "kept-added"


def checkpoints() -> list[Checkpoint]:
    return [
        Checkpoint("why-residual", "Why do both sublayers add their result to the stream instead of replacing it?", [
            Option("So that every correction points in a positive direction.", False,
                   "Corrections can have either sign. The addition keeps the stream whatever the correction's sign."),
            Option("So the stream keeps what it already carries while each sublayer adds a learned correction.", True,
                   "The stream is a running total: output = input + correction, twice per floor."),
            Option("So each floor can turn its vectors back into word ids.", False,
                   "Vectors become scores over words only after the last floor, not inside each one."),
        ]),
        Checkpoint("why-stack", "Why does a stack of identical floors do more than one floor?", [
            Option("Each new floor brings new words into the phrase.", False,
                   "The words stay the same; only their vectors change from floor to floor."),
            Option("The stream is cleared between floors, so each floor starts afresh.", False,
                   "Nothing is cleared: every floor adds to the same running stream."),
            Option("Each floor reads vectors that earlier floors already mixed and corrected, so corrections compose.",
                   True, "Attention on floor 2 reads vectors already shaped by floor 1, so each round builds on the "
                         "last."),
        ]),
    ]


def _read_tokens(text: str) -> str:
    parse_phrase(text, MAX_WORDS)
    return text


QUERY_KEYS = {
    "tokens": QueryKey("phrase", _read_tokens),
    "positions": QueryKey("positions", read_on_off, write_on_off),
    "tracked": QueryKey("tracked", lambda t: read_int(1, MAX_WORDS)(t) - 1, lambda i: str(i + 1)),
    "reverse": QueryKey("reverse", read_on_off, write_on_off),
    "causal": QueryKey("causal", read_on_off, write_on_off),
    # floors before stage: a link is read in this order, and the floors decide how many stages there are
    "floors": QueryKey("floors", read_int(1, MAX_FLOORS)),
    "stage": QueryKey("stage", read_int(1, stage_count(MAX_FLOORS))),
}


class FloorState(param.Parameterized):
    """Controls of the block-floor explorable and the two traces they produce."""

    phrase = param.String(default=DEFAULT_PHRASE, doc="The phrase, 1 to 8 words.")
    positions = param.Boolean(default=True, doc="Add position vectors p₀, p₁, … before the block.")
    tracked = param.Integer(default=2, bounds=(0, MAX_WORDS - 1), doc="Index of the tracked word in the phrase.")
    reverse = param.Boolean(default=True, doc="Show the reversed phrase beside the original.")
    causal = param.Boolean(default=False, doc="Mask the future in attention (a decoder's behaviour).")
    stage = param.Integer(default=1, bounds=(1, stage_count(1)),
                          doc="The stage on view, numbered across floors: 1–8 on floor 1, 9–14 on floor 2, …")
    floors = param.Integer(default=1, bounds=(1, MAX_FLOORS), doc="How many copies of the floor are stacked.")

    words = param.List(default=[], item_type=str, doc="The last phrase that could be used.")
    phrase_error = param.String(default="", doc="Why the typed phrase could not be used.")
    original = param.Parameter(default=None, doc="Trace of the phrase.")
    reversed_ = param.Parameter(default=None, doc="Trace of the reversed phrase.")
    claim_result = param.Tuple(default=None, length=3, allow_None=True,
                               doc="(claimed stage or None for never, verdict, explanation) of the last claim.")

    def __init__(self, **params):
        super().__init__(**params)
        self.bet = Prediction(BET_CHOICES)
        self.checkpoints = checkpoints()

    @param.depends("phrase", watch=True, on_init=True)
    def _parse(self) -> None:
        try:
            words = parse_phrase(self.phrase, MAX_WORDS)
        except ConfigError as err:
            self.phrase_error = str(err)
            return
        self.param.update(phrase_error="", words=words, tracked=min(self.tracked, len(words) - 1))

    @param.depends("words", "positions", "causal", "floors", watch=True, on_init=True)
    def _run(self) -> None:
        # The stepper covers every floor: its bounds follow the floors before the traces change, so that
        # nothing ever looks up a stage the new traces lack.
        last = stage_count(self.floors)
        self.param.stage.bounds = (1, last)  # this instance's copy of the parameter: the slider follows it
        if self.stage > last:
            self.stage = last
        if not self.words:
            return
        settings = dict(tokens=self.words, positions=self.positions, causal=self.causal, n_layers=self.floors)
        self.param.update(original=run_preset(PRESET, **settings),
                          reversed_=run_preset(PRESET, reverse=True, **settings), claim_result=None)

    @param.depends("tracked", watch=True)
    def _clear_claim(self) -> None:
        if self.tracked > len(self.words) - 1:  # e.g. a link naming word 5 of a 3-word phrase
            self.tracked = len(self.words) - 1
        self.claim_result = None

    @property
    def mirror(self) -> int:
        """The tracked word's index in the reversed phrase."""
        return len(self.words) - 1 - self.tracked

    @property
    def last_stage(self) -> int:
        return stage_count(self.floors)

    def divergence(self) -> int | None:
        return first_divergence(self.original, self.reversed_, self.tracked)

    def differs_at(self, stage: int) -> bool:
        """True when the tracked word's vectors differ between the orders at this stage."""
        return not agree_at(self.original, self.reversed_, self.tracked, stage)

    def claim(self, stage: int | None) -> tuple[str, str]:
        """Claim the first divergence at a stage (None: they never diverge); the verdict is computed."""
        truth = self.divergence()
        reason = (never_reason(self.original, self.tracked) if truth is None
                  else split_reason(self.original, self.reversed_, self.tracked, truth))
        on_view = self.stage if self.differs_at(self.stage) else None
        result = verdict(stage, truth, reason, on_view)
        self.claim_result = (stage, *result)
        return result

    def step(self, delta: int) -> None:
        self.stage = max(1, min(self.last_stage, self.stage + delta))

    def traces(self) -> list[tuple[str, Trace, int]]:
        """(title, trace, tracked position) for each order on view."""
        out = [("Original order", self.original, self.tracked)]
        if self.reverse:
            out.append(("Reversed order", self.reversed_, self.mirror))
        return out

PREDICTION_CHOICES = BET_CHOICES  # the name every explorable's choices go by (teacher view, store)
