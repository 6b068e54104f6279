"""Explorable "decoder-block-lab" (lesson 002): shapes, design choices, causal safety and depth of a decoder block."""

from .state import LabState
from .view import DecoderLabExplorable

EXPLORABLE_ID = "decoder-block-lab"
__all__ = ["EXPLORABLE_ID", "DecoderLabExplorable", "LabState"]
