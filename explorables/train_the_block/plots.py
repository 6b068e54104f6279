"""Plot builders for the race: both loss curves, held-out accuracy, and each floor's gradient norm now.

Builders are pure: data from the state's sides, figures around ColumnDataSources. The view streams new
rows into the curves' sources (ColumnDataSource.stream) and replaces the depth plot's few rows, so a figure
is built once per page and only its data travel.
"""

from __future__ import annotations

from collections.abc import Sequence

from bokeh.models import ColumnDataSource, Range1d, Span
from bokeh.plotting import figure

from blocktrace.explorables.components.figures import add_hover, base_figure, legend_outside, session_colours
from blocktrace.explorables.components.numbers import number
from blocktrace.explorables.engine.training import StepRecord
from blocktrace.explorables.train_the_block.runner import Reading
from blocktrace.explorables.train_the_block.state import TARGET, TARGET_TEXT, RaceState

__all__ = ["SIDE_SERIES", "accuracy_figure", "accuracy_rows", "depth_data", "depth_figure", "loss_figure", "loss_rows",
           "race_sentences"]

SIDE_SERIES = (0, 5)  # A blue, B vermilion (ChartColours.series): told apart without red-green
FLOOR_TINY = 1e-12  # a gradient norm of 0 (replace cuts the path) is drawn here on the log axis


def loss_rows(records: Sequence[StepRecord]) -> dict[str, list]:
    """Rows for a loss curve: step (counted from 1) and the batch's loss. # -> {"step", "loss"}"""
    return {"step": [r.step + 1 for r in records], "loss": [r.loss for r in records]}


def accuracy_rows(readings: Sequence[Reading]) -> dict[str, list]:
    """Rows for a held-out accuracy curve, in percent. # -> {"step", "accuracy"}"""
    return {"step": [step for step, _, _ in readings], "accuracy": [100 * acc for _, _, acc in readings]}


def depth_data(state: RaceState) -> dict[str, list]:
    """Each model's ‖∂loss/∂stream‖ entering each floor and at the output, at its latest step.

    # -> {"depth", "a", "b"}: depth 0 … the deeper model's floors; a side without that depth gets NaN
    """
    rows = [side.steps[-1].floor_grad_norms if side.steps else () for side in (state.a, state.b)]
    depth = max(len(r) for r in rows)
    pad = [[max(v, FLOOR_TINY) for v in r] + [float("nan")] * (depth - len(r)) for r in rows]
    return {"depth": list(range(depth)), "a": pad[0], "b": pad[1]}


def _two_lines(fig: figure, sources: Sequence[ColumnDataSource], y: str, names: Sequence[str]) -> None:
    colours = session_colours()
    for source, name, series, dash in zip(sources, names, SIDE_SERIES, ("solid", "dashed"), strict=True):
        fig.line("step", y, source=source, line_color=colours.series[series], line_width=2, line_dash=dash,
                 legend_label=name)
    legend_outside(fig, ncols=2)


def _curves(title: str, column: str, names: Sequence[str], reference: float, dash: str, y_label: str, shown: str,
            **figure_options) -> tuple[figure, list[ColumnDataSource]]:
    """Both sides' curves of `column` against step, with a reference line across at `reference`."""
    sources = [ColumnDataSource({"step": [], column: []}) for _ in range(2)]
    fig = base_figure(title, **figure_options)
    fig.add_layout(Span(location=reference, dimension="width", line_color=session_colours().reference,
                        line_dash=dash, line_width=1))
    _two_lines(fig, sources, column, names)
    fig.xaxis.axis_label = "step"
    fig.yaxis.axis_label = y_label
    add_hover(fig, [("step", "@step"), (column, shown)])
    return fig, sources


def loss_figure(names: Sequence[str], chance: float) -> tuple[figure, list[ColumnDataSource]]:
    """Both loss curves on one log axis, with the loss of chance as a dotted line."""
    return _curves("Training loss (log scale)", "loss", names, chance, "dotted", "cross-entropy (lower is better)",
                   "@loss{0.000}", y_axis_type="log")


def accuracy_figure(names: Sequence[str]) -> tuple[figure, list[ColumnDataSource]]:
    """Held-out accuracy of both, 0–100 %, with the target as a dashed line."""
    return _curves(f"Held-out accuracy: the race is to {TARGET_TEXT}", "accuracy", names, 100 * TARGET, "dashed",
                   "% right", "@accuracy{0.0} %", y_range=Range1d(0, 100))


def depth_figure(names: Sequence[str]) -> tuple[figure, ColumnDataSource]:
    """‖∂loss/∂stream‖ against depth for both models at their latest step (log scale)."""
    source = ColumnDataSource({"depth": [], "a": [], "b": []})
    fig = base_figure("Gradient reaching each floor now (log)", y_axis_type="log")
    colours = session_colours()
    for column, name, series in zip(("a", "b"), names, SIDE_SERIES, strict=True):
        fig.line("depth", column, source=source, line_color=colours.series[series], line_width=2, legend_label=name)
        fig.scatter("depth", column, source=source, color=colours.series[series], size=6, legend_label=name)
    legend_outside(fig, ncols=2)
    fig.xaxis.axis_label = "depth (0: the embeddings; last: the output)"
    fig.yaxis.axis_label = "‖∂loss/∂stream‖"
    add_hover(fig, [("depth", "@depth"), ("A", "@a{0.000e}"), ("B", "@b{0.000e}")])
    return fig, source


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
