"""The race's curves and words, from the state's sides: the depth plot's rows and the race in sentences.

The browser draws the curves (components/drawn_view/train_the_block.js) from the payload (payload.py): both loss
curves on a log axis, the held-out accuracy and each floor's gradient norm now, also on a log axis.
"""

from __future__ import annotations

from collections.abc import Sequence

from blocktrace.explorables.components.numbers import number
from blocktrace.explorables.train_the_block.state import TARGET_TEXT, RaceState

__all__ = ["FLOOR_TINY", "SIDE_SERIES", "depth_data", "race_sentences"]

SIDE_SERIES = (0, 5)  # A blue, B vermilion (ChartColours.series): told apart without red-green
FLOOR_TINY = 1e-12  # a gradient norm of 0 (replace cuts the path) is drawn here on the log axis


def depth_data(state: RaceState) -> dict[str, list]:
    """Each model's ‖∂loss/∂stream‖ entering each floor and at the output, at its latest step.

    # -> {"depth", "a", "b"}: depth 0 … the deeper model's floors; a side without that depth gets NaN
    """
    rows = [side.steps[-1].floor_grad_norms if side.steps else () for side in (state.a, state.b)]
    depth = max(len(r) for r in rows)
    pad = [[max(v, FLOOR_TINY) for v in r] + [float("nan")] * (depth - len(r)) for r in rows]
    return {"depth": list(range(depth)), "a": pad[0], "b": pad[1]}


def race_sentences(state: RaceState, names: Sequence[str]) -> list[str]:
    """The race in words, for screen readers and as the figures' text alternative."""
    out = []
    for name, side in zip(names, (state.a, state.b), strict=True):
        if not side.steps:
            out.append(f"{name}: not started.")
            continue
        last = side.steps[-1]
        n = len(side.steps)
        text = f"{name}: {n} step{'' if n == 1 else 's'}, training loss {number(last.loss)}"
        if side.held_out:
            step, _, acc = side.held_out[-1]
            text += f", held-out accuracy {number(100 * acc, 1)} % at step {step}"
        reached = side.reached
        text += f"; reached {TARGET_TEXT} at step {reached}." if reached is not None else "."
        if side.diverged_at is not None:
            text += f" It diverged at step {side.diverged_at + 1} and stopped there."
        out.append(text)
    return out
