"""Shapes and parameter counts of one decoder block, as formulas: pure arithmetic, no engine run.

Sizes: B batch, T positions, d model width, h heads, e MLP expansion (hidden width e·d; SwiGLU
splits it into a gate half and a value half of e·d/2 each, GELU keeps all of it).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Sizes", "attention_params", "block_params", "exercise_answer", "mlp_bias_params", "mlp_weight_params",
           "norm_params", "param_rows", "shape_rows"]


@dataclass(frozen=True)
class Sizes:
    """The sizes the shape table is computed for."""

    B: int = 1  # batch items
    T: int = 4  # positions
    d: int = 8  # model width
    heads: int = 1  # attention heads (must divide d)
    expansion: int = 4  # MLP hidden width as a multiple of d

    def __post_init__(self) -> None:
        for name in ("B", "T", "d", "heads", "expansion"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive whole number, got {value!r}")
        if self.d % self.heads:
            raise ValueError(f"d = {self.d} is not divisible by {self.heads} heads")
        if (self.expansion * self.d) % 2:
            raise ValueError("SwiGLU needs an even hidden width e·d to split into gate and value")

    @property
    def d_head(self) -> int:
        return self.d // self.heads

    @property
    def hidden(self) -> int:
        """e·d: the width of the MLP's first projection."""
        return self.expansion * self.d

    @property
    def half(self) -> int:
        """e·d/2: the width of SwiGLU's gate, value and their product."""
        return self.hidden // 2


def multiple(factor: int | float, symbol: str = "d") -> str:
    """'4d', 'd', '0.5d': a width written as a multiple of d."""
    if factor == 1:
        return symbol
    if float(factor).is_integer():
        return f"{int(factor)}{symbol}"
    return f"{factor:g}{symbol}"


@dataclass(frozen=True)
class ShapeRow:
    """One tensor of the forward pass: where it is, its shape in symbols and in numbers."""

    step: str  # the lesson's words for the step
    tensor: str  # the lesson's variable name
    symbols: str  # e.g. "[B, T, 4d]"
    shape: tuple[int, ...]
    key: str | None  # the engine stage it corresponds to (local key), if one
    note: str = ""


def shape_rows(s: Sizes, mlp: str = "swiglu", placement: str = "pre") -> list[ShapeRow]:
    """Every tensor's shape through one block, in forward order, for the chosen MLP and norm placement."""
    B, T, d, h = s.B, s.T, s.d, s.heads
    head = "d/h" if h > 1 else "d"
    stream = (B, T, d)
    rows = [ShapeRow("Input (residual stream)", "X", "[B, T, d]", stream, "resid_pre")]
    if placement == "pre":
        rows.append(ShapeRow("Normalised, before attention", "X_norm", "[B, T, d]", stream, "ln1.normalized"))
    rows += [
        ShapeRow("Queries, split into heads", "Q", f"[B, h, T, {head}]", (B, h, T, s.d_head), "attn.q"),
        ShapeRow("Keys, split into heads", "K", f"[B, h, T, {head}]", (B, h, T, s.d_head), "attn.k"),
        ShapeRow("Values, split into heads", "V", f"[B, h, T, {head}]", (B, h, T, s.d_head), "attn.v"),
        ShapeRow("Attention weights", "attn_weights", "[B, h, T, T]", (B, h, T, T), "attn.pattern"),
        ShapeRow("Attention output (heads merged, W_O)", "attn_out", "[B, T, d]", stream, "attn_out"),
    ]
    if placement == "pre":
        rows += [
            ShapeRow("After residual 1", "X1", "[B, T, d]", stream, "resid_mid"),
            ShapeRow("Normalised, before the MLP", "X1_norm", "[B, T, d]", stream, "ln2.normalized"),
        ]
    else:
        rows.append(ShapeRow("After residual 1, then normalised", "X1", "[B, T, d]", stream, "resid_mid"))
    e = s.expansion
    if mlp == "swiglu":
        rows += [
            ShapeRow("SwiGLU projection (gate and value together)", "x_proj", f"[B, T, {multiple(e)}]",
                     (B, T, s.hidden), None),
            ShapeRow("Gate half", "gate", f"[B, T, {multiple(e / 2)}]", (B, T, s.half), "mlp.gate"),
            ShapeRow("Value half", "val", f"[B, T, {multiple(e / 2)}]", (B, T, s.half), "mlp.value"),
            ShapeRow("After gate · value: SiLU(gate) ⊙ val", "x_swish", f"[B, T, {multiple(e / 2)}]",
                     (B, T, s.half), "mlp.hidden"),
        ]
    else:
        rows += [
            ShapeRow("GELU projection", "x_proj", f"[B, T, {multiple(e)}]", (B, T, s.hidden), "mlp.gate"),
            ShapeRow("After GELU", "x_act", f"[B, T, {multiple(e)}]", (B, T, s.hidden), "mlp.hidden"),
        ]
    rows.append(ShapeRow("MLP output", "mlp_out", "[B, T, d]", stream, "mlp_out"))
    final = "Final output (after residual 2)" if placement == "pre" else "After residual 2, then normalised"
    rows.append(ShapeRow(final, "X2", "[B, T, d]", stream, "resid_post"))
    return rows


@dataclass(frozen=True)
class ParamRow:
    """One part of the block and how many numbers it learns."""

    part: str
    weights: str  # the tensors and their shapes
    formula: str  # the count in terms of d
    count: int
    option: str  # which choice it belongs to: "rmsnorm", "layernorm", "swiglu", "gelu" or "attention"


def norm_params(d: int, norm: str) -> int:
    """RMSNorm learns a gain γ [d]; LayerNorm a gain γ and a bias β, [d] each."""
    return d if norm == "rmsnorm" else 2 * d


def attention_params(d: int) -> int:
    """W_Q, W_K, W_V and W_O, each [d, d]: 4d², whatever the number of heads."""
    return 4 * d * d


def mlp_weight_params(d: int, mlp: str, expansion: int = 4) -> int:
    """SwiGLU: [d, e·d] + [e·d/2, d] (6d² at e = 4). GELU: [d, e·d] + [e·d, d] (8d² at e = 4)."""
    hidden = expansion * d
    return d * hidden + (hidden // 2) * d if mlp == "swiglu" else 2 * d * hidden


def mlp_bias_params(d: int, mlp: str, expansion: int = 4) -> int:
    """This engine's GELU MLP also has biases b_in [e·d] and b_out [d]; its SwiGLU has none."""
    return 0 if mlp == "swiglu" else expansion * d + d


def block_params(d: int, norm: str, mlp: str, expansion: int = 4) -> int:
    """Everything one block learns in this engine: two norms, attention, the MLP (with its biases)."""
    return (2 * norm_params(d, norm) + attention_params(d) + mlp_weight_params(d, mlp, expansion)
            + mlp_bias_params(d, mlp, expansion))


def param_rows(d: int, expansion: int = 4) -> list[ParamRow]:
    """Each part of a block under each choice, with its formula and its count at this d."""
    e = expansion
    hid, half = multiple(e), multiple(e / 2)
    sq_in, sq_out = multiple(e, "d²"), multiple(e / 2, "d²")
    rows = [
        ParamRow("Norm (each of the two)", "γ [d]", "d", norm_params(d, "rmsnorm"), "rmsnorm"),
        ParamRow("Norm (each of the two)", "γ [d], β [d]", "2d", norm_params(d, "layernorm"), "layernorm"),
        ParamRow("Attention", "W_Q, W_K, W_V, W_O: [d, d] each", "4d²", attention_params(d), "attention"),
        ParamRow("MLP weights", f"W [d, {hid}] (gate and value together), W_out [{half}, d]",
                 f"{sq_in} + {sq_out} = {multiple(e * 1.5, 'd²')}", mlp_weight_params(d, "swiglu", e), "swiglu"),
        ParamRow("MLP weights", f"W₁ [d, {hid}], W₂ [{hid}, d]",
                 f"{sq_in} + {sq_in} = {multiple(2 * e, 'd²')}", mlp_weight_params(d, "gelu", e), "gelu"),
        ParamRow("MLP biases (this engine's GELU)", f"b_in [{hid}], b_out [d]", f"{multiple(e + 1)}",
                 mlp_bias_params(d, "gelu", e), "gelu"),
    ]
    return rows


def exercise_answer(d: int, expansion: int = 4) -> str:
    """The lesson's exercise 2 for any d: SwiGLU weight shapes and the MLP's parameter total."""
    hidden, half = expansion * d, expansion * d // 2
    total = mlp_weight_params(d, "swiglu", expansion)
    factor = multiple(expansion * 1.5, "")
    return (f"SwiGLU at d = {d}: combined projection [{d}, {hidden}], output projection [{half}, {d}]; "
            f"MLP total {d}·{hidden} + {half}·{d} = {factor or '1'}·{d}² = {total:,} parameters.")
