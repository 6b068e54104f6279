"""What the block trace says about SwiGLU's gates is what its numbers show."""

from __future__ import annotations

import re

import numpy as np

from blocktrace.explorables.transformer_block_trace import describe
from blocktrace.explorables.transformer_block_trace.quantities import swiglu_parts
from blocktrace.explorables.transformer_block_trace.view import TraceExplorable


def test_nearly_closed_gates_pass_under_a_twentieth_of_their_value() -> None:
    explorable = TraceExplorable(query={}, predict=False)
    parts = swiglu_parts(explorable.state)
    closed = np.abs(parts["SiLU(gate)"]) < 0.05
    assert closed.any(), "the default vector has a nearly closed gate (h2)"
    assert np.all(np.abs(parts["SiLU(gate) × value"][closed]) < 0.05 * np.abs(parts["value"][closed]))
    sentence = describe.swiglu_sentences(explorable.state)[1]
    assert sentence.startswith(f"{int(closed.sum())} of {closed.size} gates")
    assert "less than 5 % of their value" in sentence


def test_a_large_gate_can_pass_more_than_the_whole_value() -> None:
    """SiLU is a multiplier, not a fraction: the lead under "Inside SwiGLU" says so, and the default shows it."""
    explorable = TraceExplorable(query={}, predict=False)
    parts = swiglu_parts(explorable.state)
    assert np.any(parts["SiLU(gate)"] > 1)
    script = explorable.drawing._scripts["render"]  # block_trace.js writes the lead
    lead = re.search(r"Each hidden unit multiplies.*?whole value\.", script.replace('" +\n    "', ""))
    assert lead and "more than its whole value" in lead.group(0) and "lets the value pass" not in lead.group(0)
