"""The block-floor explorable in real Chromium: the bet, the divergence claim, the stepper, the tables' fit."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import Error, Page, expect

pytestmark = pytest.mark.browser
FLOOR = "/explorables/block-floor"
BET = "It is kept: the correction is added on top of it."


def _commit_bet(page: Page) -> None:
    page.get_by_text(BET).click()
    page.get_by_role("button", name="Commit prediction").click()
    expect(page.get_by_text("Your prediction (final)")).to_be_visible()


def test_the_bet_locks_and_unlocks_the_controls(open_page) -> None:
    """Controls stay disabled until the bet is committed; afterwards the bet cannot be changed."""
    opened = open_page(FLOOR)
    page = opened.page
    expect(page.get_by_role("button", name="Next stage ▶")).to_be_disabled()
    _commit_bet(page)
    expect(page.get_by_role("button", name="Next stage ▶")).to_be_enabled()
    expect(page.get_by_role("button", name="Commit prediction")).to_be_hidden()
    opened.assert_clean()


def test_claims_too_early_then_right_on(open_page) -> None:
    """Tracking the middle word, a claim at stage 3 is too early and at stage 4 (attention) right on."""
    opened = open_page(FLOOR + "?tracked=2&stage=3", teacher_link=True)
    page = opened.page
    expect(page.get_by_text("Stage 3 / 8")).to_be_visible()
    page.get_by_role("button", name="This is the first divergence").click()
    expect(page.get_by_text("Too early")).to_be_visible()
    page.get_by_role("button", name="Next stage ▶").click()
    expect(page.get_by_text("Stage 4 / 8")).to_be_visible()
    page.get_by_role("button", name="This is the first divergence").click()
    expect(page.get_by_text("Right on")).to_be_visible()
    expect(page.get_by_text("keeps slot p₁ in both orders", exact=False)).to_be_visible()
    opened.assert_clean()


def test_never_diverge_is_right_without_positions(open_page) -> None:
    """With positions off and no mask, the right claim is that the two orders never diverge."""
    opened = open_page(FLOOR + "?tracked=2&positions=off", teacher_link=True)
    page = opened.page
    page.get_by_role("button", name="They never diverge").click()
    expect(page.get_by_text("Right on")).to_be_visible()
    expect(page.get_by_text("permutation symmetry", exact=False)).to_be_visible()
    opened.assert_clean()


def test_a_typed_phrase_with_html_is_shown_as_text(open_page) -> None:
    """A phrase containing markup appears literally in the page and no script or handler runs."""
    opened = open_page(FLOOR, teacher_link=True)
    page = opened.page
    field = page.get_by_role("textbox", name="Phrase")
    field.fill('<img src=x onerror="window.__pwned=1"> eats')
    field.press("Enter")
    expect(page.locator(".bt-chip").first).to_contain_text("<img")  # words split at spaces: "<img" is one
    assert page.evaluate("window.__pwned") is None
    assert page.locator(".bt-phrase img").count() == 0
    opened.assert_clean()


def test_never_with_the_mask_on_is_answered_they_do_diverge(open_page) -> None:
    """Positions off, mask on, stage 1: "never" is wrong, said without "Too late"; the true stage is right on."""
    opened = open_page(FLOOR + "?tracked=2&positions=off&causal=on", teacher_link=True)
    page = opened.page
    expect(page.get_by_text("Stage 1 / 8")).to_be_visible()
    page.get_by_role("button", name="They never diverge").click()
    verdict = page.get_by_role("status").filter(has_text="you claimed they never diverge")
    expect(verdict).to_contain_text("They do diverge")
    expect(verdict).to_contain_text("“never” is wrong")
    expect(verdict).not_to_contain_text("Too late")
    for n in (2, 3, 4):
        page.get_by_role("button", name="Next stage ▶").click()
        expect(page.get_by_text(f"Stage {n} / 8")).to_be_visible()
    page.get_by_role("button", name="This is the first divergence").click()
    expect(page.get_by_text("Right on")).to_be_visible()
    expect(page.get_by_text("The causal mask lets “an” read only itself", exact=False)).to_be_visible()
    opened.assert_clean()


def test_the_stepper_runs_on_through_later_floors(open_page) -> None:
    """With 2 floors, Next stage goes from stage 8 to floor 2's stages; table row, banner and link follow."""
    opened = open_page(FLOOR + "?floors=2&stage=8", teacher_link=True)
    page = opened.page
    expect(page.get_by_text("Stage 8 / 14 · + residual = block output")).to_be_visible()
    stage = page.get_by_role("slider", name="Stage", exact=True)
    expect(stage).to_have_attribute("aria-valuemax", re.compile(r"^14(\.0+)?$"))
    page.get_by_role("button", name="Next stage ▶").click()
    expect(page.get_by_text("Stage 9 / 14 · Floor 2 · RMSNorm (before attention)")).to_be_visible()
    current = page.locator("table.floor-table tr[aria-current=step]").first
    expect(current).to_contain_text("Floor 2 · 9. RMSNorm (before attention)")
    expect(page).to_have_url(re.compile(r"[?&]stage=9(&|$)"))
    for n in range(10, 15):
        page.get_by_role("button", name="Next stage ▶").click()
        expect(page.get_by_text(f"Stage {n} / 14 · Floor 2 · ")).to_be_visible()
    expect(page.get_by_text("Stage 14 / 14 · Floor 2 · + residual = block output")).to_be_visible()
    page.get_by_role("slider", name="Floors", exact=True).press("ArrowLeft")
    expect(page.get_by_text("Stage 8 / 8 · + residual = block output")).to_be_visible()
    opened.assert_clean()


# For each floor table on the page: is each Orders cell inside the table's box, every clipping ancestor
# (shadow roots crossed) and the window? Returns the problems found; empty when all is well.
ORDERS_OUTSIDE = """(rows) => {
  const tables = [];
  const walk = (root) => root.querySelectorAll("*").forEach((el) => {
    if (el.matches("table.floor-table")) tables.push(el);
    if (el.shadowRoot) walk(el.shadowRoot);
  });
  walk(document);
  const shown = tables.filter((t) => t.getClientRects().length > 0);
  if (shown.length !== 2) return [`${shown.length} tables shown`];
  const problems = [];
  const inside = (r, box) => r.left >= box.left - 0.5 && r.right <= box.right + 0.5;
  for (const table of shown) {
    const column = [...table.tHead.rows[0].cells].findIndex((c) => c.textContent === "Orders");
    const cells = [...table.tBodies[0].rows].map((row) => row.cells[column]);
    if (column < 0 || cells.length !== rows) return [`table not ready: column ${column}, ${cells.length} rows`];
    const clips = [];
    for (let el = table.parentNode; el; el = el.parentNode || el.host) {
      if (el.nodeType === 1 && getComputedStyle(el).overflowX !== "visible") clips.push(el);
    }
    const width = document.documentElement.clientWidth;
    for (const cell of cells) {
      const r = cell.getBoundingClientRect();
      if (r.width === 0 || r.left < 0 || r.right > width + 0.5) problems.push(`outside the window at ${r.right}`);
      if (!inside(r, table.getBoundingClientRect())) problems.push("outside its table");
      for (const clip of clips) {
        if (!inside(r, clip.getBoundingClientRect()) || clip.scrollWidth > clip.clientWidth + 1) {
          problems.push(`cut or scrolled by ${clip.className || clip.nodeName}`);
        }
      }
    }
  }
  return [...new Set(problems)];
}"""


@pytest.mark.parametrize("width", [1440, 390])
def test_the_orders_column_stays_in_view_for_a_long_phrase_and_six_floors(open_page, width: int) -> None:
    """8 words and 6 floors: every Orders cell of both tables lies inside the visible table, unscrolled."""
    opened = open_page(FLOOR + "?tokens=the+cat+sat+on+the+warm+red+mat&floors=6", teacher_link=True)
    page = opened.page
    page.set_viewport_size({"width": width, "height": 900})
    rows = 8 + 6 * 5
    expect(page.locator("table.floor-table").first.locator("tbody tr")).to_have_count(rows)
    try:  # layout settles after the resize: wait for the condition, then report what is still wrong
        page.wait_for_function(f"() => ({ORDERS_OUTSIDE})({rows}).length === 0", timeout=15_000)
    except Error:
        pytest.fail("; ".join(page.evaluate(ORDERS_OUTSIDE, rows)))
    opened.assert_clean()


def test_chips_name_slots_as_the_position_vectors(open_page) -> None:
    """The chips carry p₀, p₁, p₂ (the position vectors' names), and so do the tracked word's options."""
    opened = open_page(FLOOR, teacher_link=True)
    page = opened.page
    chips = page.locator(".bt-chip")
    expect(chips.first).to_contain_text("eatp₀")
    expect(page.locator(".bt-chip.tracked").first).to_have_text("orangep₂")
    expect(page.get_by_text("slot p₂, position vector added [0.000, 0.400]")).to_be_visible()
    expect(page.get_by_role("combobox", name="Tracked word")).to_contain_text("an (slot p₁)")
    opened.assert_clean()


def test_a_bad_phrase_is_refused_beside_its_field_and_the_last_good_kept(open_page) -> None:
    """Nine words: a message beside the Phrase field says why, the chips and tables keep the last good phrase;
    a good phrase clears the message."""
    opened = open_page(FLOOR, teacher_link=True)
    page = opened.page
    field = page.get_by_role("textbox", name="Phrase")
    field.fill(" ".join(["w"] * 9))
    field.press("Enter")
    error = page.get_by_role("alert").filter(has_text="Could not use this phrase")
    expect(error).to_contain_text("at most 8")
    expect(error).to_contain_text("The last good phrase is still shown.")
    expect(page.locator(".bt-chip.tracked").first).to_have_text("orangep₂")
    field.fill("the cat sat")
    field.press("Enter")
    expect(error).to_have_count(0)
    expect(page.locator(".bt-chip.tracked").first).to_have_text("satp₂")
    opened.assert_clean()


def test_the_charts_give_values_on_hover_words_and_a_png(open_page) -> None:
    """The arrow and the attention weights: hovering gives the value, each chart has its words and its PNG."""
    opened = open_page(FLOOR + "?tracked=2&stage=4", teacher_link=True)
    page = opened.page
    arrow = page.locator("figure.dv-chart").filter(has_text="A · the tracked word")
    heat = page.locator("figure.dv-chart").filter(has_text="A · attention weights, floor 1")
    arrow.locator("path.dv-mark").last.hover(force=True)
    expect(arrow.locator(".dv-readout")).to_have_text(re.compile(r"^stage 4: \[−?\d\.\d{3}, −?\d\.\d{3}\]$"))
    heat.locator("rect.dv-heat").first.hover()
    expect(heat.locator(".dv-readout")).to_have_text(re.compile(r"^p₀ eat, p₀ eat: \d\.\d{3}$"))
    arrow.get_by_text("Describe “Tracked word” in words").click()
    expect(arrow.get_by_text("at stage 4, Attention mixture, the tracked word “an”", exact=False)).to_be_visible()
    heat.get_by_text("Describe “Attention weights” in words").click()
    expect(heat.get_by_text("Query p₀ eat reads: p₀ eat", exact=False)).to_be_visible()
    with page.expect_download() as info:
        page.get_by_role("button", name="Download “A · attention weights, floor 1” as PNG").click()
    assert info.value.suggested_filename == "block-floor-A-attention.png"
    assert Path(info.value.path()).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    opened.assert_clean()
