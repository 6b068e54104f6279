"""The stage descriptions say what the engine really does under each configuration."""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest

from blocktrace.explorables.engine import BlockConfig
from blocktrace.explorables.engine.forward import forward
from blocktrace.explorables.engine.params import init_params
from blocktrace.explorables.engine.stages import stage_texts

PARAMETER = re.compile(r"\b([Wb]_[a-zA-Z]+)\b")
VARIANTS = list(itertools.product(("swiglu", "gelu", "relu"), ("pre", "post"), ("rmsnorm", "layernorm")))


@pytest.mark.parametrize(("mlp", "placement", "norm"), VARIANTS)
def test_every_parameter_a_description_names_exists(mlp, placement, norm):
    config = BlockConfig(d_model=4, n_heads=1, d_mlp=8, mlp=mlp, placement=placement, norm=norm)
    params = init_params(config)
    leaves = {name.rsplit(".", 1)[-1] for name in params}
    recorded = {s.key.removeprefix("blocks.0.") for s in forward(config, params, np.ones((2, 4)))}
    for key, (_label, text) in stage_texts(config).items():
        if key not in recorded:
            continue
        for name in PARAMETER.findall(text):
            assert name in leaves, f"{key}: {text!r} names {name}, which a {mlp} block does not have"


@pytest.mark.parametrize("placement", ["pre", "post"])
def test_attention_reads_the_normalised_rows_only_in_pre_norm(placement):
    """Post-norm attention reads the incoming stream itself; its norm comes after the addition."""
    texts = stage_texts(BlockConfig(d_model=4, n_heads=1, d_mlp=8, placement=placement))
    for key in ("attn.q", "attn.k", "attn.v"):
        assert ("normalised" in texts[key][1]) == (placement == "pre"), texts[key][1]
