"""The block's configuration: one frozen dataclass, validated on creation."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Literal

__all__ = ["BlockConfig", "ConfigError", "MAX_ABS_VALUE", "MAX_LAYERS", "MAX_TOKENS"]

# Limits that keep one request from tying up the server (width, length, depth).
MAX_D_MODEL = 512
MAX_D_MLP = 4096
MAX_TOKENS = 512
MAX_LAYERS = 48
MAX_HEADS = 64
MAX_ABS_VALUE = 1e6  # larger inputs overflow the squares inside the norms
MAX_SCALE = 100.0

NORMS = ("rmsnorm", "layernorm")
PLACEMENTS = ("pre", "post")
MLPS = ("swiglu", "gelu", "relu")
RESIDUALS = ("add", "replace")


class ConfigError(ValueError):
    """A configuration or input the engine refuses, with a message fit for a user."""


@dataclass(frozen=True)
class BlockConfig:
    """Everything that decides what one stack of Transformer blocks computes."""

    d_model: int = 8  # width of the residual stream
    n_heads: int = 1  # attention heads per block
    d_head: int | None = None  # width of one head; None means d_model // n_heads
    d_mlp: int = 32  # MLP hidden width (for SwiGLU: width of gate and of value, each)
    n_layers: int = 1  # blocks stacked
    norm: Literal["rmsnorm", "layernorm"] = "rmsnorm"  # RMSNorm scales; LayerNorm also centres
    placement: Literal["pre", "post"] = "pre"  # norm before each sublayer, or after each addition
    mlp: Literal["swiglu", "gelu", "relu"] = "swiglu"  # MLP family
    residual: Literal["add", "replace"] = "add"  # replace is the deliberately broken mode
    attention_scale: float = 1.0  # multiplies the attention update
    mlp_scale: float = 1.0  # multiplies the MLP update
    causal: bool = False  # mask the future in attention
    positions: bool = False  # add position vectors to the token embeddings
    eps: float = 1e-6  # added to the mean square (or variance) before the square root
    seed: int = 0  # seeds parameters and word embeddings

    def __post_init__(self) -> None:
        if self.d_head is None:
            if self.n_heads >= 1 and self.d_model % self.n_heads:
                raise ConfigError(
                    f"d_model {self.d_model} is not divisible by {self.n_heads} heads; "
                    "choose a head count that divides the width"
                )
            object.__setattr__(self, "d_head", self.d_model // max(self.n_heads, 1))
        _check_int("d_model", self.d_model, 1, MAX_D_MODEL)
        _check_int("n_heads", self.n_heads, 1, MAX_HEADS)
        _check_int("d_head", self.d_head, 1, MAX_D_MODEL)
        _check_int("d_mlp", self.d_mlp, 1, MAX_D_MLP)
        _check_int("n_layers", self.n_layers, 1, MAX_LAYERS)
        _check_choice("norm", self.norm, NORMS)
        _check_choice("placement", self.placement, PLACEMENTS)
        _check_choice("mlp", self.mlp, MLPS)
        _check_choice("residual", self.residual, RESIDUALS)
        _check_float("attention_scale", self.attention_scale, -MAX_SCALE, MAX_SCALE)
        _check_float("mlp_scale", self.mlp_scale, -MAX_SCALE, MAX_SCALE)
        _check_float("eps", self.eps, 0.0, 1.0)
        if not isinstance(self.causal, bool) or not isinstance(self.positions, bool):
            raise ConfigError("causal and positions must be true or false")
        _check_int("seed", self.seed, 0, 2**32 - 1)

    def with_(self, **changes: Any) -> BlockConfig:
        """A copy with some fields changed (validated again); a new width or head count re-derives d_head."""
        if ("d_model" in changes or "n_heads" in changes) and "d_head" not in changes:
            changes["d_head"] = None
        return replace(self, **changes)

    def as_dict(self) -> dict[str, Any]:
        """Every field, by name, in declaration order."""
        return asdict(self)

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))


def _check_int(name: str, value: Any, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{name} must be a whole number, got {value!r}")
    if not low <= value <= high:
        raise ConfigError(f"{name} must be between {low} and {high}, got {value}")


def _check_float(name: str, value: Any, low: float, high: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{name} must be a number, got {value!r}")
    if not low <= float(value) <= high:  # also false for NaN
        raise ConfigError(f"{name} must be between {low:g} and {high:g}, got {value!r}")


def _check_choice(name: str, value: Any, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ConfigError(f"{name} must be one of {', '.join(choices)}; got {value!r}")
