"""Explorable "decoder-block-lab" (lesson 002): shapes, design choices, causal safety and depth of a decoder block."""

from blocktrace.explorables.decoder_block_lab.state import LabState
from blocktrace.explorables.decoder_block_lab.view import DecoderLabExplorable

EXPLORABLE_ID = "decoder-block-lab"
__all__ = ["EXPLORABLE_ID", "DecoderLabExplorable", "LabState"]
