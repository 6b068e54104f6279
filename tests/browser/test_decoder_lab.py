"""The decoder-block lab in real Chromium: each panel's main control changes what the page shows."""

from __future__ import annotations

import re
from urllib.parse import urlencode

import pytest
from playwright.sync_api import Locator, Page, expect

from blocktrace.explorables.components.heatmap import MIN_CELL_PX
from blocktrace.explorables.components.numbers import number, stage_rms
from blocktrace.explorables.decoder_block_lab import DecoderLabExplorable
from blocktrace.explorables.engine.forward import block_keys

pytestmark = pytest.mark.browser

LAB = "/explorables/decoder-block-lab"
ANSWER = "They stay exactly the same: an earlier position never reads a later one."


def ready(page: Page) -> None:
    expect(page.get_by_role("table", name=re.compile("Shape of every tensor"))).to_be_visible()


def slider(page: Page, label: str) -> Locator:
    """The slider labelled `label` (a range input the lab draws, its <label for> naming it)."""
    return page.get_by_role("slider", name=label, exact=True)


def checkbox(page: Page, label: str) -> Locator:
    """The checkbox whose accessible name is exactly `label` ("Causal mask" is not "No causal mask")."""
    return page.get_by_role("checkbox", name=label, exact=True)


def invariants(page: Page) -> Locator:
    return page.locator(".dl-invariants")


def alt_text(page: Page, title: str) -> Locator:
    """Open the text alternative of the plot titled `title` and return its paragraph."""
    details = page.locator("details.alt-text", has=page.get_by_text(f"Describe “{title}” in words"))
    details.locator("summary").click()
    return details.locator("p")


def test_prediction_gate_locks_controls_and_hides_the_answer(open_page) -> None:
    """Before committing, controls are disabled and the causal result hidden; committing unlocks both."""
    opened = open_page(LAB)
    page = opened.page
    ready(page)
    expect(page.get_by_label("Normalisation")).to_be_disabled()
    expect(page.get_by_text("The result appears once your prediction is committed")).to_be_visible()
    page.get_by_label(ANSWER).check()
    page.get_by_role("button", name="Commit prediction").click()
    expect(page.get_by_label("Normalisation")).to_be_enabled()
    expect(page.locator(".dl-badge")).to_have_text("✓ PASS")
    expect(page.get_by_text("You predicted:")).to_contain_text("matches what the lab shows")
    opened.assert_clean()


def test_shapes_follow_the_width(open_page) -> None:
    """Choosing d = 512 recounts the parameters: the SwiGLU MLP is 6·512² = 1,572,864."""
    opened = open_page(LAB, teacher_link=True)
    page = opened.page
    ready(page)
    page.get_by_label("d (model width)").select_option(label="512")
    expect(page.get_by_role("table", name=re.compile(r"Parameters of one block \(d = 512"))).to_be_visible()
    expect(page.locator(".dl-answer")).to_contain_text("6·512² = 1,572,864")
    expect(page.get_by_role("table", name=re.compile("Shape of every tensor"))).to_contain_text("[1, 4, 2048]")
    opened.assert_clean()


def test_design_choices_update_the_invariants_and_heatmaps(open_page) -> None:
    """LayerNorm changes the norm check; post-norm breaks the residual identity; two heads give two heatmaps."""
    opened = open_page(LAB, teacher_link=True)
    page = opened.page
    ready(page)
    expect(invariants(page)).to_contain_text("8 of 8 hold")
    page.get_by_label("Normalisation").select_option(label="LayerNorm")
    expect(invariants(page)).to_contain_text("every row has mean 0 and std 1")
    page.get_by_label("Placement").select_option(label="post-norm")
    expect(invariants(page)).to_contain_text("post-norm: the sum is normalised")
    expect(invariants(page)).to_contain_text("✗ fails")
    page.get_by_label("Heads").select_option(label="2")
    expect(page.get_by_text("Describe “Attention weights, head 1” in words")).to_be_visible()
    opened.assert_clean()


# Each drawn heatmap (figure.dv-chart titled "Attention weights, head h"): its cells' width in px, the numbers
# written in its cells with their boxes, and its cells' hover texts; null until each has been drawn.
HEATMAP_NUMBERS = """() => {
  const found = [];
  const walk = (root) => {
    for (const el of root.querySelectorAll("figure.dv-chart")) found.push(el);
    for (const el of root.querySelectorAll("*")) if (el.shadowRoot) walk(el.shadowRoot);
  };
  walk(document);
  const maps = found.filter((f) => f.querySelector("figcaption").textContent.startsWith("Attention weights, head"));
  if (maps.length === 0) return null;
  return maps.map((f) => {
    const cells = [...f.querySelectorAll("rect.dv-heat")];
    const box = (el) => { const b = el.getBoundingClientRect(); return [b.left, b.top, b.right, b.bottom]; };
    return {cell: cells[0].getBoundingClientRect().width, n: cells.length,
            numbers: [...f.querySelectorAll("text.dv-cell")].map((t) => ({cell: t.dataset.cell, box: box(t)})),
            cells: Object.fromEntries(cells.map((c) => [c.dataset.cell, box(c)])),
            hover: cells.map((c) => c.querySelector("title").textContent)};
  });
}"""


# The same, once the page is laid out at `width` px (its maps redrawn at the new width).
HEATMAP_NUMBERS_AT = ("(width) => document.documentElement.clientWidth === width && (" + HEATMAP_NUMBERS +
                      ")()")


def inside(inner: list[float], outer: list[float]) -> bool:
    return inner[0] >= outer[0] and inner[1] >= outer[1] and inner[2] <= outer[2] and inner[3] <= outer[3]


def apart(a: list[float], b: list[float]) -> bool:
    return a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1]


@pytest.mark.parametrize("positions", [4, 8])
def test_heatmap_numbers_show_only_where_a_cell_holds_them(open_page, positions: int) -> None:
    """At 8 positions the weights' numbers would overlap: the browser leaves them to hover and the words; where
    they are written, each sits inside its own cell and no two overlap."""
    opened = open_page(f"{LAB}?T={positions}", teacher_link=True)
    page = opened.page
    ready(page)
    for width in (1280, 390):  # a laptop, then a phone: the same page redrawn at the phone's width
        page.set_viewport_size({"width": width, "height": 900})
        shown = page.wait_for_function(HEATMAP_NUMBERS_AT, arg=width).json_value()
        for heat in shown:
            assert heat["n"] == positions ** 2 and len(heat["hover"]) == positions ** 2
            assert all(re.search(r": \d\.\d{3}$", text) for text in heat["hover"]), heat["hover"]  # each on hover
            if heat["cell"] < MIN_CELL_PX:
                assert heat["numbers"] == [], heat
            else:
                assert len(heat["numbers"]) == positions ** 2
            for k, written in enumerate(heat["numbers"]):
                assert inside(written["box"], heat["cells"][written["cell"]]), written
                assert all(apart(written["box"], other["box"]) for other in heat["numbers"][k + 1:])
        if positions == 4 and width == 1280:  # the lesson's own size: its numbers are on the map
            assert all(heat["numbers"] for heat in shown), shown
        if positions == 8 and width == 390:  # a phone's map at 8 positions: hover and the words only
            assert all(heat["cell"] < MIN_CELL_PX and heat["numbers"] == [] for heat in shown), shown
    opened.assert_clean()


# The drawn stage table's text, row by row (header cell, then each cell), and each heatmap cell's hover text.
DRAWN_TEXT = """() => {
  const tables = [], titles = [];
  const walk = (root) => {
    for (const t of root.querySelectorAll("table")) tables.push(t);
    for (const el of root.querySelectorAll("*")) if (el.shadowRoot) walk(el.shadowRoot);
  };
  walk(document);
  const stages = tables.find((t) => t.caption && t.caption.textContent.startsWith("Block stages"));
  const norms = tables.find((t) => t.caption && t.caption.textContent.startsWith("The vector and its two"));
  const first = (c) => c.firstChild ? c.firstChild.textContent.trim() : "";  // a row's label, not its note
  const rows = (t) => [...t.tBodies[0].rows].map((r) => [...r.cells].map(first));
  return {stages: rows(stages), norms: rows(norms)};
}"""


def test_the_drawn_numbers_are_the_engines_for_a_linked_state(open_page) -> None:
    """A link's state drawn in the browser: the stage table's RMS and components, the norms' table and every
    attention weight on hover are the engine's numbers for that state, written as numbers.number() writes them."""
    query = {"T": "6", "heads": "2", "norm": "layernorm", "causal": "off", "d": "16"}
    opened = open_page(LAB + "?" + urlencode(query), teacher_link=True)
    page = opened.page
    ready(page)
    expect(page.get_by_text("Describe “Attention weights, head 1” in words")).to_be_visible()
    s = DecoderLabExplorable(query=query, predict=False).state
    drawn = page.evaluate(DRAWN_TEXT)
    expected = []
    for local in block_keys(s.trace.config):
        v = s.trace["blocks.0." + local]
        row = v[0]
        while row.ndim > 1:
            row = row[0] if row.ndim > 2 else row[-1]
        shown_rms = stage_rms(v)
        rms_text = shown_rms if isinstance(shown_rms, str) else number(shown_rms)
        expected.append([rms_text, *(number(x, signed=True) for x in row[:6])])
    assert [r[3:10] for r in drawn["stages"]] == expected
    normed = s.normalised()
    assert [r[1:1 + len(normed["input"])] for r in drawn["norms"]] == [
        [number(x, signed=True) for x in normed[name]] for name in ("input", "RMSNorm", "LayerNorm")]
    heat = page.wait_for_function(HEATMAP_NUMBERS).json_value()
    labels = [f"{i} {w}" for i, w in enumerate(s.words)]
    for h, shown in enumerate(heat):
        pattern = s.trace["blocks.0.attn.pattern"][0, h]
        assert shown["hover"] == [f"{labels[r]}, {labels[c]}: {number(pattern[r, c])}"
                                  for r in range(s.T) for c in range(s.T)]
    opened.assert_clean()


def test_norms_side_by_side_show_the_constant_vector_and_nan(open_page) -> None:
    """The constant preset survives RMSNorm only; eps = 0 on a zero vector shows NaN, not an error."""
    opened = open_page(LAB, teacher_link=True)
    page = opened.page
    ready(page)
    page.get_by_role("button", name="Constant 2, 2, 2, 2").click()
    expect(page.locator(".dl-verdict").first).to_contain_text("A constant vector")
    page.get_by_label("eps", exact=True).select_option(label="0 (no eps)")
    page.get_by_role("button", name="Zero vector").click()
    expect(page.locator(".dl-verdict").first).to_contain_text("returned NaN")
    expect(page.get_by_role("table", name=re.compile("The vector and its two normalisations"))).to_contain_text("NaN")
    field = page.get_by_label("Vector to normalise")
    field.fill("1, two")
    # An answer drawn while the student is still typing (here a narrower page) leaves their Enter to send it.
    page.evaluate("""() => new Promise((done) => {
        document.addEventListener("dv-drawn", done, {once: true});
        document.body.style.width = (document.body.clientWidth - 60) + "px";
    })""")
    field.press("Enter")
    expect(page.get_by_role("alert")).to_contain_text("could not read 'two'")
    opened.assert_clean()


def test_activations_follow_the_mlp(open_page) -> None:
    """Switching the MLP to GELU puts the dots on the GELU curve, and the text alternative says so."""
    opened = open_page(LAB, teacher_link=True)
    page = opened.page
    ready(page)
    page.get_by_label("MLP", exact=True).select_option(label="GELU")
    expect(alt_text(page, "Activation curves")).to_contain_text("GELU input values")
    opened.assert_clean()


def test_causal_safety_badge(open_page) -> None:
    """Mask on: PASS; mask off: FAIL; corrupting position 0 leaves nothing earlier to test."""
    opened = open_page(LAB, teacher_link=True)
    page = opened.page
    ready(page)
    badge = page.locator(".dl-badge")
    expect(badge).to_have_text("✓ PASS")
    checkbox(page, "Causal mask").uncheck()
    expect(badge).to_have_text("✗ FAIL")
    handle = slider(page, "Corrupt position")
    handle.focus()
    page.keyboard.press("Home")
    expect(badge).to_have_text("– NOTHING TO TEST")
    opened.assert_clean()


def test_depth_follows_the_number_of_blocks(open_page) -> None:
    """Moving Blocks to 1 redraws the depth summary for a single block."""
    opened = open_page(LAB, teacher_link=True)
    page = opened.page
    ready(page)
    expect(page.get_by_role("table", name=re.compile("After 48 blocks"))).to_be_visible()
    handle = slider(page, "Blocks")
    handle.focus()
    page.keyboard.press("Home")
    expect(page.get_by_role("table", name=re.compile("After 1 block "))).to_be_visible()
    opened.assert_clean()


def test_worked_example_matches_and_shows_any_intermediate(open_page) -> None:
    """The lesson's example matches PyTorch; choosing an intermediate shows ours beside the fixture's."""
    opened = open_page(LAB, teacher_link=True)
    page = opened.page
    ready(page)
    expect(page.get_by_role("table", name=re.compile("seed-42 block"))).to_contain_text("all match")
    page.get_by_label("Intermediate").select_option(label="Queries (Q)")
    expect(page.get_by_role("table", name="Q: this lab (float64)")).to_be_visible()
    expect(page.get_by_role("table", name="Q: the lesson's PyTorch run (float32)")).to_be_visible()
    opened.assert_clean()


def test_break_it_toggles_show_their_symptoms(open_page) -> None:
    """Missing residual fails the identity; eps = 0 fills the stage table with NaN; the page never errors."""
    opened = open_page(LAB, teacher_link=True)
    page = opened.page
    ready(page)
    checkbox(page, "Missing residual (replace instead of add)").check()
    expect(invariants(page)).to_contain_text("residual = replace")
    expect(page.locator(".dl-symptoms")).to_contain_text("Missing residual")
    checkbox(page, "eps = 0, with an all-zero input row at position 0").check()
    expect(page.get_by_role("table", name=re.compile("Block stages in forward order"))).to_contain_text("NaN")
    checkbox(page, "Wrong gate/value split (chunk along positions, not features)").check()
    expect(page.get_by_role("table", name=re.compile("Shape of every tensor"))).to_contain_text("Broken split")
    opened.assert_clean()
