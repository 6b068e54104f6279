"""Each module of the app and the explorables says what is public, and the rest of the project keeps to it."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = {"app": "blocktrace.app", "explorables": "blocktrace.explorables"}
READERS = ("app", "explorables", "tests", "benchmarks", "lessons")  # every folder whose code imports them


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join([PACKAGES[parts[0]], *parts[1:]])


def modules() -> dict[str, Path]:
    """Every importable module of the two packages, by its dotted name (not their __init__ files)."""
    return {module_name(p): p for top in PACKAGES for p in (ROOT / top).rglob("*.py")
            if p.name != "__init__.py" and "-" not in p.name}


def declared(path: Path) -> list[str] | None:
    """The module's __all__, or None."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            return list(ast.literal_eval(node.value))
    return None


def imported_names() -> dict[str, dict[str, set[str]]]:
    """For each module: the names other files import from it, with the files that do."""
    known = modules()
    found: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for folder in READERS:
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ImportFrom) and node.module in known and known[node.module] != path:
                    for alias in node.names:
                        found[node.module][alias.name].add(str(path.relative_to(ROOT)))
    return found


def test_what_other_files_import_from_a_module_is_in_its_all() -> None:
    """A name another file relies on is one its module declares public: nothing reaches into another's private
    parts, and a module's __all__ is not a list that drifted from how it is used."""
    known = modules()
    outside = []
    for module, names in imported_names().items():
        public = declared(known[module])
        if public is None:
            continue
        for name, readers in names.items():
            if name not in public and not all(r.startswith("tests/") for r in readers):
                outside.append(f"{module}.{name} (imported by {', '.join(sorted(readers))})")
    assert not outside, "imported but not in __all__: " + "; ".join(sorted(outside))


def test_every_module_others_import_says_what_is_public() -> None:
    """A module that other code of the app or the explorables imports declares __all__."""
    known = modules()
    silent = sorted(module for module, names in imported_names().items()
                    if declared(known[module]) is None
                    and any(not r.startswith(("tests/", "benchmarks/")) for readers in names.values() for r in readers))
    assert not silent, "no __all__: " + ", ".join(silent)


def test_every_name_in_all_exists() -> None:
    """Each name a module declares public is defined (or imported) there."""
    missing = []
    for module, path in modules().items():
        public = declared(path)
        if public is None:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        defined = set()
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                defined.add(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                defined |= {t.id for t in targets if isinstance(t, ast.Name)}
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                defined |= {(a.asname or a.name).split(".")[0] for a in node.names}
        missing += [f"{module}.{name}" for name in public if name not in defined]
    assert not missing, ", ".join(missing)
