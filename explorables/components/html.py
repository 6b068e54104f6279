"""Small HTML builders. Every piece of text goes through escape(): nothing typed is ever markup."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from blocktrace.explorables.components.numbers import NO_RMS, number

__all__ = ["alt_text", "cell_number", "table"]


def cell_number(value: float | str | None, plain: bool = False) -> str:
    """A table cell for a signed number; the sign is in the text and in a class for styling.

    plain cells (norms, weights) are non-negative quantities shown without a sign.
    """
    if value is None:
        return '<td class="num empty"></td>'
    if value == NO_RMS:  # a number column's "none" (stage_rms): in line with the numbers
        return f'<td class="num none">{NO_RMS}</td>'
    if isinstance(value, str):
        return f'<td class="txt">{escape(value)}</td>'
    text = number(value, signed=not plain)
    if value != value:
        kind = "nan"
    elif plain:
        kind = "norm"
    else:
        kind = "pos" if text.startswith("+") else "neg" if text.startswith("\u2212") else "zero"
    return f'<td class="num {kind}">{text}</td>'


def table(
    caption: str,
    header: Sequence[str],
    rows: Sequence[tuple[str, Sequence[float | str | None], dict]],
    extra_class: str = "",
) -> str:
    """An accessible table: a caption, column headers, and a header cell naming each row.

    rows: (row label, numbers, options) with options keys `note` (an alarm after the label, such as "NaN"),
    `aside` (a quiet remark after the label),
    `class` (row class), `current` (aria-current for a highlighted row) and `plain`
    (column indexes shown without a sign).
    """
    head = "".join(f'<th scope="col">{escape(h)}</th>' for h in header)
    body = []
    for label, numbers, opts in rows:
        note = f' <span class="row-note">{escape(opts["note"])}</span>' if opts.get("note") else ""
        note += f' <span class="row-aside">{escape(opts["aside"])}</span>' if opts.get("aside") else ""
        cls = f' class="{escape(opts["class"])}"' if opts.get("class") else ""
        current = ' aria-current="step"' if opts.get("current") else ""
        plain = opts.get("plain", ())
        cells = "".join(cell_number(v, i in plain) for i, v in enumerate(numbers))
        body.append(f'<tr{cls}{current}><th scope="row">{escape(label)}{note}</th>{cells}</tr>')
    return (
        f'<table class="bt-table {escape(extra_class)}"><caption>{escape(caption)}</caption>'
        f"<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
    )


def alt_text(title: str, sentences: Sequence[str]) -> str:
    """A text alternative for a plot, visible on demand and read by screen readers."""
    body = " ".join(escape(s) for s in sentences)
    return f'<details class="alt-text"><summary>Describe “{escape(title)}” in words</summary><p>{body}</p></details>'
