"""Sessions share what a setting renders to, never a widget or a model, and never a wrong number."""

from __future__ import annotations

import itertools
import threading

import numpy as np
import pytest

from blocktrace.explorables.components.shared_cache import SharedCache
from blocktrace.explorables.engine import run_preset
from blocktrace.explorables.transformer_block_trace.renderings import RENDERINGS, render, rendered
from blocktrace.explorables.transformer_block_trace.state import ROW_KEYS, TRACES, TraceState, traced
from blocktrace.explorables.transformer_block_trace.view import TraceExplorable

SETTINGS = list(itertools.product(
    ["1.5, -0.5, 0.25, 2", "2, 2, 2, 2", "0, 0, 0, 0", "-3, 1e-3, 7, 0.5, 1, -1"],
    [0.0, 0.35, 1.0, 3.0],
    [0.0, 1.0, 2.5],
    [False, True],
    ["rmsnorm", "layernorm"],
))


def state_with(text, scale, mlp, replace, norm, inspect=ROW_KEYS[-1]) -> TraceState:
    state = TraceState()
    state.param.update(input_text=text, attention_scale=scale, mlp_scale=mlp, replace=replace, norm=norm,
                       inspect=inspect)
    return state


@pytest.fixture(autouse=True)
def empty_caches():
    TRACES.clear()
    RENDERINGS.clear()
    yield


def test_a_shared_rendering_equals_one_computed_afresh():
    for n, settings in enumerate(SETTINGS):
        inspect = ROW_KEYS[n % len(ROW_KEYS)]
        first = state_with(*settings, inspect=inspect)
        rendered(first)  # fills the cache from this session
        second = state_with(*settings, inspect=inspect)  # another session, same settings
        shared = rendered(second)
        assert shared is rendered(first)
        assert shared == render(second)  # what this session would have computed by itself
    assert RENDERINGS.hits >= len(SETTINGS)


def test_a_shared_trace_equals_the_engine_and_cannot_be_written():
    vector = (1.5, -0.5, 0.25, 2.0)
    trace = traced(vector, 0.35, 1.0, True, "layernorm")
    assert traced(vector, 0.35, 1.0, True, "layernorm") is trace
    fresh = run_preset("single-token", vector=list(vector), attention_scale=0.35, mlp_scale=1.0,
                       residual="replace", norm="layernorm")
    assert trace.keys() == fresh.keys()
    for stage in fresh:
        assert np.array_equal(trace[stage.key], stage.values)
        with pytest.raises(ValueError):
            trace[stage.key][...] = 0.0


def test_settings_are_told_apart_by_their_exact_bits():
    assert traced((0.0, 1.0)) is not traced((-0.0, 1.0))
    assert traced((1.0, 2.0), attention_scale=0.35) is not traced((1.0, 2.0), attention_scale=0.35000000000000003)
    assert traced((1.0, 2.0), attention_scale=0.35) is traced([1.0, 2.0], attention_scale=float("0.35"))


def test_two_sessions_share_strings_but_not_models_or_plot_data():
    one, two = TraceExplorable(predict=False), TraceExplorable(predict=False)
    for view in (one, two):
        view.state.attention_scale = 0.35
        assert view.figures is not None  # drawn, as after the page loads
        view._refresh()
    assert one.stage_table.object == two.stage_table.object
    assert one.stage_table is not two.stage_table and one.figures.norm_src is not two.figures.norm_src
    before = list(two.figures.norm_src.data["norm"])
    one.figures.norm_src.data["norm"][0] = -99.0  # one session's data changed in place ...
    assert two.figures.norm_src.data["norm"] == before  # ... reaches neither the other session ...
    assert rendered(one.state).source_data("norm")["norm"] == before  # ... nor the shared rendering


def test_the_cache_keeps_the_most_recently_used_entries_within_its_size():
    cache: SharedCache[int] = SharedCache(3)
    calls = []

    def value(k):
        def compute():
            calls.append(k)
            return k * 10
        return compute

    for k in (1, 2, 3):
        assert cache.get(k, value(k)) == k * 10
    cache.get(1, value(1))  # 1 is now the most recent
    cache.get(4, value(4))  # 2, the least recent, goes
    assert len(cache) == 3
    cache.get(1, value(1))
    cache.get(2, value(2))
    assert calls == [1, 2, 3, 4, 2]


def test_the_cache_answers_the_same_under_threads():
    cache: SharedCache[tuple] = SharedCache(8)
    errors = []

    def worker(seed):
        try:
            for i in range(2000):
                k = (seed * 7 + i) % 20
                assert cache.get(k, lambda k=k: (k, k * k)) == (k, k * k)
        except Exception as err:  # noqa: BLE001 - reported below
            errors.append(err)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(cache) <= 8


def test_a_plot_source_is_sent_again_only_when_its_data_changed():
    from bokeh.document import Document

    view = TraceExplorable(predict=False)
    figs = view.figures
    doc = Document()
    for fig in (figs.norm_fig, figs.comp_fig, figs.swiglu_fig):
        doc.add_root(fig)
    changed = []
    doc.on_change(lambda event: changed.append(event.model) if getattr(event, "attr", None) == "data" else None)

    view.state.attention_scale = 0.35  # the default block's line does not depend on it
    assert figs.norm_src in changed and figs.comp_src in changed and figs.norm_base not in changed
    assert figs.norm_src.data["norm"] == list(dict(rendered(view.state).norm)["norm"])

    changed.clear()
    view.state.inspect = "blocks.0.attn_out"  # only the components plot shows the inspected stage
    assert changed == [figs.comp_src]

    changed.clear()
    view.state.input_text = "1, 2, 3, 4"
    assert {figs.norm_src, figs.norm_base, figs.comp_src, figs.swiglu_src} <= set(changed)
    fresh = TraceExplorable(predict=False)
    fresh.state.param.update(input_text="1, 2, 3, 4", attention_scale=0.35, inspect="blocks.0.attn_out")
    for name in ("norm_src", "norm_base", "comp_src", "swiglu_src"):
        assert dict(getattr(figs, name).data) == dict(getattr(fresh.figures, name).data)
