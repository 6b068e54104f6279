"""Explorable "block-floor" (lesson 001): one floor, two word orders, and the first divergence."""

from .state import FloorState
from .view import FloorExplorable

EXPLORABLE_ID = "block-floor"
__all__ = ["EXPLORABLE_ID", "FloorExplorable", "FloorState"]
