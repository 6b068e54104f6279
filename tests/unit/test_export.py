"""The export contract (docs/cli.md, "The export contract"): JSON keys, exact values, nulls, and the CSV."""

from __future__ import annotations

import csv
import io
import json
import math

import numpy as np
import pytest

from blocktrace.explorables.engine import BlockConfig, Trace, forward, init_params, run_preset
from blocktrace.explorables.engine.export import to_csv, to_dict, to_json, to_table

CSV_HEADER = ["key", "label", "batch", "head", "pos", "token", "key_pos", "component", "value"]


def _trace(**changes) -> Trace:
    config = BlockConfig(**{"d_model": 4, "n_heads": 2, "d_mlp": 6, "n_layers": 2, "causal": True,
                            "positions": True, "seed": 3, **changes})
    x = np.random.default_rng(8).standard_normal((3, config.d_model))
    return forward(config, init_params(config), x, ["the", "cat", "sat"])


TRACES = {
    "swiglu-rms-causal": lambda: _trace(),
    "gelu-layernorm-post": lambda: _trace(mlp="gelu", norm="layernorm", placement="post", causal=False),
    "relu-replace": lambda: _trace(mlp="relu", residual="replace", n_layers=1),
    "eat-an-orange": lambda: run_preset("eat-an-orange"),
}


@pytest.fixture(params=list(TRACES))
def trace(request: pytest.FixtureRequest) -> Trace:
    return TRACES[request.param]()


def _masked(values: np.ndarray, nested: object) -> np.ndarray:
    """The exported nested list as floats, with null read back as −∞ (the only non-finite value a trace has)."""
    def walk(v: object) -> object:
        return [walk(u) for u in v] if isinstance(v, list) else (-math.inf if v is None else v)
    return np.array(walk(nested), dtype=float).reshape(values.shape)


def test_to_dict_has_the_contract_keys(trace: Trace) -> None:
    """The export has version, tokens, config, params and stages; each stage has key, label, description, axes,
    shape, values."""
    d = to_dict(trace)
    assert set(d) == {"version", "tokens", "config", "params", "stages"}
    assert isinstance(d["version"], int)
    assert d["tokens"] == list(trace.tokens)
    for s in d["stages"]:
        assert set(s) == {"key", "label", "description", "axes", "shape", "values"}
        assert isinstance(s["label"], str) and s["label"]
        assert isinstance(s["description"], str) and s["description"]
        assert len(s["axes"]) == len(s["shape"])
    assert [s["key"] for s in d["stages"]] == trace.keys()


def test_config_lists_every_field(trace: Trace) -> None:
    """The exported config holds every BlockConfig field, with n_layers, d_head and eps spelled out."""
    config = to_dict(trace)["config"]
    assert set(BlockConfig.field_names()) <= set(config)
    for name in ("d_model", "n_heads", "d_head", "d_mlp", "n_layers", "norm", "placement", "mlp", "residual",
                 "attention_scale", "causal", "positions", "eps", "seed"):
        assert name in config
    assert config["d_head"] == trace.config.d_head
    assert config["n_layers"] == trace.config.n_layers
    assert config["eps"] == trace.config.eps
    assert BlockConfig(**config) == trace.config  # the export is enough to rebuild the configuration


def test_params_follow_the_contract(trace: Trace) -> None:
    """Params are exported by name with the contract's shapes, e.g. W_Q [d_model, n_heads·d_head]."""
    c = trace.config
    params = to_dict(trace)["params"]
    inner = c.n_heads * c.d_head
    for i in range(c.n_layers):
        p = f"blocks.{i}."
        assert np.shape(params[p + "ln1.g"]) == (c.d_model,)
        assert np.shape(params[p + "ln2.g"]) == (c.d_model,)
        assert (p + "ln1.b" in params) == (c.norm == "layernorm")
        for w in ("W_Q", "W_K", "W_V"):
            assert np.shape(params[p + "attn." + w]) == (c.d_model, inner)
        assert np.shape(params[p + "attn.W_O"]) == (inner, c.d_model)
        if c.mlp == "swiglu":
            assert np.shape(params[p + "mlp.W_gate"]) == (c.d_model, c.d_mlp)
            assert np.shape(params[p + "mlp.W_value"]) == (c.d_model, c.d_mlp)
            assert np.shape(params[p + "mlp.W_down"]) == (c.d_mlp, c.d_model)
        else:
            assert np.shape(params[p + "mlp.W_in"]) == (c.d_model, c.d_mlp)
            assert np.shape(params[p + "mlp.b_in"]) == (c.d_mlp,)
            assert np.shape(params[p + "mlp.W_out"]) == (c.d_mlp, c.d_model)
            assert np.shape(params[p + "mlp.b_out"]) == (c.d_model,)


def test_json_round_trips_every_value_exactly(trace: Trace) -> None:
    """json.loads(to_json(trace)) gives back every stage and parameter value bit for bit (masked scores as null)."""
    d = json.loads(to_json(trace))
    for s in d["stages"]:
        values = trace[s["key"]]
        assert s["shape"] == list(values.shape)
        np.testing.assert_array_equal(_masked(values, s["values"]), values)
    for name, value in trace.params.items():
        np.testing.assert_array_equal(np.array(d["params"][name], dtype=float), value)


def test_masked_scores_are_null_and_nothing_else_is() -> None:
    """Causal scores above the diagonal (−∞) export as null; every other number is a finite float."""
    d = json.loads(to_json(_trace()))
    scores = next(s for s in d["stages"] if s["key"] == "blocks.0.attn.scores")
    for head in scores["values"]:
        for i, row in enumerate(head):
            for j, v in enumerate(row):
                assert (v is None) == (j > i)
    pattern = next(s for s in d["stages"] if s["key"] == "blocks.0.attn.pattern")
    assert pattern["values"][0][0][1:] == [0.0, 0.0]


def test_json_has_no_nan_or_infinity_tokens() -> None:
    """The JSON text is strict JSON: NaN from eps = 0 on a zero row becomes null, never the bare word NaN."""
    config = BlockConfig(d_model=2, n_heads=1, d_mlp=2, eps=0.0)
    text = to_json(forward(config, init_params(config), np.zeros((1, 2))))
    json.loads(text, parse_constant=lambda name: pytest.fail(f"non-standard JSON constant {name}"))
    assert "null" in text


def test_stage_axes_name_the_dimensions(trace: Trace) -> None:
    """Axes use the fixed names: stream stages [pos, d_model], q/k/v [n_heads, pos, d_head], scores/pattern
    [n_heads, pos, key_pos], MLP [pos, d_mlp]."""
    for s in to_dict(trace)["stages"]:
        local = s["key"].split(".", 2)[2] if s["key"].startswith("blocks.") else s["key"]
        if local in ("attn.q", "attn.k", "attn.v"):
            assert s["axes"] == ["n_heads", "pos", "d_head"]
        elif local in ("attn.scores", "attn.pattern"):
            assert s["axes"] == ["n_heads", "pos", "key_pos"]
        elif local.startswith("mlp."):
            assert s["axes"] == ["pos", "d_mlp"]
        else:
            assert s["axes"] == ["pos", "d_model"]


def test_csv_has_the_header_and_one_row_per_number(trace: Trace) -> None:
    """The CSV header is key,label,batch,head,pos,token,key_pos,component,value, then one row per number."""
    rows = list(csv.reader(io.StringIO(to_csv(trace))))
    assert rows[0] == CSV_HEADER
    assert len(rows) - 1 == sum(s.values.size for s in trace)


def test_csv_rows_locate_each_value(trace: Trace) -> None:
    """Each CSV row's indices (head, pos, key_pos, component) point at exactly the value it carries."""
    for row in csv.DictReader(io.StringIO(to_csv(trace))):
        stage = trace.stage(row["key"])
        assert row["label"] == stage.label
        index = tuple(int(row[column]) for column in _csv_columns(stage.axes))
        assert float(row["value"]) == stage.values[index]
        if row["pos"]:
            assert row["token"] == trace.tokens[int(row["pos"])]


def _csv_columns(axes: tuple[str, ...]) -> list[str]:
    names = {"batch": "batch", "n_heads": "head", "pos": "pos", "key_pos": "key_pos"}
    return [names.get(axis, "component") for axis in axes]


def test_csv_writes_masked_scores_as_minus_inf() -> None:
    """Masked scores appear in the CSV as -inf, which float() reads back."""
    rows = [r for r in csv.DictReader(io.StringIO(to_csv(_trace()))) if r["key"] == "blocks.0.attn.scores"]
    for r in rows:
        assert (r["value"] == "-inf") == (int(r["key_pos"]) > int(r["pos"]))


def test_csv_of_a_batch_fills_the_batch_column() -> None:
    """A [batch, pos, d_model] input fills the batch column and still writes one row per number."""
    config = BlockConfig(d_model=2, n_heads=1, d_mlp=2)
    t = forward(config, init_params(config), np.ones((2, 3, 2)))
    rows = list(csv.DictReader(io.StringIO(to_csv(t))))
    assert len(rows) == sum(s.values.size for s in t)
    assert {r["batch"] for r in rows} == {"0", "1"}


def test_table_shows_each_stage_with_its_key_and_three_decimals() -> None:
    """The text table names every shown stage with its label and [key], and prints values to 3 decimals."""
    config = BlockConfig(d_model=4, n_heads=1, d_mlp=8, attention_scale=0.0, eps=0.0)
    t = forward(config, init_params(config, gain_jitter=0.0), np.array([[2.0, 2.0, 2.0, 2.0]]), ["x"])
    table = to_table(t, detail=True)
    for stage in t:
        assert f"{stage.label}  [{stage.key}]" in table
    assert "2.000    2.000    2.000    2.000" in table
    assert "1.000    1.000    1.000    1.000" in table  # RMSNorm of the constant vector, by hand
    assert "-0.000" not in table
