"""Data flow one way inside each explorable: no module imports (even for type checking) one that imports it back."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

EXPLORABLES = Path(__file__).resolve().parents[2] / "explorables"
PACKAGES = sorted(p.parent.name for p in EXPLORABLES.glob("*/__init__.py"))


def imports_within(package: str) -> dict[str, set[str]]:
    """module -> the modules of the same package it imports (any import statement, anywhere in the file)."""
    prefix = f"blocktrace.explorables.{package}"
    modules = {p.stem for p in (EXPLORABLES / package).glob("*.py") if p.stem != "__init__"}
    graph: dict[str, set[str]] = {}
    for name in modules:
        tree = ast.parse((EXPLORABLES / package / f"{name}.py").read_text(encoding="utf-8"))
        found: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                if node.module == prefix:
                    found |= {a.name for a in node.names if a.name in modules}
                elif node.module.startswith(prefix + "."):
                    found.add(node.module.removeprefix(prefix + ".").split(".")[0])
            elif isinstance(node, ast.Import):
                found |= {a.name.removeprefix(prefix + ".").split(".")[0] for a in node.names
                          if a.name.startswith(prefix + ".")}
        graph[name] = found - {name}
    return graph


def cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a path (a -> b -> a), or None."""
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        state[node] = 2
        path.pop()
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return None


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_cycle(package):
    graph = imports_within(package)
    assert graph, package
    found = cycle(graph)
    assert found is None, " -> ".join(found)


def test_the_cycle_finder_finds_one():
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle({"a": {"b"}, "b": set()}) is None
