"""The tuning layer: patches apply only on the versions they were verified on, stand down with one log line
elsewhere, `--no-tuning` leaves Panel and Bokeh as shipped, and nothing outside app/tuning imports their
private names (attribute access is checked by review, not here)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from blocktrace.app import tuning

ROOT = Path(__file__).resolve().parents[2]
LIBRARIES = ("panel", "bokeh", "tornado", "param")


@pytest.mark.parametrize(("found", "verified", "expected"), [
    ("1.9.0", ("1.9.0", "1.10"), True),
    ("1.10.7", ("1.9.0", "1.10"), True),
    ("1.10.0rc2", ("1.9.0", "1.10"), True),
    ("1.11.0", ("1.9.0", "1.10"), False),
    ("2.0.0", ("1.9.0", "1.10"), False),
    ("1.8.9", ("1.9.0", "1.10"), False),
    ("3.9.0", ("3.9.1", "3.10"), False),
    ("3.9.1", ("3.9.1", "3.10"), True),
    ("6.6.1", ("6.2", "6.6"), True),
])
def test_a_version_is_within_the_verified_range_only_between_its_ends(found, verified, expected) -> None:
    """The lowest release counts, every patch release of the highest verified minor counts, nothing beyond."""
    assert tuning.within(found, verified) is expected


def test_every_patch_names_its_libraries_and_has_a_module_with_apply() -> None:
    """Each row of PATCHES is a module of the tuning package with an apply(), listed in its docstring."""
    assert len({p.name for p in tuning.PATCHES}) == len(tuning.PATCHES)
    modules = {p.stem for p in (ROOT / "app" / "tuning").glob("*.py")} - {"__init__"}
    assert {p.name for p in tuning.PATCHES} == modules
    for patch in tuning.PATCHES:
        assert patch.libraries and set(patch.libraries) <= set(LIBRARIES)
        assert f"- {patch.name}:" in tuning.__doc__, f"{patch.name} is not in the package docstring"
        source = (ROOT / "app" / "tuning" / f"{patch.name}.py").read_text(encoding="utf-8")
        assert "\ndef apply() -> None:" in source


def run_python(code: str) -> dict:
    """Run code in a fresh interpreter (the tuning decision is once per process); its last line is JSON."""
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_outside_its_verified_range_a_patch_stands_down_with_one_line_and_the_pages_still_build() -> None:
    """With a Panel release newer than verified, every patch touching Panel is left out (one warning each),
    the Bokeh-only ones apply, and the routes and server settings are made on the stock path."""
    result = run_python("""
import json, logging
from blocktrace.app import tuning
lines = []
handler = logging.Handler(); handler.emit = lambda record: lines.append(record.getMessage())
tuning_log = logging.getLogger("blocktrace.app.tuning")
tuning_log.addHandler(handler); tuning_log.setLevel("INFO")
fake = lambda name: "1.11.0" if name == "panel" else tuning.installed(name)
applied = tuning.apply(True, version_of=fake)
from blocktrace.app.server.routes import routes, server_kwargs
pages = routes()
kwargs = server_kwargs()
print(json.dumps({"applied": applied, "lines": lines, "pages": sorted(pages), "dirs": sorted(kwargs["static_dirs"]),
                  "patterns": [p[0] for p in kwargs["extra_patterns"]]}))
""")
    panel_patches = [p.name for p in tuning.PATCHES if "panel" in p.libraries]
    assert set(result["applied"]) == {p.name for p in tuning.PATCHES} - set(panel_patches)
    warnings = [line for line in result["lines"] if "stands down" in line]
    assert len(warnings) == len(panel_patches)
    for name, line in zip(panel_patches, warnings, strict=True):
        assert line.startswith(f"tuning: {name} stands down: panel 1.11.0 (verified 1.9.0 to 1.10.x)")
    assert "/explorables/transformer-block-trace" in result["pages"] and "/" in result["pages"]
    assert result["dirs"] == ["assets"]  # panel_fixes stood down: no alias of Panel's dist folder
    # compressed_static stood down: no Panel routes of its own
    assert result["patterns"] == ["/health", "/health/memory", "/embed-check", "/static/extensions/(.*)"]


def test_a_patch_named_in_the_setting_is_left_out_and_an_unknown_name_stops_the_server() -> None:
    """BLOCKTRACE_TUNING_WITHOUT leaves those patches out (each logged) and applies the rest; a name that is no
    patch is an error, not a measurement of nothing."""
    result = run_python("""
import json, logging, os
os.environ["BLOCKTRACE_TUNING_WITHOUT"] = "early_page,socket_tuning"
lines = []
handler = logging.Handler(); handler.emit = lambda record: lines.append(record.getMessage())
tuning_log = logging.getLogger("blocktrace.app.tuning")
tuning_log.addHandler(handler); tuning_log.setLevel("INFO")
from blocktrace.app import tuning
try:
    tuning.apply(True, without=("no_such_patch",))
except ValueError as error:
    refused = str(error)
from blocktrace.app.server.routes import routes
routes()
print(json.dumps({"refused": refused, "applied": tuning.applied(), "lines": lines}))
""")
    assert result["refused"] == "no tuning patch named no_such_patch"
    assert set(result["applied"]) == {p.name for p in tuning.PATCHES} - {"early_page", "socket_tuning"}
    assert "tuning: early_page left out" in result["lines"] and "tuning: socket_tuning left out" in result["lines"]


def test_no_tuning_leaves_panel_bokeh_and_tornado_as_shipped() -> None:
    """routes(tuned=False) applies nothing: every attribute a patch replaces is still the library's own."""
    result = run_python("""
import json, sys
import panel, bokeh.core.has_props, bokeh.server.tornado, bokeh.server.urls, panel.io.document, panel.io.server
import panel.reactive
watched = {
    "Reactive._update_properties": lambda: panel.reactive.Reactive._update_properties,
    "create_static_handler": lambda: bokeh.server.tornado.create_static_handler,
    "per_app_patterns": lambda: tuple(h for _, h, *_ in bokeh.server.urls.per_app_patterns),
    "dispatch_tornado": lambda: panel.io.document.dispatch_tornado,
    "WSHandler.open": lambda: panel.io.server.WSHandler.open,
}
before = {k: get() for k, get in watched.items()}
from blocktrace.app.server.routes import routes, server_kwargs
from blocktrace.app import tuning
pages = routes(tuned=False)
kwargs = server_kwargs()
changed = sorted(k for k, get in watched.items() if get() is not before[k] and get() != before[k])
print(json.dumps({"changed": changed, "applied": tuning.applied(),
                  "patterns": [p[0] for p in kwargs["extra_patterns"]], "pages": len(pages)}))
""")
    assert result == {"changed": [], "applied": [],
                      "patterns": ["/health", "/health/memory", "/embed-check"],
                      "pages": result["pages"]}
    assert result["pages"] >= 7


@pytest.mark.parametrize("tuned", [True, False], ids=["tuned", "no-tuning"])
def test_the_servers_public_settings_hold_with_or_without_tuning(tuned: bool) -> None:
    """No BrowserInfo and no per-session validation or signature checks are configuration (routes.configure),
    set with --no-tuning too; Panel and Bokeh ship them on."""
    result = run_python(f"""
import json
import panel
from bokeh.settings import settings
shipped = [panel.config.browser_info, settings.perform_document_validation(), settings.perform_error_diagnostics()]
from blocktrace.app.server.routes import routes
routes(tuned={tuned})
print(json.dumps({{"shipped": shipped, "served": [panel.config.browser_info, settings.perform_document_validation(),
                                                 settings.perform_error_diagnostics()]}}))
""")
    assert result == {"shipped": [True, True, True], "served": [False, False, False]}


def test_the_same_attributes_are_replaced_when_tuned() -> None:
    """The check above could fail: with the tuning layer on, those very attributes are ours."""
    result = run_python("""
import json
import panel.io.document
from blocktrace.app.server.routes import routes
routes()
print(json.dumps({"socket": panel.io.document.dispatch_tornado.__module__}))
""")
    assert result == {"socket": "blocktrace.app.tuning.socket_tuning"}


def private_uses(path: Path) -> list[str]:
    """Imports of a private name (or private module) of Panel, Bokeh, Tornado or param in one file."""
    found = []
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in LIBRARIES:
            if any(part.startswith("_") for part in node.module.split(".")):
                found.append(f"{path.name}:{node.lineno} from {node.module}")
            found += [f"{path.name}:{node.lineno} {alias.name}" for alias in node.names if alias.name.startswith("_")]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] in LIBRARIES and any(p.startswith("_") for p in parts):
                    found.append(f"{path.name}:{node.lineno} {alias.name}")
    return found


def test_outside_the_tuning_package_no_module_imports_a_private_name_of_the_libraries(tmp_path: Path) -> None:
    """The app's own rooms and the explorables use Panel, Bokeh, Tornado and param through public names only."""
    files = [p for folder in ("app", "explorables") for p in (ROOT / folder).rglob("*.py")
             if "tuning" not in p.relative_to(ROOT).parts]
    assert len(files) > 40
    assert [use for path in files for use in private_uses(path)] == []
    sample = tmp_path / "sample.py"  # the check does see such imports
    sample.write_text("from panel.io.state import _state\nimport bokeh._version\nfrom tornado import web\n")
    assert private_uses(sample) == ["sample.py:1 _state", "sample.py:2 bokeh._version"]
