"""The forward pass over a stack of blocks, recording every intermediate as a trace."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from blocktrace.explorables.engine import ops
from blocktrace.explorables.engine.config import MAX_ABS_VALUE, MAX_TOKENS, BlockConfig, ConfigError
from blocktrace.explorables.engine.params import Params, check_params, position_vectors
from blocktrace.explorables.engine.stages import BLOCK_KEYS, Stage, stage_texts

__all__ = [
    "COMBINE", "PLACEMENTS", "Sublayers", "Trace", "block_keys", "check_input", "forward", "post_norm_block",
    "pre_norm_block"
]

Record = Callable[[str, np.ndarray], None]


@dataclass
class Trace:
    """Every stage of one forward pass, in forward order, plus what produced it."""

    config: BlockConfig
    params: Params
    tokens: list[str]
    stages: list[Stage] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._by_key = {s.key: s for s in self.stages}

    def __getitem__(self, key: str) -> np.ndarray:
        return self._by_key[key].values

    def __contains__(self, key: str) -> bool:
        return key in self._by_key

    def __iter__(self) -> Iterator[Stage]:
        return iter(self.stages)

    def stage(self, key: str) -> Stage:
        return self._by_key[key]

    def keys(self) -> list[str]:
        return [s.key for s in self.stages]

    @property
    def output(self) -> np.ndarray:
        """The last block's output rows. # [..., pos, d_model]"""
        return self[f"blocks.{self.config.n_layers - 1}.resid_post"]


# --- variants, each chosen once from the config -------------------------------------------

def _rms(x: np.ndarray, params: Params, name: str, eps: float) -> np.ndarray:
    return ops.rms_norm(x, params[f"{name}.g"], eps)


def _layer(x: np.ndarray, params: Params, name: str, eps: float) -> np.ndarray:
    return ops.layer_norm(x, params[f"{name}.g"], params[f"{name}.b"], eps)


def _swiglu(x: np.ndarray, params: Params, prefix: str) -> dict[str, np.ndarray]:
    return ops.swiglu(x, params[prefix + "W_gate"], params[prefix + "W_value"], params[prefix + "W_down"])


def _dense(activation: Callable[[np.ndarray], np.ndarray]):
    def mlp(x: np.ndarray, params: Params, prefix: str) -> dict[str, np.ndarray]:
        return ops.dense_mlp(
            x, params[prefix + "W_in"], params[prefix + "b_in"], params[prefix + "W_out"],
            params[prefix + "b_out"], activation,
        )
    return mlp


def _add(stream: np.ndarray, update: np.ndarray) -> np.ndarray:
    return stream + update


def _replace(stream: np.ndarray, update: np.ndarray) -> np.ndarray:
    return update  # the deliberately broken mode: the incoming stream is thrown away


NORMS = {"rmsnorm": _rms, "layernorm": _layer}
MLPS = {"swiglu": _swiglu, "gelu": _dense(ops.gelu), "relu": _dense(ops.relu)}
COMBINE = {"add": _add, "replace": _replace}


@dataclass(frozen=True)
class Sublayers:
    """The pieces of one block under a configuration, bound to one block's parameters."""

    config: BlockConfig
    params: Params
    prefix: str  # "blocks.{i}."

    def norm(self, x: np.ndarray, which: str) -> np.ndarray:
        return NORMS[self.config.norm](x, self.params, self.prefix + which, self.config.eps)

    def attention(self, x: np.ndarray, record: Record) -> np.ndarray:
        p, c = self.params, self.config
        a = ops.attention(
            x, p[self.prefix + "attn.W_Q"], p[self.prefix + "attn.W_K"], p[self.prefix + "attn.W_V"],
            p[self.prefix + "attn.W_O"], c.n_heads, c.causal,
        )
        for name in ("q", "k", "v", "scores", "pattern"):
            record("attn." + name, a[name])
        out = a["out"]
        out *= c.attention_scale  # in place: the unscaled product is not recorded
        return out

    def mlp(self, x: np.ndarray, record: Record) -> np.ndarray:
        m = MLPS[self.config.mlp](x, self.params, self.prefix + "mlp.")
        for name in ("gate", "value", "hidden"):
            if name in m:
                record("mlp." + name, m[name])
        out = m["out"]
        out *= self.config.mlp_scale  # in place: the unscaled product is not recorded
        return out

    def combine(self, stream: np.ndarray, update: np.ndarray) -> np.ndarray:
        return COMBINE[self.config.residual](stream, update)


def pre_norm_block(resid_pre: np.ndarray, s: Sublayers, record: Record) -> np.ndarray:
    """resid_mid = resid_pre + Attention(Norm(resid_pre)); resid_post = resid_mid + MLP(Norm(resid_mid))."""
    record("resid_pre", resid_pre)
    normalized = s.norm(resid_pre, "ln1")
    record("ln1.normalized", normalized)
    attn_out = s.attention(normalized, record)
    record("attn_out", attn_out)
    resid_mid = s.combine(resid_pre, attn_out)
    record("resid_mid", resid_mid)
    normalized = s.norm(resid_mid, "ln2")
    record("ln2.normalized", normalized)
    mlp_out = s.mlp(normalized, record)
    record("mlp_out", mlp_out)
    resid_post = s.combine(resid_mid, mlp_out)
    record("resid_post", resid_post)
    return resid_post


def post_norm_block(resid_pre: np.ndarray, s: Sublayers, record: Record) -> np.ndarray:
    """resid_mid = Norm(resid_pre + Attention(resid_pre)); resid_post = Norm(resid_mid + MLP(resid_mid))."""
    record("resid_pre", resid_pre)
    attn_out = s.attention(resid_pre, record)
    record("attn_out", attn_out)
    resid_mid = s.norm(s.combine(resid_pre, attn_out), "ln1")
    record("ln1.normalized", resid_mid)
    record("resid_mid", resid_mid)
    mlp_out = s.mlp(resid_mid, record)
    record("mlp_out", mlp_out)
    resid_post = s.norm(s.combine(resid_mid, mlp_out), "ln2")
    record("ln2.normalized", resid_post)
    record("resid_post", resid_post)
    return resid_post


PLACEMENTS = {"pre": pre_norm_block, "post": post_norm_block}


def check_input(embed: np.ndarray, config: BlockConfig) -> np.ndarray:
    """The embeddings as a float array, or a ConfigError saying what is wrong with them."""
    x = np.asarray(embed, dtype=float)
    if x.ndim not in (2, 3):
        raise ConfigError(f"input must be [pos, d_model] or [batch, pos, d_model], got shape {x.shape}")
    if x.shape[-1] != config.d_model:
        raise ConfigError(f"input rows have width {x.shape[-1]}, but d_model is {config.d_model}")
    if not 1 <= x.shape[-2] <= MAX_TOKENS:
        raise ConfigError(f"between 1 and {MAX_TOKENS} positions are allowed, got {x.shape[-2]}")
    peak = np.max(np.abs(x))  # NaN or infinity when any entry is: one pass checks both
    if not np.isfinite(peak):
        raise ConfigError("input contains NaN or infinity; every value must be a finite number")
    if peak > MAX_ABS_VALUE:
        raise ConfigError(f"input values must lie between -{MAX_ABS_VALUE:g} and {MAX_ABS_VALUE:g}")
    return x


def forward(
    config: BlockConfig,
    params: Params,
    embed: np.ndarray,
    tokens: Sequence[str] | None = None,
    pos_vectors: np.ndarray | None = None,
) -> Trace:
    """Run the stack on token embeddings and record every stage under its stable key.

    # [pos, d_model] or [batch, pos, d_model] -> Trace
    """
    x = check_input(embed, config)
    check_params(params, config)
    n_pos = x.shape[-2]
    tokens = list(tokens) if tokens is not None else [f"t{i}" for i in range(n_pos)]
    if len(tokens) != n_pos:
        raise ConfigError(f"{len(tokens)} token names for {n_pos} positions")
    stages: list[Stage] = []
    texts = stage_texts(config)

    def record_as(prefix: str) -> Record:
        def record(local_key: str, values: np.ndarray) -> None:
            stages.append(Stage(prefix + local_key, *texts[local_key], values))
        return record

    top = record_as("")
    top("embed", x)
    stream = x
    if config.positions:
        pos = position_vectors(n_pos, config.d_model) if pos_vectors is None else np.asarray(pos_vectors, float)
        if pos.shape != (n_pos, config.d_model):
            raise ConfigError(f"position vectors have shape {pos.shape}, expected {(n_pos, config.d_model)}")
        top("pos_embed", pos)
        stream = x + pos
    block = PLACEMENTS[config.placement]
    for i in range(config.n_layers):
        prefix = f"blocks.{i}."
        stream = block(stream, Sublayers(config, params, prefix), record_as(prefix))
    return Trace(config, params, tokens, stages)


def block_keys(config: BlockConfig) -> list[str]:
    """The local keys one block records under this configuration, in forward order."""
    keys = [k for k in BLOCK_KEYS if not (k == "mlp.value" and config.mlp != "swiglu")]
    if config.placement == "post":  # attention reads the stream directly; each norm follows its addition
        keys.remove("ln1.normalized")
        keys.insert(keys.index("resid_mid"), "ln1.normalized")
        keys.remove("ln2.normalized")
        keys.insert(keys.index("resid_post"), "ln2.normalized")
    return keys
