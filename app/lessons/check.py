"""Checks that every explorable, stage, state key and exercise a lesson names exists."""

from __future__ import annotations

from blocktrace.app.lessons.loading import Lesson
from blocktrace.app.package_data import ROOT
from blocktrace.app.server.registry import COMMON_KEYS, EXPLORABLE_SPECS
from blocktrace.explorables.engine import BlockConfig, block_keys

__all__ = ["lesson_problems"]


def known_stage_keys(n_layers: int = 6) -> set[str]:
    """Every stage key the engine can record, for any variant, up to n_layers blocks."""
    keys = {"embed", "pos_embed"}
    for mlp in ("swiglu", "gelu"):
        config = BlockConfig(d_model=4, mlp=mlp)
        for i in range(n_layers):
            keys |= {f"blocks.{i}.{k}" for k in block_keys(config)}
    return keys


def lesson_problems(lesson: Lesson) -> list[str]:
    """What is wrong with a lesson's references; empty when everything it names exists."""
    problems = []
    where = lesson.path.name if lesson.path else lesson.id
    for eid in lesson.explorables:
        if eid not in EXPLORABLE_SPECS:
            problems.append(f"{where}: front matter names unknown explorable {eid!r}")
    stages = known_stage_keys()
    problems += [f"{where}: unknown stage {s!r}" for s in lesson.stages if s not in stages]
    seen_checkpoints: set[str] = set()
    predicted = {d.attrs.get("explorable") for d in lesson.directives("predict")}
    for d in lesson.directives():
        at = f"{where}:{d.line}"
        if d.name in ("explorable", "predict"):
            eid = d.attrs.get("id") if d.name == "explorable" else d.attrs.get("explorable")
            if eid not in EXPLORABLE_SPECS:
                problems.append(f"{at}: unknown explorable {eid!r}")
                continue
            if eid not in lesson.explorables:
                problems.append(f"{at}: explorable {eid!r} is not listed in the front matter")
            keys = EXPLORABLE_SPECS[eid].query_keys()
            for key, value in (d.attrs.get("state") or {}).items():
                if key in COMMON_KEYS:
                    continue
                if key not in keys:
                    problems.append(f"{at}: {eid!r} has no state key {key!r}")
                    continue
                try:
                    keys[key].read(str(value))
                except ValueError:
                    problems.append(f"{at}: {eid!r} refuses {key}={value!r}")
        elif d.name == "checkpoint":
            cid = d.attrs.get("id")
            options = d.attrs.get("options") or []
            if not cid or cid in seen_checkpoints:
                problems.append(f"{at}: checkpoint needs a unique id, got {cid!r}")
            seen_checkpoints.add(cid)
            if not d.attrs.get("question") or len(options) < 2:
                problems.append(f"{at}: checkpoint {cid!r} needs a question and at least two options")
            if sum(bool(o.get("correct")) for o in options) != 1:
                problems.append(f"{at}: checkpoint {cid!r} needs exactly one correct option")
            if any(not o.get("feedback") for o in options):
                problems.append(f"{at}: checkpoint {cid!r} has an option without feedback")
        elif d.name == "exercise":
            path = ROOT / str(d.attrs.get("path", ""))
            if not d.attrs.get("path") or not path.is_dir():
                problems.append(f"{at}: exercise folder {d.attrs.get('path')!r} does not exist")
            if not d.attrs.get("command"):
                problems.append(f"{at}: exercise needs the command a student runs")
        elif d.name == "explain" and not d.attrs.get("prompt"):
            problems.append(f"{at}: explain needs a prompt")
        elif d.name == "answer":  # held until a commit: one this page asks for, or it would never open
            if d.attrs["after"] == "checkpoint" and d.attrs["checkpoint"] not in seen_checkpoints:
                problems.append(f"{at}: answer opens after checkpoint {d.attrs['checkpoint']!r}, which does not "
                                "come before it")
            elif d.attrs["after"] != "checkpoint" and d.attrs["explorable"] not in predicted:
                problems.append(f"{at}: answer opens after the {d.attrs['after']} of {d.attrs['explorable']!r}, "
                                "which the lesson does not ask for (no predict directive)")
    for name in ("predict", "explorable", "exercise", "explain"):
        if not lesson.directives(name):
            problems.append(f"{where}: no {name} directive (each lesson has all four checkpoints)")
    return problems
