"""The single source of truth for the block-trace explorable: controls in, trace out."""

from __future__ import annotations

import numpy as np
import param

from blocktrace.explorables.components.prediction import GATE_EVENTS, Prediction
from blocktrace.explorables.components.shared_cache import SharedCache
from blocktrace.explorables.components.updates import set_params
from blocktrace.explorables.components.url_state import (
    QueryKey,
    read_choice,
    read_number,
    write_number,
)
from blocktrace.explorables.engine import ConfigError, Trace, run_preset
from blocktrace.explorables.engine.parsing import parse_vector

__all__ = ["CONSTANT_INPUT", "CORRECT_PREDICTION", "DEFAULT_INPUT", "EXPERIMENTS", "PREDICTION_CHOICES", "QUERY_KEYS",
           "ROW_KEYS", "TRACES", "TraceState", "traced"]

PRESET = "single-token"
DEFAULT_INPUT = "1.5, -0.5, 0.25, 2"
CONSTANT_INPUT = "2, 2, 2, 2"
MIN_WIDTH, MAX_WIDTH = 2, 16

# The eight rows of the lesson's trace, by engine key.
ROW_KEYS = (
    "blocks.0.resid_pre",
    "blocks.0.ln1.normalized",
    "blocks.0.attn_out",
    "blocks.0.resid_mid",
    "blocks.0.ln2.normalized",
    "blocks.0.mlp.hidden",
    "blocks.0.mlp_out",
    "blocks.0.resid_post",
)

PREDICTION_CHOICES = {
    "keep-erase": "Zero updates return the input unchanged; replacing would erase it.",
    "zero-both": "Zero updates return a zero vector, whether the block adds or replaces.",
    "keep-both": "The input comes out unchanged either way: replacing is harmless.",
    "normalised": "The output is the normalised input (RMS 1), either way.",
}
CORRECT_PREDICTION = "keep-erase"
EXPERIMENTS = {  # what the prediction is about: both seen, the page says whether it was right
    "zero-add": "zero updates, adding",
    "zero-replace": "zero updates, replacing",
}


# Traces for the settings most recently used in this process, shared by its sessions (read-only).
TRACES: SharedCache[Trace] = SharedCache(256)  # at most about 9 MB (35 KB a trace at width 16)


def settings_key(vector: tuple[float, ...], attention_scale: float = 1.0, mlp_scale: float = 1.0,
                 replace: bool = False, norm: str = "rmsnorm") -> tuple:
    """The settings as exact bits: -0.0 and 0.0 are different inputs, 0.35 typed twice is one."""
    return (np.asarray(vector, dtype=float).tobytes(), float(attention_scale).hex(), float(mlp_scale).hex(),
            bool(replace), norm)


def traced(vector: tuple[float, ...], attention_scale: float = 1.0, mlp_scale: float = 1.0,
           replace: bool = False, norm: str = "rmsnorm") -> Trace:
    """The block's trace for these settings; the same object for the same settings, its arrays read-only."""
    key = settings_key(vector, attention_scale, mlp_scale, replace, norm)

    def compute() -> Trace:
        trace = run_preset(PRESET, vector=list(vector), attention_scale=float(attention_scale),
                           mlp_scale=float(mlp_scale), residual="replace" if replace else "add", norm=norm)
        for stage in trace.stages:
            stage.values.flags.writeable = False
        return trace

    return TRACES.get(key, compute)


def _read_input(text: str) -> str:
    parse_vector(text, MIN_WIDTH, MAX_WIDTH)  # raises ConfigError (a ValueError) if unusable
    return text


QUERY_KEYS = {
    "input": QueryKey("input_text", _read_input),
    "attention_scale": QueryKey("attention_scale", read_number(0.0, 3.0), write_number),
    "residual": QueryKey("replace", lambda text: read_choice("add", "replace")(text) == "replace",
                         lambda replace: "replace" if replace else "add"),
    "mlp_scale": QueryKey("mlp_scale", read_number(0.0, 3.0), write_number),
    "norm": QueryKey("norm", read_choice("rmsnorm", "layernorm")),
    "stage": QueryKey("inspect", read_choice(*ROW_KEYS)),  # the stage shown component by component
}


class TraceState(param.Parameterized):
    """Controls of the block trace and the trace they produce."""

    input_text = param.String(default=DEFAULT_INPUT, doc="The token vector as typed, 2 to 16 numbers.")
    attention_scale = param.Number(default=1.0, bounds=(0.0, 3.0), step=0.05,
                                   doc="Multiplies the attention update; 0 switches it off.")
    mlp_scale = param.Number(default=1.0, bounds=(0.0, 3.0), step=0.05,
                             doc="Multiplies the MLP update; 0 switches it off.")
    replace = param.Boolean(default=False,
                            doc="Replace the stream with each update (broken) instead of adding the update.")
    norm = param.Selector(default="rmsnorm", objects=["rmsnorm", "layernorm"],
                          doc="RMSNorm rescales only; LayerNorm mean-centres first.")
    inspect = param.Selector(default=ROW_KEYS[-1], objects=list(ROW_KEYS),
                             doc="The stage shown component by component.")

    vector = param.List(default=[], item_type=float, doc="The last vector that parsed.")
    input_error = param.String(default="", doc="Why the typed vector could not be used (empty when it could).")
    trace = param.Parameter(default=None, doc="The engine's trace for the current settings.")
    baseline = param.Parameter(default=None, doc="Default block settings on the same input.")

    tried = param.List(default=[], item_type=str,
                       doc="The experiments that judge the prediction, each once seen after it was committed: "
                           "EXPERIMENTS' keys.")

    def __init__(self, **params):
        super().__init__(**params)
        self.prediction = Prediction(PREDICTION_CHOICES)
        self.prediction.param.watch(self._note_experiment, GATE_EVENTS)

    def _note_experiment(self, *_events) -> None:
        """Mark the experiment now on screen as seen, once the prediction is committed (not before)."""
        seen = self._experiment_on_screen()
        if seen is not None:
            self.tried = [*self.tried, seen]

    def _experiment_on_screen(self) -> str | None:
        """The experiment the controls show, if it is one not seen since the commit."""
        prediction = getattr(self, "prediction", None)  # None while the state is being made
        if prediction is None or not prediction.unlocked or self.attention_scale != 0 or self.mlp_scale != 0:
            return None
        seen = "zero-replace" if self.replace else "zero-add"
        return None if seen in self.tried else seen

    @property
    def judged(self) -> bool:
        """Both experiments the prediction is about have been seen: its verdict may be shown."""
        return set(EXPERIMENTS) <= set(self.tried)

    @param.depends("input_text", watch=True, on_init=True)
    def _parse_input(self) -> None:
        try:
            vector = parse_vector(self.input_text, MIN_WIDTH, MAX_WIDTH)
        except ConfigError as err:
            self.input_error = str(err)  # the last good vector, and its trace, stay
            return
        self.param.update(input_error="", vector=vector)

    @param.depends("vector", "attention_scale", "mlp_scale", "replace", "norm", watch=True, on_init=True)
    def _run(self) -> None:
        if not self.vector:
            return
        vector = tuple(self.vector)
        baseline, key = self.baseline, settings_key(vector)
        if baseline is None or getattr(self, "_baseline_key", None) != key:  # it follows the vector only
            baseline, self._baseline_key = traced(vector), key
        seen = self._experiment_on_screen()  # in the same update as the trace it is seen in
        set_params(self, trace=traced(vector, self.attention_scale, self.mlp_scale, self.replace, self.norm),
                   baseline=baseline, **({"tried": [*self.tried, seen]} if seen else {}))

    def settings(self) -> tuple:
        """Everything the views show depends on: the trace's settings and the inspected stage."""
        return (*settings_key(tuple(self.vector), self.attention_scale, self.mlp_scale, self.replace, self.norm),
                self.inspect)

    def reset(self) -> None:
        """Every control back to its default (the prediction stays committed)."""
        self.param.update(
            input_text=DEFAULT_INPUT, attention_scale=1.0, mlp_scale=1.0, replace=False, norm="rmsnorm",
            inspect=ROW_KEYS[-1],
        )

    def zero_updates(self) -> None:
        self.param.update(attention_scale=0.0, mlp_scale=0.0)

    # --- what the views read -------------------------------------------------------------

    def rows(self, trace: Trace | None = None) -> list[tuple[str, str, np.ndarray]]:
        """(key, label, vector) for the eight rows of the lesson's trace."""
        trace = trace or self.trace
        return [(key, trace.stage(key).label, trace[key][0]) for key in ROW_KEYS]

    def lost_at(self) -> str | None:
        """The first stream row where the identity path is broken: the original input is gone there."""
        t = self.trace
        checks = {
            "blocks.0.resid_mid": t["blocks.0.resid_pre"] + t["blocks.0.attn_out"],
            "blocks.0.resid_post": t["blocks.0.resid_mid"] + t["blocks.0.mlp_out"],
        }
        if not np.any(t["blocks.0.resid_pre"]):
            return None  # a zero input has nothing to lose
        for key, kept in checks.items():
            if not np.allclose(t[key], kept, rtol=1e-9, atol=1e-12):
                return key
        return None

    def input_kept(self) -> bool:
        """True when the output still contains the input additively: output = input + both updates."""
        t = self.trace
        rebuilt = t["blocks.0.resid_pre"] + t["blocks.0.attn_out"] + t["blocks.0.mlp_out"]
        return bool(np.allclose(t["blocks.0.resid_post"], rebuilt, rtol=1e-9, atol=1e-12))
