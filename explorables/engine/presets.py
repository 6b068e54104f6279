"""The three starting points the explorables use, each a config plus its inputs.

single-token  one width-4 token vector through one pre-norm SwiGLU block (lesson 000)
eat-an-orange three words of width 2, hand-authored vectors, a 2→3→2 ReLU MLP (lesson 001)
decoder-lab   B=1, T=4, d=8, one head, SwiGLU with gate and value of width 16 (lesson 002)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from blocktrace.explorables.engine.config import BlockConfig, ConfigError
from blocktrace.explorables.engine.forward import Trace, forward
from blocktrace.explorables.engine.params import Params, init_params, word_embedding

__all__ = ["PRESETS", "Preset", "get_preset", "run_preset"]


@dataclass(frozen=True)
class Preset:
    name: str
    title: str
    config: BlockConfig
    tokens: tuple[str, ...] = ()  # default phrase (empty for a single vector)
    vector: tuple[float, ...] = ()  # default token vector (single-token only)
    gain_jitter: float = 0.0  # 0: unit gains, as the lessons draw them
    embed_scale: float = 1.0  # size of generated word embeddings
    word_vectors: dict[str, tuple[float, ...]] = field(default_factory=dict)  # hand-authored
    block_params: dict[str, Any] = field(default_factory=dict)  # hand-authored, copied to every block
    mlp_ratio: int | None = None  # d_mlp = ratio · d_model when the width changes

    def params(self, config: BlockConfig) -> Params:
        """Seeded parameters, with hand-authored ones laid over every block where they fit."""
        params = init_params(config, self.gain_jitter)
        for i in range(config.n_layers):
            for leaf, value in self.block_params.items():
                name = f"blocks.{i}.{leaf}"
                value = np.asarray(value, dtype=float)
                if name in params and params[name].shape == value.shape:
                    params[name] = value
        return params

    def embed(self, tokens: Sequence[str], config: BlockConfig) -> np.ndarray:
        """One row per word: hand-authored where the preset has one at this width, else seeded."""
        rows = []
        for word in tokens:
            fixed = self.word_vectors.get(word.casefold())
            if fixed is not None and len(fixed) == config.d_model:
                rows.append(np.asarray(fixed, dtype=float))
            else:
                rows.append(word_embedding(word, config.d_model, config.seed, self.embed_scale))
        return np.stack(rows)


PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset(
            name="single-token",
            title="One token representation of width 4 through a pre-norm block",
            config=BlockConfig(d_model=4, n_heads=1, d_mlp=8, mlp="swiglu", seed=0),
            vector=(1.5, -0.5, 0.25, 2.0),
            mlp_ratio=2,
        ),
        Preset(
            name="eat-an-orange",
            title="Three words of width 2 through one floor",
            config=BlockConfig(d_model=2, n_heads=1, d_mlp=3, mlp="relu", positions=True, causal=False),
            tokens=("eat", "an", "orange"),
            embed_scale=0.6,
            word_vectors={"eat": (-0.5, -0.5), "an": (-0.6, -0.9), "orange": (-0.68, 0.44)},
            block_params={  # chosen so the floor reproduces every number of lesson 001's worked trace
                "attn.W_Q": [[0.52, -0.76], [0.72, 0.48]],
                "attn.W_K": [[1.4, 0.0], [0.1, 1.4]],
                "attn.W_V": [[0.1, -0.3], [-0.07, 0.51]],
                "attn.W_O": [[1.0, 0.0], [0.0, 1.0]],
                "mlp.W_in": [[1.0, 0.0, -1.0], [0.0, 1.0, -1.0]],
                "mlp.b_in": [0.0, 0.0, 0.0],
                "mlp.W_out": [[1.0, 0.0], [0.0, 1.0], [0.5, 0.0]],
                "mlp.b_out": [0.0, 0.0],
            },
        ),
        Preset(
            name="decoder-lab",
            title="A decoder block on a [1, 4, 8] residual stream",
            config=BlockConfig(d_model=8, n_heads=1, d_mlp=16, mlp="swiglu", causal=True, seed=42),
            tokens=("the", "block", "keeps", "shape"),
            mlp_ratio=2,
        ),
    )
}


def get_preset(name: str) -> Preset:
    try:
        return PRESETS[name]
    except KeyError:
        raise ConfigError(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}") from None


def run_preset(
    name: str,
    *,
    vector: Sequence[float] | None = None,
    tokens: Sequence[str] | None = None,
    reverse: bool = False,
    **changes: Any,
) -> Trace:
    """Trace a preset, optionally with another vector or phrase and config changes.

    A vector of another width resizes the model (and, where the preset says, the MLP).
    """
    preset = get_preset(name)
    base = preset.config
    if vector is not None and tokens is not None:
        raise ConfigError("give either one token vector or a phrase, not both")
    if vector is not None:
        x = np.asarray([list(vector)], dtype=float)
        if "d_model" in changes and changes["d_model"] != x.shape[1]:
            raise ConfigError(f"the vector has {x.shape[1]} components but d_model is {changes['d_model']}")
        changes.setdefault("d_model", x.shape[1])
    if "d_model" in changes and preset.mlp_ratio and "d_mlp" not in changes:
        changes["d_mlp"] = preset.mlp_ratio * int(changes["d_model"])
    config = BlockConfig(**{**base.as_dict(), "d_head": None, **changes})
    if vector is not None:
        return forward(config, preset.params(config), x, ["x"])
    if tokens is None and not preset.tokens:  # single-token default vector
        x = np.asarray([preset.vector], dtype=float)
        if x.shape[1] == config.d_model:
            return forward(config, preset.params(config), x, ["x"])
    words = list(tokens) if tokens is not None else list(preset.tokens or ("x",))
    if not words:
        raise ConfigError("the phrase is empty; type at least one word")
    if reverse:
        words = words[::-1]
    return forward(config, preset.params(config), preset.embed(words, config), words)
