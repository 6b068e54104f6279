"""Explorable "Pre-norm Transformer block trace" (lesson 000): one token vector through one block."""

from .state import TraceState
from .view import TraceExplorable

EXPLORABLE_ID = "transformer-block-trace"
__all__ = ["EXPLORABLE_ID", "TraceExplorable", "TraceState"]
