"""`blocktrace trace`: turn command-line flags into a preset run and format the trace."""

from __future__ import annotations

import argparse

from blocktrace.explorables.engine import run_preset
from blocktrace.explorables.engine.export import to_csv, to_json, to_table
from blocktrace.explorables.engine.parsing import parse_phrase, parse_vector

__all__ = ["run_trace"]

# flag attribute -> BlockConfig field
_CONFIG_FLAGS = {
    "attention_scale": "attention_scale",
    "mlp_scale": "mlp_scale",
    "residual": "residual",
    "norm": "norm",
    "placement": "placement",
    "mlp": "mlp",
    "positions": "positions",
    "causal": "causal",
    "layers": "n_layers",
    "heads": "n_heads",
    "d_model": "d_model",
    "d_mlp": "d_mlp",
    "eps": "eps",
    "seed": "seed",
}


def run_trace(args: argparse.Namespace) -> str:
    """The formatted trace the flags ask for; raises ConfigError on bad input."""
    changes = {field: getattr(args, flag) for flag, field in _CONFIG_FLAGS.items() if getattr(args, flag) is not None}
    vector = parse_vector(args.input) if args.input is not None else None
    if vector is not None and "positions" not in changes:
        changes["positions"] = False  # one vector: positions stay off unless asked
    tokens = parse_phrase(args.tokens) if args.tokens is not None else None
    trace = run_preset(args.preset, vector=vector, tokens=tokens, reverse=args.reverse, **changes)
    fmt = "json" if args.json else args.format
    if fmt == "json":
        return to_json(trace) + "\n"
    if fmt == "csv":
        return to_csv(trace)
    return to_table(trace, detail=args.detail)
