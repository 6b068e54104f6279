"""Everything the block trace's views show for one setting of its controls, worked out once per process.

The tables, the text alternatives, the announcement and the plot data are pure functions of the
state's settings (vector, scales, residual mode, norm, inspected stage). A session asks
`rendered(state)`; sessions with the same settings share the answer (see SharedCache). The plot
data are tuples; each session copies them into its own ColumnDataSources.
"""

from __future__ import annotations

from dataclasses import dataclass

from blocktrace.explorables.components.html import alt_text
from blocktrace.explorables.components.shared_cache import SharedCache
from blocktrace.explorables.transformer_block_trace import describe, quantities
from blocktrace.explorables.transformer_block_trace.state import TraceState
from blocktrace.explorables.transformer_block_trace.tables import (
    baseline_table_html,
    stage_table_html,
    swiglu_table_html,
)

__all__ = ["RENDERINGS", "Rendered", "render", "rendered", "shown"]


@dataclass(frozen=True)
class Rendered:
    stage_table: str
    baseline_table: str
    swiglu_table: str
    norm_alt: str
    comp_alt: str
    swiglu_alt: str
    announcement: str
    norm: tuple  # (column, values) pairs of the norm plot's current run
    norm_base: tuple  # and of its default-block line
    input_norm: float | None  # None: no reference line (the locked rendering)
    comp: tuple
    swiglu: tuple

    def source_data(self, name: str) -> dict[str, list]:
        """A fresh dict of fresh lists for one session's ColumnDataSource."""
        return {column: list(values) for column, values in getattr(self, name)}


RENDERINGS: SharedCache[Rendered] = SharedCache(256)  # at most about 8 MB (30 KB a setting at width 16)


def rendered(state: TraceState) -> Rendered:
    return RENDERINGS.get(state.settings(), lambda: render(state))


def render(state: TraceState) -> Rendered:
    current, baseline, input_norm = quantities.norm_data(state)
    return Rendered(
        stage_table=stage_table_html(state),
        baseline_table=baseline_table_html(state),
        swiglu_table=swiglu_table_html(state),
        norm_alt=alt_text("Norm at each stage", describe.norm_sentences(state)),
        comp_alt=alt_text("Components", describe.component_sentences(state)),
        swiglu_alt=alt_text("SwiGLU detail", describe.swiglu_sentences(state)),
        announcement=describe.announcement(state),
        norm=_frozen(current),
        norm_base=_frozen(baseline),
        input_norm=input_norm,
        comp=_frozen(quantities.component_data(state)),
        swiglu=_frozen(quantities.swiglu_data(state)),
    )


def _frozen(data: dict[str, list]) -> tuple:
    return tuple((column, tuple(values)) for column, values in data.items())


LOCKED_NOTE = ("The trace appears here once you commit your prediction: the stage table, the norm at each stage, "
               "each stage's components and the SwiGLU gates. Predict first, then run the block.")
# What every view shows while the prediction gate is locked: no value of the trace, in any table,
# text alternative or plot (the figures, out of sight until the commit, keep empty sources).
LOCKED = Rendered(
    stage_table=f'<p class="bt-muted bt-locked" role="status">{LOCKED_NOTE}</p>',
    baseline_table="", swiglu_table="", norm_alt="", comp_alt="", swiglu_alt="",
    announcement="Commit your prediction to run the block.",
    norm=_frozen({"stage": [], "norm": [], "text": []}),
    norm_base=_frozen({"stage": [], "norm": []}),
    input_norm=None,
    comp=_frozen({"component": [], "value": [], "colour": [], "label": [], "label_y": [], "baseline": []}),
    swiglu=_frozen({"unit": [], **{f"s{n}": [] for n in range(len(quantities.SWIGLU_SERIES))}}),
)


def shown(state: TraceState) -> Rendered:
    """The rendering the page may show: the state's once the prediction is unlocked, else LOCKED."""
    return rendered(state) if state.prediction.unlocked else LOCKED
