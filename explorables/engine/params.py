"""Deterministic parameters, word embeddings and position vectors.

Each array is drawn from its own generator seeded by (seed, name), so changing the
norm or MLP family never changes the other weights: a comparison stays fair.
"""

from __future__ import annotations

import functools
import math
import zlib

import numpy as np

from blocktrace.explorables.engine.config import BlockConfig

__all__ = [
    "Params", "_rng", "check_params", "init_params", "param_names", "param_shape", "position_vectors", "seeded_normal",
    "word_embedding"
]

Params = dict[str, np.ndarray]


def _rng(seed: int, name: str) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(name.encode("utf-8"))])


CACHED_SIZE = 1024  # arrays this small (every explorable's default model) are drawn once per process


def seeded_normal(seed: int, name: str, shape: tuple[int, ...], std: float) -> np.ndarray:
    """std · N(0, 1) entries from the generator of (seed, name): the same name always draws the same array.

    Arrays of up to CACHED_SIZE entries are shared and read-only: change a copy, never the array.
    """
    if math.prod(shape) <= CACHED_SIZE:
        return _small_normal(seed, name, tuple(shape), float(std))
    return _rng(seed, name).standard_normal(shape) * std


@functools.lru_cache(maxsize=2048)  # at most about 16 MB
def _small_normal(seed: int, name: str, shape: tuple[int, ...], std: float) -> np.ndarray:
    """Drawn once, shared by every session: read-only, so no caller can change another's weights."""
    array = _rng(seed, name).standard_normal(shape) * std
    array.flags.writeable = False
    return array


def param_names(config: BlockConfig) -> list[str]:
    """The parameter names this configuration uses, block by block, in a fixed order."""
    names: list[str] = []
    for i in range(config.n_layers):
        p = f"blocks.{i}."
        for ln in ("ln1", "ln2"):
            names.append(f"{p}{ln}.g")
            if config.norm == "layernorm":
                names.append(f"{p}{ln}.b")
            if ln == "ln1":
                names += [f"{p}attn.W_Q", f"{p}attn.W_K", f"{p}attn.W_V", f"{p}attn.W_O"]
        if config.mlp == "swiglu":
            names += [f"{p}mlp.W_gate", f"{p}mlp.W_value", f"{p}mlp.W_down"]
        else:
            names += [f"{p}mlp.W_in", f"{p}mlp.b_in", f"{p}mlp.W_out", f"{p}mlp.b_out"]
    return names


def param_shape(name: str, config: BlockConfig) -> tuple[int, ...]:
    """The shape a parameter must have under this configuration."""
    d, inner, hidden = config.d_model, config.n_heads * config.d_head, config.d_mlp
    leaf = name.split(".", 2)[2]
    return {
        "ln1.g": (d,), "ln1.b": (d,), "ln2.g": (d,), "ln2.b": (d,),
        "attn.W_Q": (d, inner), "attn.W_K": (d, inner), "attn.W_V": (d, inner), "attn.W_O": (inner, d),
        "mlp.W_gate": (d, hidden), "mlp.W_value": (d, hidden), "mlp.W_down": (hidden, d),
        "mlp.W_in": (d, hidden), "mlp.b_in": (hidden,), "mlp.W_out": (hidden, d), "mlp.b_out": (d,),
    }[leaf]


def init_params(config: BlockConfig, gain_jitter: float = 0.1) -> Params:
    """Seeded parameters scaled like 1/√fan_in, so activations stay near unit size.

    Gains are 1 plus a little noise (0 noise gives unit gains); biases start small.
    """
    params: Params = {}
    for name in param_names(config):
        shape = param_shape(name, config)
        leaf = name.rsplit(".", 1)[1]
        if leaf == "g":
            params[name] = 1.0 + seeded_normal(config.seed, name, shape, gain_jitter)
        elif leaf.startswith("b"):
            params[name] = seeded_normal(config.seed, name, shape, 0.1 * gain_jitter)
        else:
            params[name] = seeded_normal(config.seed, name, shape, 1.0 / np.sqrt(shape[0]))
    return params


@functools.lru_cache(maxsize=256)
def _expected_shapes(config: BlockConfig) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """(name, shape) of every parameter the config needs: worked out once per config, checked on every trace."""
    return tuple((name, param_shape(name, config)) for name in param_names(config))


def check_params(params: Params, config: BlockConfig) -> None:
    """Raise ValueError when a parameter the config needs is missing or has the wrong shape."""
    for name, want in _expected_shapes(config):
        if name not in params:
            raise ValueError(f"missing parameter {name}")
        if tuple(params[name].shape) != want:
            raise ValueError(f"parameter {name} has shape {tuple(params[name].shape)}, expected {want}")


def word_embedding(word: str, d_model: int, seed: int = 0, scale: float = 1.0) -> np.ndarray:
    """A fixed vector for any word: the same word (ignoring case) always gets the same vector.

    # -> [d_model]
    """
    return seeded_normal(seed, "word:" + word.casefold(), (d_model,), scale)


@functools.lru_cache(maxsize=8)  # at most 16 MB (8 tables of 512 × 512)
def position_vectors(n_pos: int, d_model: int, scale: float = 0.4) -> np.ndarray:
    """Sinusoidal slot stamps: pair i of slot k is scale · (cos, sin)(k · π/4 / 100^(2i/d)).

    For width 2, slot k is the arrow of length `scale` at angle k · 45°, so slots 0…7 all differ.
    Built once per size and shared by every trace, so it is read-only.
    # -> [pos, d_model]
    """
    k = np.arange(n_pos)[:, None]
    i = np.arange((d_model + 1) // 2)[None, :]
    angle = k * (np.pi / 4) / 100.0 ** (2 * i / d_model)
    pairs = np.stack([np.cos(angle), np.sin(angle)], axis=-1).reshape(n_pos, -1)
    table = scale * pairs[:, :d_model]
    table.flags.writeable = False
    return table
