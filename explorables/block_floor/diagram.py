"""What the floor diagram shows of the block floor: the floor of the stage on view, the tracked word's vectors.

The diagram draws the floor the stepper is on. Floor 1 starts at the word's embedding, stamped with its
position vector; a higher floor starts from the floor below's output. The stepper's stage is selected; once
the bet is committed each card shows the tracked word's vector (original order), and the first stage where
the two orders differ carries a tag.
"""

from __future__ import annotations

from blocktrace.explorables.block_floor.divergence import (
    BEFORE_FLOORS,
    FLOOR_LOCAL_KEYS,
    MLP_NAMES,
    agree,
    floor_of,
    stage_keys,
    stage_names,
)
from blocktrace.explorables.block_floor.state import FloorState
from blocktrace.explorables.components.floor_model import FloorSpec, Shown, shown, spec_from
from blocktrace.explorables.components.numbers import vector, words_of_number

__all__ = ["diagram_view", "stage_of"]

SPLIT_TAG = "orders split here"
LOCKED_NAME = "its vectors appear once you commit your prediction"


def floor_stages(state: FloorState, floor: int) -> list[tuple[str, str, str]]:
    """(role, key, label) of the stages drawn for one floor (1-based), labelled as the stage table does."""
    trace = state.original
    names = stage_names(trace)
    keys = stage_keys(trace.config.n_layers)
    if floor == 1:
        first = 1
        numbered = list(range(1, BEFORE_FLOORS + len(FLOOR_LOCAL_KEYS) + 1))
        roles = ["embed", "resid_pre", *FLOOR_LOCAL_KEYS]
        labels = [f"{n}. {name}" for n, name in zip(numbered, names, strict=True)]
        return [(role, keys[n - 1], label) for role, n, label in zip(roles, numbered, labels, strict=True)]
    first = BEFORE_FLOORS + len(FLOOR_LOCAL_KEYS) * (floor - 1) + 1  # this floor's first stepper stage
    below = first - 1  # the floor below's output: where this floor's stream starts
    stages = [("resid_pre", keys[below - 1], f"{below}. Output of floor {floor - 1}")]
    for offset, role in enumerate(FLOOR_LOCAL_KEYS):
        stage = first + offset
        stages.append((role, keys[stage - 1], f"{stage}. {names[BEFORE_FLOORS + offset]}"))
    return stages


def floor_spec(state: FloorState, floor: int) -> FloorSpec:
    c = state.original.config
    last = floor == c.n_layers
    return spec_from(floor_stages(state, floor), placement=c.placement, residual=c.residual, causal=c.causal,
                     positions=c.positions if floor == 1 else None, mlp_title=f"MLP ({MLP_NAMES[c.mlp]})",
                     end_label="block output" if last else f"to floor {floor + 1}")


def stage_of(state: FloorState, key: str) -> int:
    """The stepper's stage number of a stage key."""
    return stage_keys(state.floors).index(key) + 1


def caption(state: FloorState, floor: int, split: int | None) -> str:
    word = state.words[state.tracked]
    head = f"Floor {floor} of {state.floors}, for the tracked word “{word}”."
    if not state.bet.unlocked:
        return f"{head} Its vectors appear here once you commit your prediction."
    order = " in the original order" if state.reverse else ""
    elsewhere = ""
    if split is not None and floor_of(split) != floor:
        elsewhere = f" The two orders first differ at stage {split}, on floor {floor_of(split)}."
    return f"{head} Each card shows the word's vector{order}; select a stage to step to it.{elsewhere}"


def diagram_view(state: FloorState) -> Shown:
    floor = floor_of(state.stage)
    spec = floor_spec(state, floor)
    keys = stage_keys(state.floors)
    selected = keys[state.stage - 1]
    locked = not state.bet.unlocked
    values, alerts, split = None, None, None
    if not locked:
        values, alerts = {}, {}
        pos, mirror = state.tracked, state.mirror
        for key in spec.keys:
            mine = state.original[key][pos]
            text = vector(mine, shown=3)
            said = f"original order {words_of_number(text)}"
            if state.reverse:
                theirs = state.reversed_[key][mirror]
                same = "the same in both orders" if agree(mine, theirs) else "the orders differ here"
                said += f"; reversed order {words_of_number(vector(theirs, shown=3))}, {same}"
            values[key] = (text, said)
        # Where the orders split is the question the claim asks: told only once the student has claimed.
        split = state.divergence() if state.reverse and state.claim_result is not None else None
        if split is not None and keys[split - 1] in spec.keys:
            alerts[keys[split - 1]] = SPLIT_TAG
    return shown(spec, selected, values, locked, alerts, caption(state, floor, split), LOCKED_NAME)
