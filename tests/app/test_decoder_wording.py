"""Issue 18 for the decoder-block lab: every sentence it shows, and every claim its lesson makes, checked
against the numbers the engine computes."""

from __future__ import annotations

import itertools
import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from blocktrace.app.cli import main as cli_main
from blocktrace.app.lessons.loading import load_lessons
from blocktrace.explorables.components import numbers
from blocktrace.explorables.decoder_block_lab import (
    DecoderLabExplorable,
    LabState,
    budget,
    checks,
    describe,
    tables,
    worked,
)
from blocktrace.explorables.decoder_block_lab.payload import payload
from blocktrace.explorables.decoder_block_lab.shapes import param_rows
from blocktrace.explorables.decoder_block_lab.state import (
    D_CHOICES,
    DEPTH_MAX_D,
    EXPANSIONS,
    HEAD_CHOICES,
    MAX_B,
    MAX_BLOCKS,
    MAX_T,
    MIN_T,
)
from blocktrace.explorables.decoder_block_lab.worked import (
    ATOL,
    RTOL,
    WorkedExample,
    WorkedRow,
    load_tensors,
    worked_example,
)
from blocktrace.explorables.engine import ops, run_preset
from tests.drawn import meta
from tests.lab_page import page_parts, page_text

LESSON = next(lesson for lesson in load_lessons() if lesson.id == "decoder-block")
TEXT = " ".join("\n".join(LESSON.markdown_parts()).split())  # whitespace collapsed: wrapped phrases match


def symptoms(view: DecoderLabExplorable) -> str:
    """Panel 8's list as the browser writes it."""
    items = meta(view)["symptoms"]
    return items if isinstance(items, str) else " ".join(f"{k}: {v}" for k, v in items)


@pytest.fixture
def lab() -> DecoderLabExplorable:
    view = DecoderLabExplorable(predict=False)
    view.__panel__()
    return view


# --- 1. the norms' verdict ----------------------------------------------------------------------


def test_a_zero_mean_vector_is_left_alone_by_layernorm_and_the_verdict_says_so(lab: DecoderLabExplorable) -> None:
    """For 1, −1, 2, −2 LayerNorm has nothing to subtract: the outputs are identical, and no other direction is
    claimed."""
    lab.state.norm_text = "1, −1, 2, −2"
    out = lab.state.normalised()
    assert np.mean(out["input"]) == 0.0 and np.array_equal(out["LayerNorm"], out["RMSNorm"])
    verdict = meta(lab)["norms"]["verdict"]
    assert "elsewhere" not in verdict and "another direction" not in verdict
    assert "The mean is already 0" in verdict and "exactly RMSNorm's" in verdict


@pytest.mark.parametrize("vector", ["3, -1, 0.5, 2", "1, 2, 3", "1, -1, 2, -2.0003", "0.1, 0.2, -0.3", "-4, 1",
                                    "1, -1, 2, -2", "5, 5.001, 4.999"])
def test_layernorm_is_said_to_turn_the_vector_only_when_it_does(vector: str) -> None:
    """A different direction is claimed exactly when the two outputs differ at the table's three decimals, and the
    angle given is the one between LayerNorm's output and the input."""
    state = LabState(norm_text=vector)
    out = state.normalised()
    verdict = describe.norms_verdict(state)
    visible = np.max(np.abs(out["LayerNorm"] - out["RMSNorm"])) >= 0.0005
    assert ("another direction" in verdict) == visible
    if visible:
        x, y = out["input"], out["LayerNorm"]
        angle = math.degrees(math.acos(np.dot(x, y) / (np.linalg.norm(x) * np.linalg.norm(y))))
        assert f"{angle:.2g}°" in verdict
        assert f"mean ({describe._num(float(np.mean(x)))})" in verdict
    else:
        assert "matches RMSNorm's" in verdict or "exactly RMSNorm's" in verdict


# --- 2. the worked example's tolerance ---------------------------------------------------------------


def float32_run(tensors: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The lesson's PyTorch block again, step for step, entirely in float32 (NumPy, no engine code)."""
    f = {name: value.astype(np.float32) for name, value in tensors.items()}
    eps = np.float32(1e-6)

    def rms_norm(x: np.ndarray) -> np.ndarray:
        return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps)

    x = f["X"]
    x_norm = rms_norm(x)
    q, k, v = x_norm @ f["W_Q"], x_norm @ f["W_K"], x_norm @ f["W_V"]
    scores = q @ np.swapaxes(k, -1, -2) / np.float32(math.sqrt(x.shape[-1]))
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights /= weights.sum(axis=-1, keepdims=True)
    attn_out = weights @ v
    x1 = x + attn_out
    x1_norm = rms_norm(x1)
    x_proj = x1_norm @ f["W_swiglu"]
    gate, val = np.split(x_proj, 2, axis=-1)
    x_swish = gate / (np.float32(1.0) + np.exp(-gate)) * val
    mlp_out = x_swish @ f["W_mlp_out"]
    values = {"X": x, "X_norm": x_norm, "Q": q, "K": k, "V": v, "scores": scores, "attn_weights": weights,
              "attn_out": attn_out, "X1": x1, "X1_norm": x1_norm, "x_proj": x_proj, "gate": gate, "val": val,
              "x_swish": x_swish, "mlp_out": mlp_out, "X2": x1 + mlp_out}
    assert all(value.dtype == np.float32 for value in values.values())
    return {name: value[0] for name, value in values.items()}


def test_a_float32_run_of_the_worked_example_is_accepted_and_a_wrong_value_is_not() -> None:
    """Other correct float32 runs count as matching, even where they are more than 1e-5 from the engine on values
    near 52; a value wrong in its fourth digit does not, and the summary says so."""
    worked = worked_example()
    assert worked.all_match  # the committed PyTorch fixture
    run = float32_run(load_tensors())
    assert all(WorkedRow(r.name, r.step, r.key, r.engine, run[r.name]).matches for r in worked.rows)
    # Four float32 steps away from the engine's own numbers, in either direction: still a correct float32 answer.
    def moved(values: np.ndarray) -> np.ndarray:
        rounded = values.astype(np.float32)
        sign = np.where(np.arange(values.size).reshape(values.shape) % 2, 1, -1).astype(np.float32)
        return (rounded + np.float32(4) * sign * np.spacing(rounded)).astype(float)

    shifted = [WorkedRow(r.name, r.step, r.key, r.engine, moved(r.engine)) for r in worked.rows]
    assert max(r.max_diff for r in shifted) > 1e-5  # beyond an absolute 1e-5 on the largest values
    assert all(r.matches for r in shifted)
    wrong = worked.row("X2").reference.copy()
    wrong[1, 3] *= 1.001
    bad = WorkedRow("X2", "Final output", "blocks.0.resid_post", worked.row("X2").engine, wrong)
    assert not bad.matches
    state = LabState()
    state.worked = WorkedExample(rows=[*worked.rows[:-1], bad], trace=worked.trace)
    drawn = json.loads(payload(state, {})[0])["worked"]["summary"]
    summary = " ".join([drawn["caption"], *(str(c) for r in drawn["rows"] for c in r["cells"])])
    assert "✗ too far" in summary and "some differ" in summary
    assert f"{numbers.number(ATOL, significant=True)} + {numbers.number(RTOL, significant=True)} · |PyTorch|" in summary


# --- 3 and 4. the preset, the worked example and the shape table ---------------------------------------


def test_lesson_says_the_lab_shows_the_same_stages_with_other_numbers(capsys: pytest.CaptureFixture[str]) -> None:
    """The lab's default block (the decoder-lab preset) records the same stage keys as the lesson's table, with
    other numbers (NumPy weights, causal, a W_O of its own); only the worked-example panel matches PyTorch's."""
    preset = run_preset("decoder-lab")
    assert preset.config.causal and not np.allclose(preset.params["blocks.0.attn.W_O"], np.eye(8))
    worked = worked_example()
    assert worked.all_match
    assert not np.allclose(preset["blocks.0.resid_post"], worked.row("X2").reference, rtol=RTOL, atol=ATOL)
    assert cli_main(["trace", "--preset", "decoder-lab", "--detail"]) in (0, None)
    printed = re.findall(r"\[(blocks\.0\.[a-z0-9_.]+)\]", capsys.readouterr().out)
    in_table = re.findall(r"`(blocks\.0\.[a-z0-9_.]+)`", TEXT[TEXT.index("| Step, stage key |"):])
    assert printed == list(dict.fromkeys(in_table))
    assert "Its panels show these same stage keys, but not the worked example's numbers; only panel 7 " \
           "reproduces those" in TEXT
    assert "seed-42 weights of its own (drawn by NumPy, not PyTorch), a W_O of its own, and the causal mask on" in TEXT


def test_lesson_shape_table_and_the_stages_that_leave_the_stream_shape() -> None:
    """Each shape in the lesson's table is the engine's, and every stage whose shape is not [B, T, d], queries,
    keys and values with their head axis included, is named as leaving it."""
    trace = LabState().trace
    rows = re.findall(r"\| ([^|]*?`blocks\.0\.[^|]*?) \| (\[[0-9, ]+\])", TEXT)
    assert len(rows) == 12
    for keys, shape in rows:
        for key in re.findall(r"`(blocks\.0\.[a-z0-9_.]+)`", keys):
            assert str(list(trace[key].shape)) == shape, key
    assert "Only the inside of the MLP (and the attention scores) leaves" not in TEXT
    leaving = {key for key in trace.keys() if key.startswith("blocks.0.") and trace[key].shape != (1, 4, 8)}
    named = {"attn.q": "queries, keys and values gain a head axis", "attn.k": "queries, keys and values",
             "attn.v": "queries, keys and values", "attn.scores": "the scores and weights are [B, h, T, T]",
             "attn.pattern": "the scores and weights", "mlp.gate": "the inside of the MLP is wider than d",
             "mlp.value": "the inside of the MLP", "mlp.hidden": "the inside of the MLP"}
    assert {key.removeprefix("blocks.0.") for key in leaving} == set(named)
    for phrase in named.values():
        assert phrase in TEXT
    two = LabState(heads=2, d=16).trace
    assert two["blocks.0.attn.q"].shape == (1, 2, 4, 8)  # [B, h, T, d/h]
    assert "[B, h, T, d/h] (here h = 1, so [1, 1, 4, 8])" in TEXT


# --- 5. GELU's two forms ---------------------------------------------------------------------------------


def test_lesson_says_pytorch_gelu_is_the_erf_form_and_how_far_apart_the_forms_are() -> None:
    """The lesson's formula is the engine's tanh GELU; PyTorch's default is z·Φ(z); the gap it states is right."""
    z = np.linspace(-8.0, 8.0, 160_001)
    exact = z * 0.5 * (1.0 + np.vectorize(math.erf)(z / math.sqrt(2.0)))
    tanh_form = 0.5 * z * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (z + 0.044715 * z**3)))
    np.testing.assert_allclose(ops.gelu(z), tanh_form, rtol=0, atol=1e-15)
    gap = np.abs(tanh_form - exact)
    assert f"{gap.max():.1g}" == "0.0005" and f"{abs(z[gap.argmax()]):.2g}" == "2.7"
    assert "differ by at most about 0.0005, near z = ±2.7" in TEXT
    assert "PyTorch's `F.gelu` and `nn.GELU` compute unless you pass `approximate=\"tanh\"`" in TEXT
    assert "exact GELU is z · Φ(z)" in TEXT


# --- 7. the wrong split ------------------------------------------------------------------------------------

NUMPY_WORDS = ("gufunc", "signature", "operand", "core dimension", "(n?,k)", "could not be broadcast")


@pytest.mark.parametrize("T", range(MIN_T, MAX_T + 1))
def test_the_wrong_split_is_explained_in_the_lessons_words(lab: DecoderLabExplorable, T: int) -> None:
    """No NumPy message reaches the page; the text names both shapes and the axis that does not fit."""
    lab.state.param.update(T=T, wrong_split=True)
    for expansion in (2, 4, 8):
        lab.state.expansion = expansion
        page = page_text(lab)
        for word in NUMPY_WORDS:
            assert word not in page, word
        split = lab.state.split
        shapes = dict(split.shapes)
        assert split.error.startswith("shape mismatch")
        if "x_swish" in shapes:
            d_mlp = lab.state.trace["blocks.0.mlp.gate"].shape[-1]
            assert (f"SiLU(gate) ⊙ value is {tables.shape_text(shapes['x_swish'])}, whose last axis (the features) "
                    f"has {2 * d_mlp} entries, but W_out is [{d_mlp}, {lab.state.d}] and needs {d_mlp}") in split.error
        else:
            assert f"the gate is {tables.shape_text(shapes['gate'])} and the value {tables.shape_text(shapes['val'])}" \
                in split.error
        assert f"halved the positions ({T} into" in split.error
        assert split.error in symptoms(lab)


def test_the_wrong_split_message_comes_from_the_shapes_not_from_numpy() -> None:
    """checks.swiglu_split never hands on NumPy's text, whatever the batch, width and length."""
    rng = np.random.default_rng(0)
    for B, T, d in ((1, 5, 8), (3, 4, 16), (2, 7, 8)):
        result = checks.swiglu_split(rng.standard_normal((B, T, d)), rng.standard_normal((d, 2 * d)),
                                     rng.standard_normal((d, 2 * d)), rng.standard_normal((2 * d, d)), wrong=True)
        assert result.out is None and not any(word in result.error for word in NUMPY_WORDS)


# --- 8. one numbering ------------------------------------------------------------------------------------


def section_titles(view: DecoderLabExplorable) -> dict[int, str]:
    """Panel number -> title, as the lab's headings print them."""
    found = {}
    for part in page_parts(view):
        for number, title in re.findall(r"^(\d+)\. (.+)$", part):
            found[int(number)] = title
    return found


def test_the_lesson_numbers_only_the_labs_panels_and_names_each_one_right(lab: DecoderLabExplorable) -> None:
    """The prose sections carry no numbers of their own; each "panel N" the lesson names is panel N's title."""
    titles = section_titles(lab)
    assert sorted(titles) == list(range(1, 9))
    markdown = "\n".join(LESSON.markdown_parts())
    assert not re.findall(r"^#+ \d", markdown, flags=re.MULTILINE)
    assert f"The lab has {['', 'one', 'two', 'three', 'four', 'five', 'six', 'seven', 'eight'][len(titles)]} " \
           "numbered panels" in TEXT
    named = re.findall(r"\*\*([^*]+)\*\* \(panel (\d)\)", TEXT) + [
        (t, n) for n, t in re.findall(r"Panel (\d), \*\*([^*]+)\*\*", TEXT)]
    assert len(named) >= 7
    for title, number in named:
        assert titles[int(number)] == title, (number, title)
    for number in re.findall(r"[Pp]anel (\d)", TEXT):
        assert int(number) in titles


# --- 9 and 6. the gradient, and the depth panel's set-up ------------------------------------------------------


@pytest.mark.parametrize("embed", [False, True])
def test_no_gradient_figure_comes_before_the_depth_panel_explains_it(embed: bool) -> None:
    """Every mention of the gradient in the lab's body comes in or after panel 6, and its figure follows the
    panel's explanation."""
    view = DecoderLabExplorable(predict=False, embed=embed)
    view.__panel__()
    order = page_parts(view)
    depth = order.index("6. Depth")
    assert not [part for part in order[:depth] if "gradient" in part]
    assert "gradient" not in describe.announcement(view.state)
    status = next(i for i, part in enumerate(order) if "at block 1's input" in part)
    assert status > depth and "gradient of a fixed scalar loss" in order[depth + 1]
    grad = view.state.depth[("pre", "add")]["grad_norm"][0]
    assert f"{describe._num(float(grad))} at block 1" in order[status]


@pytest.mark.parametrize(("changes", "width"), [
    ({}, 8), ({"d": 128, "B": 2, "T": 3}, DEPTH_MAX_D), ({"d": 512}, DEPTH_MAX_D),
    ({"d": 64, "heads": 4, "causal": False, "blocks": 7}, 64),
])
def test_the_depth_panel_says_what_it_runs(lab: DecoderLabExplorable, changes: dict, width: int) -> None:
    """Width, depth, batch and length on screen, each saying whether it follows the controls or is fixed."""
    lab.state.param.update(**changes)
    s = lab.state
    assert s.depth_d == width
    shown = meta(lab)["depth"]["setup"]
    assert f"{s.blocks} block" in shown and "(the Blocks slider)" in shown
    assert f"B = {s.B} and T = {s.T} as set in panel 1" in shown
    assert f"{s.heads} head" in shown and f"causal mask {'on' if s.causal else 'off'}" in shown
    if s.d > DEPTH_MAX_D:
        assert f"d = {DEPTH_MAX_D}, not your d = {s.d}" in shown and meta(lab)["depth"]["wide"] is True
    else:
        assert f"d = {s.d}, your d from panel 1" in shown
    assert "Placement and residual do not follow the controls" in shown
    for variant, profile in s.depth.items():
        config_rows = profile["grad_norm"]
        assert len(config_rows) == s.blocks + 1 and config_rows[-1] == pytest.approx(1.0), variant
    assert shown in page_text(lab)
    assert budget.cost(**{k: getattr(s, k) for k in ("B", "T", "d", "heads", "expansion", "mlp", "blocks")}).within()
    assert D_CHOICES[-1] > DEPTH_MAX_D  # so the fixed-width case is reachable


def depth_at(**changes) -> dict[tuple[str, str], np.ndarray]:
    """The gradient norms of the four arrangements, block 1 first, for the lab with these changes."""
    state = LabState(**changes)
    assert state.budget_error == "", changes
    return {variant: profile["grad_norm"] for variant, profile in state.depth.items()}


def reachable_settings(n: int, blocks: int | None = None) -> list[dict[str, Any]]:
    """A seeded sample of the settings a student can reach: every combination of the controls the depth panel
    reads, within the lab's budget, with eps > 0."""
    names = ("B", "T", "d", "heads", "expansion", "norm", "mlp", "causal", "blocks")
    space = itertools.product(range(1, MAX_B + 1), range(MIN_T, MAX_T + 1), D_CHOICES, HEAD_CHOICES, EXPANSIONS,
                              ("rmsnorm", "layernorm"), ("swiglu", "gelu"), (True, False),
                              [blocks] if blocks else (1, 2, 4, 8, 16, 32, MAX_BLOCKS))
    settings = [dict(zip(names, values, strict=True)) for values in space]
    within = [s for s in settings if budget.cost(**{k: v for k, v in s.items() if k not in ("norm", "causal")})
              .within()]
    picked = np.random.default_rng(18).choice(len(within), size=n, replace=False)
    return [within[i] for i in sorted(picked)]


LESSON_CASES = [{}, {"d": 512}, {"B": 2}]  # the defaults, then the two changes step 5 names


def test_the_pre_norm_add_gradient_never_fades_in_any_reachable_setting() -> None:
    """The lesson's claim, over a seeded sample of reachable settings and the ones it names: with pre-norm and add
    the gradient stays above 0.5 at every block."""
    assert "this line stays above 0.5 at every block" in TEXT
    for changes in [*LESSON_CASES, *reachable_settings(36)]:
        grads = depth_at(**changes)[("pre", "add")]
        assert grads[-1] == pytest.approx(1.0) and np.min(grads) > 0.5, changes


def test_without_a_clean_residual_line_the_gradient_lands_far_from_1_either_way() -> None:
    """Post-norm and replace have no floor: across reachable 48-block settings their gradient at block 1 falls
    below 0.01 and rises above 100, and the spread widens with depth."""
    extremes = {variant: [] for variant in (("post", "add"), ("pre", "replace"), ("post", "replace"))}
    for changes in [*reachable_settings(14, blocks=MAX_BLOCKS), {"mlp": "gelu", "expansion": 2, "causal": False},
                    {"d": 32, "expansion": 8, "norm": "layernorm", "heads": 8, "causal": False}]:
        grads = depth_at(**changes)
        for variant, found in extremes.items():
            found.append(float(grads[variant][0]))
    for variant, found in extremes.items():
        assert min(found) < 0.01 and max(found) > 100, variant
    spread = {}
    for blocks in (1, 4, MAX_BLOCKS):
        found = [float(depth_at(**{**s, "blocks": blocks})[("pre", "replace")][0])
                 for s in reachable_settings(10, blocks=MAX_BLOCKS)]
        spread[blocks] = max(abs(math.log10(g)) for g in found)
    assert spread[1] < spread[4] < spread[MAX_BLOCKS]
    assert "the product can land far from 1 in either direction, more so the more blocks there are" in TEXT


def test_the_depth_numbers_the_lesson_quotes_are_the_engines() -> None:
    """Step 5's examples, recomputed: replace against pre-norm with add at block 1 of 48, at the defaults, at
    d = 512 (which the panel runs at 64) and with B = 2."""
    defaults, wide, batch = (depth_at(**changes) for changes in LESSON_CASES)

    def two(x: np.ndarray) -> str:
        return f"{float(x[0]):.2g}"

    replace, pre = ("pre", "replace"), ("pre", "add")
    assert f"{two(defaults[replace])} at block 1 against {two(defaults[pre])} for pre-norm with add" in TEXT
    about = f"{float(f'{wide[replace][0]:.2g}'):,.0f}"
    assert f"explodes to about {about} (pre-norm: {two(wide[pre])})" in TEXT
    assert f"set **B** to 2 instead and it is {two(batch[replace])} (pre-norm: {two(batch[pre])})" in TEXT
    assert defaults[replace][0] < 0.1 * defaults[pre][0] and wide[replace][0] > 1000 * wide[pre][0]
    assert LabState(d=512).depth_d == DEPTH_MAX_D


# --- beyond the list: other sentences the lab and the lesson got wrong -------------------------------------------


@pytest.mark.parametrize(("placement", "causal"), [("pre", True), ("pre", False), ("post", True), ("post", False)])
def test_eps_zero_symptom_says_where_the_nan_actually_is(lab: DecoderLabExplorable, placement: str,
                                                         causal: bool) -> None:
    """Break it's eps = 0 line matches the trace: NaN everywhere in pre-norm, at position 0 only in post-norm with
    the mask, nowhere in post-norm without it."""
    lab.state.param.update(zero_eps=True, placement=placement, causal=causal)
    rows = set(np.flatnonzero(np.any(np.isnan(lab.state.trace.output[0]), axis=-1)).tolist())
    summary = symptoms(lab)
    if rows == set(range(lab.state.T)):
        assert "attention carries the NaN to every position" in summary and placement == "pre"
    elif rows:
        assert rows == {0} and "NaN at position 0 only" in summary
    else:
        assert "No NaN in this configuration" in summary and not causal


def test_the_norm_checks_say_where_a_nan_came_from() -> None:
    """Norm 1 divides the zero row by √0; Norm 2 only receives NaN that attention carried into the stream."""
    state = LabState(zero_eps=True)
    t = state.trace
    assert not np.isnan(t["blocks.0.resid_pre"]).any() and np.isnan(t["blocks.0.resid_mid"]).any()
    found = {c.name: c.detail for c in state.invariants()}
    assert "a row of zeros was divided" in found["Norm 1: rows normalised"]
    assert "from an earlier step" in found["Norm 2: rows normalised"]


def test_the_lab_writes_true_minus_signs() -> None:
    """Negative numbers in the text alternatives use the minus sign the lessons use, not a hyphen."""
    state = LabState()
    sentences = " ".join(describe.activation_sentences(state) + describe.depth_sentences(state)
                         + describe.delta_sentences(state))
    lowest = float(np.min(state.trace["blocks.0.mlp.gate"][0]))
    assert lowest < 0 and describe._num(lowest) in sentences and describe._num(lowest).startswith("\u2212")
    assert not re.search(r"(?<![\w.])-\d", sentences)


def test_the_steps_do_not_claim_to_follow_the_panel_order() -> None:
    """The guided steps visit the panels out of order, so the lesson must not tell students to work down them."""
    steps = TEXT[TEXT.index("## Run the comparison"):TEXT.index("## The stream and its two sublayers")]
    visited = [int(n) for n in re.findall(r"\(panel (\d)\)", steps)]
    assert visited != sorted(visited) and "Work down them in order" not in steps
    assert "starting with the panel that settles your prediction" in steps and visited[0] == 5


def test_a_missing_fixture_is_named_where_it_is_looked_for(tmp_path) -> None:
    """The fixture lives beside the lab's code, so the notice no longer sends anyone to tests/fixtures."""
    assert worked.FIXTURE.parent == Path(worked.__file__).parent
    error = worked_example(tmp_path / "lesson_seed_42.json").error
    assert "lesson_seed_42.json is missing" in error and "tests/fixtures" not in error


def test_the_choosing_table_does_not_give_gelu_a_matrix_fewer() -> None:
    """With the combined projection the lesson teaches, SwiGLU and GELU MLPs both hold two weight matrices."""
    rows = {r.option: r.weights for r in param_rows(8) if r.part == "MLP weights"}
    assert rows["swiglu"].count("[") == rows["gelu"].count("[") == 2
    assert "one matrix fewer" not in TEXT
