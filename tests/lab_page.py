"""The decoder lab as its browser draws it, read without a browser: its panels' words in page order, its tables with
their numbers in place, and each chart's numbers (explorables/components/drawn_view/decoder_lab.js draws them)."""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from tests.drawn import meta

__all__ = ["chart", "drawn", "page_parts", "page_text", "rows", "table", "tables"]

ORDER = ["trained", "live", "budget", "shapes", "params", "exercise", "invariants", "stages", "heads", "norms", "acts",
         "causal", "depth", "worked", "symptoms"]


def drawn(view: Any) -> tuple[dict, np.ndarray]:
    """The last payload: (meta, values)."""
    return meta(view), np.asarray(view.drawing.values)


def _tables(obj: Any, found: list[dict]) -> None:
    if isinstance(obj, dict):
        if {"caption", "header", "rows"} <= set(obj):
            found.append(obj)
            return
        for v in obj.values():
            _tables(v, found)
    elif isinstance(obj, list):
        for v in obj:
            _tables(v, found)


def tables(view: Any) -> list[dict]:
    """Every table drawn, in page order."""
    m, _ = drawn(view)
    found: list[dict] = []
    for key in ORDER:
        _tables(m.get(key), found)
    return found


def table(view: Any, caption: str) -> dict:
    """The one table whose caption starts with `caption`."""
    [found] = [t for t in tables(view) if t["caption"].startswith(caption)]
    return found


def rows(view: Any, caption: str) -> list[list]:
    """A table's rows as drawn: [label, cell, …], each number in its place (a float), words as they are."""
    values = np.asarray(view.drawing.values)
    out = []
    for r in table(view, caption)["rows"]:
        cells = list(r["cells"])
        for k, i in enumerate(r.get("num", [])):
            cells[i] = float(values[r["at"] + k])
        out.append([r["label"], *cells])
    return out


def _words(obj: Any, out: list[str]) -> None:
    if isinstance(obj, str):
        out.append(obj)
    elif isinstance(obj, dict):
        for key, v in obj.items():
            if key not in ("cls", "dash", "className"):
                _words(v, out)
    elif isinstance(obj, list):
        for v in obj:
            _words(v, out)


# The payload's parts each panel draws, in its order (decoder_lab.js); the held lines where a part is not sent.
PANEL_PARTS = {1: ["budget", "shapes", "params", "exercise"], 2: ["invariants", "stages", "heads"], 3: ["norms"],
               4: ["acts"], 5: ["causal"], 6: ["depth", "budget"], 7: ["worked"], 8: ["symptoms"]}
HELD = {"invariants": 0, "heads": 1, "causal": 2}


def page_parts(view: Any) -> list[str]:
    """The drawing's words in page order: above the panels, then per panel its heading ("6. Depth"), its lead, its
    controls' labels and what it draws now (its messages, tables and sentences)."""
    m, _ = drawn(view)
    spec = json.loads(view.drawing.spec)
    out: list[str] = []
    _words(m.get("trained"), out)
    _words(m.get("live"), out)
    out += [c["label"] for c in spec["controls"] if not c.get("panel")]
    for p in spec.get("panels", []):
        out += [f"{p['n']}. {p['title']}", p["lead"]]
        out += [c["label"] for c in spec["controls"] if c.get("panel") == p["n"]]
        out += [e for name, e in (m.get("errors") or {}).items()
                if any(c["name"] == name and c.get("panel") == p["n"] for c in spec["controls"])]
        for key in PANEL_PARTS[p["n"]]:
            if m.get(key) is None and key in HELD and m.get("held"):
                out.append(m["held"][HELD[key]])
            else:
                _words(m.get(key), out)
    return out


def page_text(view: Any) -> str:
    """Every word the drawing shows now, in page order, whitespace collapsed."""
    return " ".join(" ".join(page_parts(view)).split())


def chart(view: Any, name: str, *path: Any) -> np.ndarray:
    """A chart's numbers: heads h ("heads", h), the norms' bars ("bars"), activation curves ("curves") and dots
    ("points"), |Δ output| ("delta"), a depth line's RMS or gradient ("rms" or "grad", variant index)."""
    m, values = drawn(view)
    if name == "heads":
        n = len(m["labels"])
        at = m["heads"][path[0]]["pattern"]
        return values[at:at + n * n].reshape(n, n)
    if name == "bars":
        o = m["norms"]
        return values[o["bars"]:o["bars"] + 3 * o["n"]].reshape(3, o["n"])
    if name == "curves":
        o = m["acts"]
        return values[o["curves"]:o["curves"] + 4 * o["n"]].reshape(4, o["n"])
    if name == "points":
        o = m["acts"]
        return values[o["points"]:o["points"] + 2 * o["m"]].reshape(2, o["m"])
    if name == "delta":
        o = m["causal"]
        return values[o["delta"]:o["delta"] + o["T"] * o["d"]].reshape(o["T"], o["d"])
    line = m["depth"]["lines"][path[0]]
    return values[line[name]:line[name] + line["n"]]
