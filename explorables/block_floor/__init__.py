"""Explorable "block-floor" (lesson 001): one floor, two word orders, and the first divergence."""

from blocktrace.explorables.block_floor.state import FloorState
from blocktrace.explorables.block_floor.view import FloorExplorable

EXPLORABLE_ID = "block-floor"
__all__ = ["EXPLORABLE_ID", "FloorExplorable", "FloorState"]
