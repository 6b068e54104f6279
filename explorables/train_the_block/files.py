"""The race's downloads: both models' curves as CSV, and both models' current weights as JSON.

Pure functions of the state (and of the weights the runner sent back); the view hands them to Panel's
FileDownload when a button is pressed. The curves are what the page drew; the weights are the engine's
export of a model (engine/export.py's model_to_dict), so the same file can be read back by anything that
reads the engine's configs and parameters.
"""

from __future__ import annotations

import csv
import io
import json

from blocktrace.explorables.engine.export import model_to_dict
from blocktrace.explorables.engine.params import Params
from blocktrace.explorables.train_the_block.state import SETUP_PARAMS, RaceState

__all__ = ["CURVE_COLUMNS", "curves_csv", "weights_json"]

CURVE_COLUMNS = ("step", "model", "name", "loss", "grad_norm", "lr", "held_out_loss", "held_out_accuracy")


def curves_csv(state: RaceState) -> str:
    """One row per model per step taken: the batch's loss, the gradient norm before clipping and the rate used;
    the held-out loss and accuracy on the rows of steps where they were read (every EVALUATE_EVERY steps).
    Steps are counted from 1, as on the page's axes."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CURVE_COLUMNS)
    for model, name, side in zip("AB", state.side_names(), (state.a, state.b), strict=True):
        readings = {step: (loss, accuracy) for step, loss, accuracy in side.held_out}
        for record in side.steps:
            step = record.step + 1
            held = readings.get(step)
            writer.writerow([step, model, name, repr(record.loss), repr(record.grad_norm), repr(record.lr),
                             repr(held[0]) if held else "", repr(held[1]) if held else ""])
    return out.getvalue()


def weights_json(state: RaceState, weights: tuple[tuple[int, Params], tuple[int, Params]]) -> str:
    """Both models' set-up and current parameters, with the race's set-up (its address keys)."""
    spec = state.spec
    models = {}
    for model, name, config, settings, (steps, params) in zip(
            "AB", state.side_names(), (spec.config_a, spec.config_b), (spec.settings_a, spec.settings_b), weights,
            strict=True):
        models[model] = {"name": name, "steps": steps, "lr": settings.lr, "warmup": settings.warmup,
                         "optimizer": settings.optimizer, **model_to_dict(config, params, spec.task.vocab)}
    race = {name: getattr(state, name) for name in SETUP_PARAMS}
    return json.dumps({"race": race, "models": models}, indent=1, ensure_ascii=False, allow_nan=False)
