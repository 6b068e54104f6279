"""Explorable "train-the-block": race two models that differ in one design choice on a tiny task."""

from blocktrace.explorables.train_the_block.state import RaceState
from blocktrace.explorables.train_the_block.view import RaceExplorable

EXPLORABLE_ID = "train-the-block"
__all__ = ["EXPLORABLE_ID", "RaceExplorable", "RaceState"]
