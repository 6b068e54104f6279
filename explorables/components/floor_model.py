"""What a floor is and what its diagram shows now: plain data, no geometry.

A FloorSpec is one floor as the diagram draws it (its stages by role, its variant); a Shown is everything the
diagram shows for one state of its explorable: the selection, each card's value text, each stage's name, the
tags. floor_layout.py turns a FloorSpec into geometry; floor_diagram.py sends both to the browser.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["LOCKED_NAME", "NORM_ROLES", "PART_ROLES", "REQUIRED", "STREAM_ROLES", "UPDATE_ROLES", "FloorSpec", "Shown",
           "Stage", "shown", "spec_from", "stage_name"]

# The roles a stage can play in the diagram: the engine's local stage keys.
STREAM_ROLES = ("embed", "resid_pre", "resid_mid", "resid_post")
NORM_ROLES = ("ln1.normalized", "ln2.normalized")
UPDATE_ROLES = ("attn_out", "mlp_out")
PART_ROLES = {"attn": ("attn.q", "attn.k", "attn.v", "attn.scores", "attn.pattern"),
              "mlp": ("mlp.gate", "mlp.value", "mlp.hidden")}
REQUIRED = ("resid_pre", *NORM_ROLES, *UPDATE_ROLES, "resid_mid", "resid_post")


@dataclass(frozen=True)
class Stage:
    """One stage the diagram draws as a node."""

    role: str  # the engine's local key, e.g. "ln1.normalized": where it sits in the floor
    key: str  # the full stage key the explorable selects, e.g. "blocks.0.ln1.normalized"
    label: str  # the lesson's words, as the stage table shows them


@dataclass(frozen=True)
class FloorSpec:
    """What one floor is, as the diagram draws it: its stages and its variant."""

    stages: tuple[Stage, ...]
    placement: str = "pre"  # "pre": norm before each sublayer; "post": norm on the stream after each +
    residual: str = "add"  # "replace": the identity path is cut
    causal: bool | None = None  # None: the explorable has no mask to show
    positions: bool | None = None  # None: no embedding stage before the floor
    mlp_title: str = "MLP"
    end_label: str = "output"  # where the stream goes after the floor

    def __post_init__(self) -> None:
        roles = [s.role for s in self.stages]
        missing = [r for r in REQUIRED if r not in roles]
        if missing:
            raise ValueError(f"a floor needs the stages {', '.join(missing)}")
        if self.positions is not None and "embed" not in roles:
            raise ValueError("position stamps are drawn onto the embedding: give the embed stage")
        if self.placement not in ("pre", "post") or self.residual not in ("add", "replace"):
            raise ValueError(f"unknown variant {self.placement}/{self.residual}")

    def stage(self, role: str) -> Stage | None:
        return next((s for s in self.stages if s.role == role), None)

    def parts(self, sublayer: str) -> list[Stage]:
        return [s for r in PART_ROLES[sublayer] if (s := self.stage(r)) is not None]

    @property
    def keys(self) -> list[str]:
        return [s.key for s in self.stages]


def spec_from(stages: Iterable[tuple[str, str, str]], **variant: Any) -> FloorSpec:
    """A FloorSpec from (role, key, label) triples."""
    return FloorSpec(tuple(Stage(*s) for s in stages), **variant)


# --- what the diagram shows now ------------------------------------------------------------------

@dataclass(frozen=True)
class Shown:
    """Everything the diagram shows for one state of its explorable (plain data, sent as the component's params).

    values, names and alerts are keyed by stage key. While the gate is locked there are no values, and the
    names say only what each stage is.
    """

    spec: FloorSpec
    selected: str
    values: Mapping[str, str] = field(default_factory=dict)  # the small text on each card
    names: Mapping[str, str] = field(default_factory=dict)  # what a screen reader, the tooltip and the focus line say
    alerts: Mapping[str, str] = field(default_factory=dict)  # a tag on a card: "input lost", "✗ check fails", …
    locked: bool = False
    caption: str = ""


LOCKED_NAME = "values appear once you commit your prediction"


def stage_name(stage: Stage, said: str | None, locked: bool, alert: str = "", locked_name: str = LOCKED_NAME) -> str:
    """A node's accessible name: the lesson's label, the engine's key, and its values in words."""
    what = locked_name if locked else (said or "")
    text = f"{stage.label} ({stage.key})"
    if what:
        text += f": {what.rstrip('.')}"
    if alert:
        text += f". {alert.replace('✗', '').strip().capitalize()}"
    return text + "."


def shown(spec: FloorSpec, selected: str, values: Mapping[str, tuple[str, str]] | None, locked: bool,
          alerts: Mapping[str, str] | None = None, caption: str = "", locked_name: str = LOCKED_NAME) -> Shown:
    """Put together what the diagram shows. values: key -> (card text, the same in words); ignored when locked.

    locked_name: what each stage's name says in place of its values while locked."""
    values = {} if locked or values is None else values
    alerts = {} if locked or alerts is None else alerts
    cards = {s.key: values[s.key][0] if s.key in values else "" for s in spec.stages}
    names = {s.key: stage_name(s, values[s.key][1] if s.key in values else None, locked, alerts.get(s.key, ""),
                               locked_name) for s in spec.stages}
    if selected not in spec.keys:
        selected = ""
    return Shown(spec, selected, cards if not locked else {}, names, dict(alerts), locked, caption)
