"""The single source of truth for the decoder-block lab: controls in; traces, checks and depth profiles out."""

from __future__ import annotations

from collections import OrderedDict
from functools import cached_property

import numpy as np
import param

from blocktrace.explorables.components import trained_floors
from blocktrace.explorables.components.prediction import Prediction
from blocktrace.explorables.components.shared_cache import SharedCache
from blocktrace.explorables.components.trained_floors import TrainedFloor
from blocktrace.explorables.components.updates import set_params
from blocktrace.explorables.components.url_state import (
    QueryKey,
    read_choice,
    read_int,
    read_number,
    read_on_off,
    write_number,
    write_on_off,
)
from blocktrace.explorables.decoder_block_lab import budget, checks
from blocktrace.explorables.decoder_block_lab.shapes import Sizes
from blocktrace.explorables.decoder_block_lab.worked import WorkedExample, worked_example
from blocktrace.explorables.engine import BLOCK_KEYS, BlockConfig, ConfigError, Trace, forward, get_preset, ops
from blocktrace.explorables.engine.backward import depth_profile
from blocktrace.explorables.engine.config import MAX_ABS_VALUE
from blocktrace.explorables.engine.parsing import parse_vector

__all__ = ["BUDGETED", "CONSTANT_NORM_TEXT", "CORRECT_PREDICTION", "CORRUPTIONS", "DEFAULT_NORM_TEXT", "DEPTHS",
           "DEPTH_MAX_D", "D_CHOICES", "EXPANSIONS", "HEAD_CHOICES", "MAX_B", "MAX_BLOCKS", "MAX_NORM_WIDTH", "MAX_T",
           "MIN_T", "QUERY_KEYS", "RUNS", "VARIANTS", "ZERO_NORM_TEXT", "LabState", "Run"]

PRESET = "decoder-lab"
# Position labels: the preset's four words, then four more so T can reach 8.
WORDS = ("the", "block", "keeps", "shape", "while", "each", "layer", "adds")
MAX_B = 4
MIN_T = 2
MAX_T = 8
MAX_BLOCKS = budget.DEPTH_STACK
D_CHOICES = [8, 16, 32, 64, 128, 256, 512]
HEAD_CHOICES = [1, 2, 4, 8]  # all divide every width above
EXPANSIONS = [2, 4, 8]
DEPTH_MAX_D = budget.DEPTH_MAX_D  # wider stacks of 48 blocks take seconds; the depth panel runs at this width instead
BUDGETED = ("B", "T", "d", "heads", "expansion", "mlp", "blocks")  # what budget.cost reads
VARIANTS = (("pre", "add"), ("post", "add"), ("pre", "replace"), ("post", "replace"))

DEFAULT_NORM_TEXT = "3, -1, 0.5, 2"
CONSTANT_NORM_TEXT = "2, 2, 2, 2"
ZERO_NORM_TEXT = "0, 0, 0, 0"
EPS_CHOICES = [1e-6, 1e-5, 1e-3, 0.1, 0.0]
MAX_NORM_WIDTH = 16

PREDICTION_CHOICES = {
    "exact": "They stay exactly the same: an earlier position never reads a later one.",
    "slight": "They change a little, because the norms and the MLP mix information across positions.",
    "large": "They change a lot: a value of 999 swamps every position.",
    "neighbour": "Position 1 changes (it sits next to position 2) but position 0 does not.",
}
CORRECT_PREDICTION = "exact"


def _read_from(choices: list[int]):
    def read(text: str) -> int:
        value = int(text)
        if value not in choices:
            raise ValueError(text)
        return value
    return read


QUERY_KEYS = {
    "B": QueryKey("B", read_int(1, MAX_B)),
    "T": QueryKey("T", read_int(MIN_T, MAX_T)),
    "d": QueryKey("d", _read_from(D_CHOICES)),
    "heads": QueryKey("heads", _read_from(HEAD_CHOICES)),
    "expansion": QueryKey("expansion", _read_from(EXPANSIONS)),
    "norm": QueryKey("norm", read_choice("rmsnorm", "layernorm")),
    "mlp": QueryKey("mlp", read_choice("swiglu", "gelu")),
    "placement": QueryKey("placement", read_choice("pre", "post")),
    "causal": QueryKey("causal", read_on_off, write_on_off),
    "residual": QueryKey("residual", read_choice("add", "replace")),
    "zero_eps": QueryKey("zero_eps", read_on_off, write_on_off),
    "split": QueryKey("wrong_split", lambda t: read_choice("right", "wrong")(t) == "wrong",
                      lambda wrong: "wrong" if wrong else "right"),
    "corrupt": QueryKey("corrupt", read_int(0, MAX_T - 1)),
    "corrupt_value": QueryKey("corrupt_value", read_number(-MAX_ABS_VALUE, MAX_ABS_VALUE), write_number),
    "blocks": QueryKey("blocks", read_int(1, MAX_BLOCKS)),
    "inspect": QueryKey("inspect", read_choice(*BLOCK_KEYS)),
    "run": QueryKey("run", trained_floors.read_key),
}
SHAPE = ("d", "heads", "expansion", "norm", "mlp")  # what a trained floor's weights fix
LAST = 1_000_000  # a watcher precedence: after the widgets' links


def _floats(*arrays: np.ndarray) -> int:
    return sum(int(a.size) for a in arrays)


def _read_only(*arrays: np.ndarray) -> None:
    for a in arrays:
        a.flags.writeable = False


class Run:
    """One block on the lab's input under one setting: the input, its trace and SwiGLU's split check, shared by
    the sessions with that setting (every array read-only); the invariants are computed once, when first shown."""

    def __init__(self, x: np.ndarray, trace: Trace, split: checks.SplitResult | None):
        out = [] if split is None or split.out is None else [split.out]
        _read_only(x, *(stage.values for stage in trace), *trace.params.values(), *out)
        self.x, self.trace, self.split = x, trace, split

    @cached_property
    def invariants(self) -> tuple[checks.Check, ...]:
        found = checks.invariants(self.trace)
        split = self.split
        if split is not None and split.error:
            found.append(checks.Check("SwiGLU split keeps the shapes", checks.FAIL,
                                      "chunked along positions instead of features: " + split.error))
        elif split is not None:
            found.append(checks.Check("SwiGLU split keeps the shapes", checks.PASS,
                                      f"gate and value {list(split.shapes[1][1])} each, "
                                      f"output {list(split.shapes[-1][1])}."))
        return tuple(found)

    def floats(self) -> int:
        """Numbers this run holds, its weights included (shared with other runs or not: an upper bound)."""
        return _floats(self.x, *(stage.values for stage in self.trace), *self.trace.params.values())


def _corrupted_floats(entry: tuple[Trace, np.ndarray]) -> int:
    corrupted, delta = entry
    return _floats(delta, *(stage.values for stage in corrupted), *corrupted.params.values())


# What a setting decides, for the settings most recently used in this process, shared by its sessions: a class
# moves the same controls over the same values, so each change is computed once. Runs and corrupted runs are
# bounded by weight (a run at d = 512 holds a thousand times the numbers of one at d = 8, weights included);
# a depth profile is 8 curves of at most 49 numbers.
RUNS: SharedCache[Run] = SharedCache(256, limit=budget.MAX_FLOATS, weigh=Run.floats)
CORRUPTIONS: SharedCache[tuple[Trace, np.ndarray]] = SharedCache(256, limit=budget.MAX_FLOATS,
                                                                  weigh=_corrupted_floats)
DEPTHS: SharedCache[dict] = SharedCache(1024)


def lab_shape(config: BlockConfig) -> dict | None:
    """The lab's shape controls for a block's settings, or None when the lab offers no such shape."""
    expansion, rest = divmod(config.d_mlp * (2 if config.mlp == "swiglu" else 1), config.d_model)
    shape = dict(d=config.d_model, heads=config.n_heads, expansion=expansion, norm=config.norm, mlp=config.mlp)
    fits = (not rest and config.d_model in D_CHOICES and config.n_heads in HEAD_CHOICES and expansion in EXPANSIONS
            and config.mlp in ("swiglu", "gelu") and config.d_head in (None, config.d_model // config.n_heads))
    return shape if fits else None


class LabState(param.Parameterized):
    """Controls of the decoder-block lab and everything computed from them."""

    # sizes (the Shapes panel)
    B = param.Integer(default=1, bounds=(1, MAX_B), doc="Batch items run side by side.")
    T = param.Integer(default=4, bounds=(MIN_T, MAX_T), doc="Positions (tokens) in each batch item.")
    d = param.Selector(default=8, objects=D_CHOICES, doc="Width of the residual stream.")
    expansion = param.Selector(default=4, objects=EXPANSIONS,
                               doc="MLP hidden width as a multiple of d (SwiGLU splits it into gate and value).")
    # design choices
    norm = param.Selector(default="rmsnorm", objects=["rmsnorm", "layernorm"],
                          doc="RMSNorm rescales each row; LayerNorm also subtracts the row's mean.")
    mlp = param.Selector(default="swiglu", objects=["swiglu", "gelu"], doc="The MLP family.")
    placement = param.Selector(default="pre", objects=["pre", "post"],
                               doc="Norm before each sublayer (pre) or after each residual addition (post).")
    causal = param.Boolean(default=True, doc="Mask the future in attention.")
    heads = param.Selector(default=1, objects=HEAD_CHOICES, doc="Attention heads (each of width d / heads).")
    # break it
    residual = param.Selector(default="add", objects=["add", "replace"],
                              doc="Add each update to the stream, or replace the stream with it (broken).")
    zero_eps = param.Boolean(default=False, doc="eps = 0 and an all-zero input row at position 0 (broken).")
    wrong_split = param.Boolean(default=False, doc="Split SwiGLU's projection along positions, not features.")
    # causal safety
    corrupt = param.Integer(default=2, bounds=(0, MAX_T - 1), doc="The input position overwritten.")
    corrupt_value = param.Number(default=999.0, bounds=(-MAX_ABS_VALUE, MAX_ABS_VALUE),
                                 doc="The value written into every feature of that position.")
    # depth
    blocks = param.Integer(default=MAX_BLOCKS, bounds=(1, MAX_BLOCKS), doc="Blocks stacked in the depth panel.")
    # norms side by side
    norm_text = param.String(default=DEFAULT_NORM_TEXT, doc="The vector to normalise, as typed.")
    norm_eps = param.Selector(default=1e-6, objects=EPS_CHOICES, doc="eps of both norms in the side-by-side panel.")
    # worked example
    worked_name = param.Selector(default="X2", objects=["X2"], doc="The lesson intermediate shown in full.")
    # the stage picked in the floor diagram (marked in the stage table)
    inspect = param.Selector(default="resid_post", objects=list(BLOCK_KEYS),
                             doc="The block stage inspected: the diagram's selection, the stage table's marked row.")
    # a floor trained on the race page (components/trained_floors.py)
    run = param.String(default="", doc="The key of a trained floor the race page kept; empty: drawn weights.")
    run_error = param.String(default="", doc="Why the trained floor the link names cannot be shown.")

    # derived
    x = param.Array(default=None, doc="The lab's input [B, T, d].")
    trace = param.Parameter(default=None, doc="One block on the input, with the current choices.")
    split = param.Parameter(default=None, doc="SwiGLU from one combined projection (checks.SplitResult).")
    corrupted = param.Parameter(default=None, doc="The same block on the input with one position overwritten.")
    delta = param.Array(default=None, doc="|corrupted output − clean output| for batch item 0, [T, d].")
    depth = param.Dict(default={}, doc="(placement, residual) -> depth_profile of the stack.")
    norm_vector = param.List(default=[], item_type=float, doc="The last vector that parsed.")
    norm_error = param.String(default="", doc="Why the typed vector could not be used.")
    budget_error = param.String(default="", doc="Why the last sizes asked for were refused (budget.py).")

    def __init__(self, deferred: bool = False, **params):
        """deferred=True: compute nothing until start() (a served page calls it once its browser is connected)."""
        self._params_cache: OrderedDict[tuple, dict[str, np.ndarray]] = OrderedDict()
        self._corrupted_for: tuple = ()  # (trace id, position, value) the corrupted trace was computed for
        self._shown: Run | None = None  # the run whose trace is shown
        self._computed: dict[str, tuple] = {}  # derived value -> the inputs it was last computed from
        self._paused = deferred
        self._good = {name: type(self).param[name].default for name in BUDGETED}  # the last sizes within budget
        self.trained: TrainedFloor | None = None  # the floor `run` names, while it is shown
        self.preset = get_preset(PRESET)
        self.worked: WorkedExample = worked_example()
        super().__init__(**params)
        self.prediction = Prediction(PREDICTION_CHOICES)
        self.param.watch(self._keep_trained_shape, list(SHAPE), precedence=LAST)
        if self.worked.rows:
            names = [r.name for r in self.worked.rows]
            self.param.worked_name.objects = names
            self.worked_name = names[-1]

    # --- building the model ---------------------------------------------------------------

    @property
    def sizes(self) -> Sizes:
        return Sizes(B=self.B, T=self.T, d=self.d, heads=self.heads, expansion=self.expansion)

    @property
    def words(self) -> list[str]:
        """The positions' labels: the trained floor's tokens, else the preset's words."""
        if self.trained is not None:
            return list(self.trained.cut.tokens[0][: self.T])
        return list(WORDS[: self.T])

    # --- a trained floor ------------------------------------------------------------------

    @param.depends("run", watch=True, on_init=True)
    def _open_run(self) -> None:
        """Show the floor `run` names, its shape set from its weights; a key the server does not hold says so
        and the lab keeps (or returns to) its drawn weights."""
        floor = trained_floors.find(self.run) if self.run else None
        shape = None if floor is None else lab_shape(floor.cut.config)
        if self.run and floor is None:
            self.run_error = ("This trained floor is no longer kept on the server (it keeps the most recently opened "
                              f"{trained_floors.KEPT_FLOORS}, until it restarts): the lab shows its drawn weights. "
                              "Open the floor again from the race page.")
        elif floor is not None and shape is None:
            self.run_error = "The lab offers no block of this floor's shape: it shows its drawn weights."
        else:
            self.run_error = ""
        self.trained = floor if shape is not None else None
        if self.trained is not None:
            n_examples, n_positions = floor.cut.inputs.shape[:2]
            self.param.update(**shape, B=min(self.B, n_examples), T=min(self.T, n_positions))

    def _keep_trained_shape(self, *_events) -> None:
        """A trained floor's weights fix the shape, whatever the page sends (watching after the widgets' links, so
        each sees the change before it is set back)."""
        shape = None if self.trained is None else lab_shape(self.trained.cut.config)
        if shape is not None and any(getattr(self, name) != value for name, value in shape.items()):
            self.param.update(**shape)

    def trained_config(self) -> BlockConfig:
        """The trained floor's settings, with the lab's placement, mask, residual and eps switches applied."""
        base = self.trained.cut.config
        return base.with_(placement=self.placement, causal=self.causal, residual=self.residual,
                          eps=0.0 if self.zero_eps else base.eps)

    def config(self, n_layers: int = 1, d: int | None = None, **changes) -> BlockConfig:
        """The block under the current choices (at width d, default the lab's)."""
        d = self.d if d is None else d
        d_mlp = self.expansion * d // 2 if self.mlp == "swiglu" else self.expansion * d
        base = self.preset.config.as_dict()
        settings = dict(
            d_head=None, d_model=d, n_heads=self.heads, d_mlp=d_mlp, n_layers=n_layers, norm=self.norm,
            mlp=self.mlp, placement=self.placement, causal=self.causal, residual=self.residual,
            eps=0.0 if self.zero_eps else base["eps"],
        )
        return BlockConfig(**{**base, **settings, **changes})

    def params_for(self, config: BlockConfig) -> dict[str, np.ndarray]:
        """Seeded parameters, cached: they depend on width, MLP, norm and depth, never on placement or heads.

        The cache holds at most budget.MAX_FLOATS numbers (the least recently used go first), so going
        back and forth between sizes costs no regeneration and a session's memory stays bounded.
        """
        key = (config.d_model, config.d_mlp, config.norm, config.mlp, config.n_layers, config.seed)
        cache = self._params_cache
        if key in cache:
            cache.move_to_end(key)
            return cache[key]
        cache[key] = self.preset.params(config)
        while len(cache) > 1 and sum(v.size for p in cache.values() for v in p.values()) > budget.MAX_FLOATS:
            cache.popitem(last=False)
        return cache[key]

    def run_key(self) -> tuple:
        """What one block's run reads: the sizes, the design, the broken switches and the trained floor, if any."""
        return (self.B, self.T, self.d, self.heads, self.expansion, self.norm, self.mlp, self.placement, self.causal,
                self.residual, self.zero_eps, self.wrong_split, self.run if self.trained is not None else "")

    def depth_key(self) -> tuple:
        """What the depth panel's stacks read (drawn weights, at the depth panel's width, also beside a floor)."""
        return (self.B, self.T, self.depth_d, self.heads, self.expansion, self.norm, self.mlp, self.causal,
                self.zero_eps, self.blocks)

    def settings(self) -> tuple:
        """Every setting the lab's panels read, as exact bits (-0.0 and 0.0 differ; 999 typed twice is one)."""
        return (self.run_key(), self.depth_key(), self.corrupt, float(self.corrupt_value).hex(),
                np.asarray(self.norm_vector, dtype=float).tobytes(), float(self.norm_eps).hex(), self.worked_name,
                self.inspect)

    def cost(self) -> budget.Cost:
        """The estimated work of a change to the current sizes, and the memory they hold."""
        return budget.cost(**{name: getattr(self, name) for name in BUDGETED})

    def admit_sizes(self) -> bool:
        """Whether the current sizes are within the budget. If not, say why and go back to the last
        sizes that were (the defaults for a link): its derived values are still the ones shown."""
        current = {name: getattr(self, name) for name in BUDGETED}
        if current == self._good:
            return True  # admitted before (or the defaults): nothing to estimate
        refusal = self.cost().refusal()
        if not refusal:  # a new change let through; not the undoing of a refused one
            self._good = current
            self.budget_error = ""
            return True
        self.budget_error = refusal
        self.param.update(**self._good)  # re-runs nothing: _run and _run_depth see their last inputs
        return False

    def start(self) -> None:
        """Compute everything a deferred state has not (once; nothing when it was not deferred)."""
        if not self._paused:
            return
        self._paused = False
        with param.parameterized.batch_call_watchers(self):
            self._run()
            self._run_depth()

    def make_input(self, d: int, drawn: bool = False) -> np.ndarray:
        """[B, T, d]: batch item 0 is the preset's word vectors; item b is the same words under seed + b. With a
        trained floor (unless `drawn`), item b is the stream entering it on held-out example b.

        With zero_eps, position 0 of every batch item is all zeros (as a padding row would be).
        """
        if self.trained is not None and not drawn:
            x = np.array(self.trained.cut.inputs[: self.B, : self.T])
        else:
            config = self.config(d=d)
            words = list(WORDS[: self.T])
            x = np.stack([self.preset.embed(words, config.with_(seed=config.seed + b)) for b in range(self.B)])
        if self.zero_eps:
            x[:, 0, :] = 0.0
        return x

    # --- derived values -------------------------------------------------------------------

    @param.depends("B", "T", "d", "heads", "expansion", "norm", "mlp", "placement", "causal", "residual",
                   "zero_eps", "wrong_split", "run", watch=True, on_init=True)
    def _run(self) -> None:
        if self._paused or not self.admit_sizes():
            return
        key = self.run_key()
        if self._computed.get("trace") == key:
            return  # a refused change was undone: what is shown is already this
        self._computed["trace"] = key
        corrupt = min(self.corrupt, self.T - 1)  # a shorter sequence pulls the corrupted position inside it
        run = self._shown = RUNS.get(key, self._compute_run)
        corrupted, delta = self._corrupt(run, corrupt)
        self._corrupted_for = (id(run.trace), corrupt, self.corrupt_value)
        # One update, so every view sees a trace, its corrupted twin and the position together.
        self._set(x=run.x, trace=run.trace, split=run.split, corrupted=corrupted, delta=delta, corrupt=corrupt)

    def _compute_run(self) -> Run:
        config = self.config() if self.trained is None else self.trained_config()
        params = self.params_for(config) if self.trained is None else self.trained.cut.params
        x = self.make_input(self.d)
        trace = forward(config, params, x, self.words)
        split = None
        if self.mlp == "swiglu":
            p = "blocks.0.mlp."
            split = checks.swiglu_split(trace["blocks.0.ln2.normalized"], params[p + "W_gate"],
                                        params[p + "W_value"], params[p + "W_down"], wrong=self.wrong_split)
        return Run(x, trace, split)

    def _corrupt(self, run: Run, corrupt: int) -> tuple[Trace, np.ndarray]:
        """The block on x with position `corrupt` of batch item 0 overwritten, and |Δ output| there (shared by
        the sessions with this setting). # -> [T, d]"""
        key = (self.run_key(), corrupt, float(self.corrupt_value).hex())
        return CORRUPTIONS.get(key, lambda: self._compute_corrupt(run, corrupt))

    def _compute_corrupt(self, run: Run, corrupt: int) -> tuple[Trace, np.ndarray]:
        trace = run.trace
        x = run.x.copy()
        x[0, corrupt, :] = float(self.corrupt_value)
        corrupted = forward(trace.config, trace.params, x, trace.tokens)
        with np.errstate(invalid="ignore"):  # inf − inf, should a huge value overflow, is shown as NaN
            delta = np.abs(corrupted.output[0] - trace.output[0])
        _read_only(delta, *(stage.values for stage in corrupted))
        return corrupted, delta

    @param.depends("mlp", watch=True)
    def _inspect_a_stage_the_block_has(self) -> None:
        if self.inspect == "mlp.value" and self.mlp != "swiglu":  # only SwiGLU has a value projection
            self.inspect = "mlp.hidden"

    @param.depends("corrupt", "corrupt_value", watch=True)
    def _run_corrupted(self) -> None:
        if self._paused or self.trace is None:
            return
        if self._corrupted_for == (id(self.trace), self.corrupt, self.corrupt_value):
            return  # _run has just computed it
        corrupted, delta = self._corrupt(self._shown, self.corrupt)
        self._set(corrupted=corrupted, delta=delta)

    @param.depends("B", "T", "d", "heads", "expansion", "norm", "mlp", "causal", "zero_eps", "blocks",
                   watch=True, on_init=True)
    def _run_depth(self) -> None:
        if self._paused or not self.admit_sizes():
            return
        key = self.depth_key()
        if self._computed.get("depth") == key:
            return
        self._computed["depth"] = key
        self.depth = DEPTHS.get(key, self._compute_depth)

    def _compute_depth(self) -> dict:
        """(placement, residual) -> depth_profile of the stack, for each of the four arrangements."""
        d = self.depth_d
        base = self.config(n_layers=MAX_BLOCKS, d=d)
        params = self.params_for(base)  # the first n blocks of a 48-block stack, so curves extend, never redraw
        x = self.make_input(d, drawn=True)  # drawn stacks of the lab's shape, also beside a trained floor
        profiles = {}
        with np.errstate(all="ignore"):  # eps = 0 on a zero row: NaN travels down, shown as gaps
            for placement, residual in VARIANTS:
                config = base.with_(n_layers=self.blocks, placement=placement, residual=residual)
                profiles[(placement, residual)] = profile = depth_profile(config, params, x)
                _read_only(*profile.values())
        return profiles

    @property
    def depth_d(self) -> int:
        return min(self.d, DEPTH_MAX_D)

    @param.depends("norm_text", watch=True, on_init=True)
    def _parse_norm_vector(self) -> None:
        try:
            vector = parse_vector(self.norm_text, 1, MAX_NORM_WIDTH)
        except ConfigError as err:
            self.norm_error = str(err)  # the last good vector stays
            return
        self._set(norm_error="", norm_vector=vector)

    def _set(self, **values) -> None:
        """set_params (no snapshot of every parameter, as `param.update` takes), leaving out a value already there
        (the same object: no watcher would hear of it)."""
        set_params(self, **{name: value for name, value in values.items() if getattr(self, name) is not value})

    # --- what the views read ----------------------------------------------------------------

    def invariants(self) -> list[checks.Check]:
        """The invariants of the run shown, computed once per setting in this process."""
        return list(self._shown.invariants)

    def verdict(self) -> checks.CausalVerdict:
        return checks.causal_verdict(self.delta, self.corrupt)

    def engine_param_count(self) -> int:
        """Numbers the engine actually stores for this one block."""
        return int(sum(v.size for v in self.trace.params.values()))

    def normalised(self) -> dict[str, np.ndarray]:
        """The typed vector through RMSNorm and LayerNorm (unit gain, zero bias) at the chosen eps."""
        x = np.asarray(self.norm_vector, dtype=float)
        ones, zeros = np.ones_like(x), np.zeros_like(x)
        eps = float(self.norm_eps)
        return {"input": x, "RMSNorm": ops.rms_norm(x, ones, eps), "LayerNorm": ops.layer_norm(x, ones, zeros, eps)}

    def reset(self) -> None:
        """Every control back to its default (the prediction stays committed)."""
        defaults = {name: self.param[name].default for name in (
            "B", "T", "d", "expansion", "norm", "mlp", "placement", "causal", "heads", "residual", "zero_eps",
            "wrong_split", "corrupt", "corrupt_value", "blocks", "norm_text", "norm_eps", "inspect")}
        if self.trained is not None:  # the trained floor's own shape and design
            config = self.trained.cut.config
            defaults.update(lab_shape(config), placement=config.placement, causal=config.causal,
                            residual=config.residual)
        with param.parameterized.batch_call_watchers(self):
            self.param.update(**defaults)
