"""Explorable "Pre-norm Transformer block trace" (lesson 000): one token vector through one block."""

from blocktrace.explorables.transformer_block_trace.state import TraceState
from blocktrace.explorables.transformer_block_trace.view import TraceExplorable

EXPLORABLE_ID = "transformer-block-trace"
__all__ = ["EXPLORABLE_ID", "TraceExplorable", "TraceState"]
