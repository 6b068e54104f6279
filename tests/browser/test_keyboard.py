"""Each lesson's main flow with the keyboard alone: predict, change every control, step, claim, check.

No mouse: focus moves with Tab and Shift+Tab only; controls change with the arrow keys, Home, Space,
Enter, and typing (Ctrl+A first, to type over a field's text). Every place focus lands must show a
visible focus indicator (keyboard.py says what counts). A step that fails is noted and the flow goes
on, so one run reports every broken step and every stop without visible focus; the test then fails
with the whole list.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Locator, Page, expect

from tests.browser.keyboard import Keyboard

pytestmark = pytest.mark.browser

FINAL = "Your prediction (final)"
NOTE = "Chosen with the keyboard."


# --- finding things ----------------------------------------------------------------------------------

def slider(page: Page, name: str) -> Locator:
    return page.get_by_role("slider", name=name, exact=True)


def checkbox(page: Page, name: str) -> Locator:
    return page.get_by_role("checkbox", name=name, exact=True)


def select(page: Page, name: str) -> Locator:
    return page.get_by_role("combobox", name=name, exact=True)


def button(page: Page, name: str) -> Locator:
    return page.get_by_role("button", name=name, exact=True)


def card(page: Page, text: str) -> Locator:
    """The innermost card (prediction gate, checkpoint…) that contains `text`."""
    return page.locator(".bt-card").filter(has_text=text).last


# --- steps every lesson has ----------------------------------------------------------------------

def commit_prediction(page: Page, kb: Keyboard, answer: str, commit: str) -> None:
    """Tab into the answers, arrow to `answer`, Tab to the note and type it, Tab to `commit`, Enter.

    Everything after depends on it, so it is not a soft step: it fails the test at once.
    """
    radio = page.get_by_role("radio", name=answer, exact=True)
    kb.tab_to(radio, group=True)
    kb.choose(radio)
    kb.tab_to(page.get_by_role("textbox", name="Why? (optional)"))
    page.keyboard.type(NOTE)
    kb.tab_to(button(page, commit))
    kb.press("Enter")
    expect(page.get_by_text(FINAL)).to_be_visible()
    expect(page.get_by_text(f"Your reasoning: {NOTE}")).to_be_visible()
    expect(page.get_by_text("1 of 4 checkpoints done")).to_be_attached()


def answer_checkpoint(page: Page, kb: Keyboard, question: str, answer: str, feedback: str) -> None:
    """Tab on to the checkpoint's answers, arrow to `answer`, Tab to Check answer, Enter."""
    with kb.step(f"checkpoint “{question}”"):
        box = card(page, question)
        radio = box.get_by_role("radio", name=answer, exact=True)
        kb.tab_to(radio, group=True, limit=80)
        kb.choose(radio)
        kb.tab_to(box.get_by_role("button", name="Check answer"))
        kb.press("Enter")
        expect(box.get_by_role("status")).to_contain_text(feedback)


def type_and_enter(kb: Keyboard, field: Locator, text: str, *, back: bool = False) -> None:
    kb.tab_to(field, back=back)
    kb.replace_text(text)
    expect(field).to_have_value(text)


# --- lesson 1: the transformer block -------------------------------------------------------------

TB_ANSWER = "Zero updates return the input unchanged; replacing would erase it."
ZERO = re.compile(r"^0(\.0+)?$")


def stage_table(page: Page) -> Locator:
    return page.get_by_role("table", name=re.compile("One forward pass"))


def stage_row(page: Page, label: str) -> Locator:
    return stage_table(page).get_by_role("row", name=re.compile("^" + re.escape(label)))


def cells(row: Locator) -> Locator:
    return row.locator("td:not(.empty)")


def test_transformer_block_lesson_by_keyboard(open_page) -> None:
    opened = open_page("/lessons/transformer-block")
    page = opened.page
    kb = Keyboard(page)
    expect(page.get_by_text("The trace appears here once you commit your prediction")).to_be_visible()
    expect(stage_table(page)).to_have_count(0)  # nothing of the trace before the prediction
    vector = page.get_by_role("textbox", name="Input vector")
    expect(vector).to_be_disabled()

    commit_prediction(page, kb, TB_ANSWER, "Commit prediction")
    expect(vector).to_be_enabled()
    expect(stage_row(page, "Output after residual add 2")).to_be_visible()

    with kb.step("Constant 2, 2, 2, 2 (Enter)"):
        kb.tab_to(button(page, "Constant 2, 2, 2, 2"))
        kb.press("Enter")
        expect(cells(stage_row(page, "Input residual stream"))).to_have_text(["+2.000"] * 4 + ["4.000"])
    with kb.step("Zero updates (Enter)"):
        kb.tab_to(button(page, "Zero updates"))
        kb.press("Enter")
        expect(slider(page, "MLP update scale")).to_have_attribute("aria-valuenow", ZERO)
        expect(cells(stage_row(page, "Output after residual add 2"))).to_have_text(["+2.000"] * 4 + ["4.000"])
    with kb.step("Reset (Enter)"):
        kb.tab_to(button(page, "Reset"))
        kb.press("Enter")
        expect(slider(page, "MLP update scale")).to_have_attribute("aria-valuenow", re.compile(r"^1(\.0+)?$"))
        expect(vector).to_have_value("1.5, -0.5, 0.25, 2")
    with kb.step("Attention update scale (Home, ArrowRight)"):
        kb.tab_to(slider(page, "Attention update scale"))
        kb.press("Home")
        expect(cells(stage_row(page, "Attention update"))).to_have_text(["0.000"] * 5)
        kb.press("ArrowRight", 2)
        expect(slider(page, "Attention update scale")).to_have_attribute("aria-valuenow", re.compile(r"^0\.10*$"))
        expect(cells(stage_row(page, "Attention update"))).not_to_have_text(["0.000"] * 5)
    with kb.step("MLP update scale (ArrowLeft)"):
        kb.tab_to(slider(page, "MLP update scale"))
        before = cells(stage_row(page, "MLP update")).all_inner_texts()
        kb.press("ArrowLeft", 2)
        expect(slider(page, "MLP update scale")).to_have_attribute("aria-valuenow", re.compile(r"^0\.90*$"))
        expect(cells(stage_row(page, "MLP update"))).not_to_have_text(before)
    with kb.step("Replace instead of add residuals (Space)"):
        replace = checkbox(page, "Replace instead of add residuals (broken)")
        kb.tab_to(replace)
        kb.press("Space")
        expect(replace).to_be_checked()
        expect(stage_table(page).get_by_text("input lost here")).to_have_count(1)
        kb.press("Space")
        expect(replace).not_to_be_checked()
        expect(stage_table(page).get_by_text("input lost here")).to_have_count(0)
    with kb.step("Normalisation (ArrowDown)"):
        kb.tab_to(select(page, "Normalisation"), back=True)  # laid out before the checkbox
        kb.press("ArrowDown")
        expect(select(page, "Normalisation")).to_have_value("Mean-centred (LayerNorm)")
        expect(page).to_have_url(re.compile(r"[?&]norm=layernorm(&|$)"))
    with kb.step("Stage to inspect (Home, ArrowDown)"):
        kb.tab_to(select(page, "Stage to inspect"))
        kb.press("Home")
        expect(stage_row(page, "Input residual stream")).to_have_attribute("aria-current", "step")
        kb.press("ArrowDown")
        expect(stage_row(page, "Input residual stream")).not_to_have_attribute("aria-current", "step")
    with kb.step("Input vector (type, Enter)"):
        type_and_enter(kb, vector, "1, -2, 0.5, 3", back=True)
        expect(cells(stage_row(page, "Input residual stream"))).to_have_text(
            ["+1.000", "−2.000", "+0.500", "+3.000", "3.775"])

    answer_checkpoint(page, kb, "What does a correct pre-norm block output?", "Its input, unchanged.",
                      "Right. Adding zero leaves the stream as it was")
    opened.assert_clean()
    kb.finish()


# --- lesson 2: one floor, two word orders --------------------------------------------------------

BF_ANSWER = "It is kept: the correction is added on top of it."


def test_block_floor_lesson_by_keyboard(open_page) -> None:
    opened = open_page("/lessons/block-floor")
    page = opened.page
    kb = Keyboard(page)
    banner = page.locator(".bt-stage-banner")
    status = page.locator(".bt-live").filter(has_text="stage")
    tracked = page.locator(".bt-chip.tracked").first
    claim = page.get_by_role("status").filter(has_text="you claimed")
    expect(banner).to_contain_text("Stage 1 / 8")
    expect(select(page, "Tracked word")).to_be_disabled()

    commit_prediction(page, kb, BF_ANSWER, "Commit prediction")
    expect(select(page, "Tracked word")).to_be_enabled()

    with kb.step("Tracked word (ArrowUp: the middle word)"):
        kb.tab_to(select(page, "Tracked word"))
        kb.press("ArrowUp")
        expect(tracked).to_contain_text("an")
    with kb.step("Stage slider (ArrowRight ×2)"):
        kb.tab_to(slider(page, "Stage"))
        kb.press("ArrowRight", 2)
        expect(banner).to_contain_text("Stage 3 / 8")
        expect(status).to_have_text("Same vectors in both orders at this stage.")
    with kb.step("◀ Previous stage (Enter)"):
        kb.tab_to(button(page, "◀ Previous stage"))
        kb.press("Enter")
        expect(banner).to_contain_text("Stage 2 / 8")
    with kb.step("Next stage ▶ (Enter ×2)"):
        kb.tab_to(button(page, "Next stage ▶"))
        kb.press("Enter")
        expect(banner).to_contain_text("Stage 3 / 8")
        kb.press("Enter")
        expect(banner).to_contain_text("Stage 4 / 8")
        expect(status).to_have_text("The two orders differ at this stage.")
    with kb.step("This is the first divergence (Enter at stage 4)"):
        kb.tab_to(button(page, "This is the first divergence"))
        kb.press("Enter")
        expect(claim).to_contain_text("Right on (you claimed stage 4)")
    with kb.step("Floors slider (ArrowRight)"):
        kb.tab_to(slider(page, "Floors"), back=True)
        kb.press("ArrowRight")
        expect(slider(page, "Floors")).to_have_attribute("aria-valuenow", re.compile(r"^2(\.0+)?$"))
        expect(page.get_by_role("row", name=re.compile("^Floor 2 · ")).first).to_be_visible()
    with kb.step("Position vectors (Space), then They never diverge (Enter)"):
        kb.tab_to(checkbox(page, "Position vectors"))  # the switches' cell comes after Floors in the row
        kb.press("Space")
        expect(checkbox(page, "Position vectors")).not_to_be_checked()
        expect(page.get_by_text("positions off: nothing added").first).to_be_visible()
        expect(status).to_have_text("Same vectors in both orders at this stage.")
        kb.tab_to(button(page, "They never diverge"))
        kb.press("Enter")
        expect(claim).to_contain_text("Right on (you claimed they never diverge)")
    with kb.step("Causal mask (Space)"):
        kb.tab_to(checkbox(page, "Causal mask"), back=True)
        kb.press("Space")
        expect(checkbox(page, "Causal mask")).to_be_checked()
        expect(page.get_by_text("causal mask on").first).to_be_visible()
    with kb.step("Reverse order (Space)"):
        kb.tab_to(checkbox(page, "Reverse order"), back=True)
        kb.press("Space")
        expect(checkbox(page, "Reverse order")).not_to_be_checked()
        expect(page.get_by_text("Turn on Reverse order to compare the two orders.")).to_be_visible()
        expect(button(page, "This is the first divergence")).to_be_disabled()
    with kb.step("Phrase (type, Enter)"):
        type_and_enter(kb, page.get_by_role("textbox", name="Phrase"), "the cat sat down", back=True)
        expect(page.locator(".bt-chip").filter(has_text="cat").first).to_be_visible()

    answer_checkpoint(page, kb, "At which stage do its two traces first differ?", "Stage 4, the attention mixture.",
                      "Right. Attention is the first stage that reads the other words")
    opened.assert_clean()
    kb.finish()


# --- lesson 3: the decoder block ------------------------------------------------------------------

DL_ANSWER = "They stay exactly the same: an earlier position never reads a later one."


def table_named(page: Page, start: str) -> Locator:
    return page.get_by_role("table", name=re.compile("^" + re.escape(start)))


def test_decoder_block_lesson_by_keyboard(open_page) -> None:
    opened = open_page("/lessons/decoder-block")
    page = opened.page
    kb = Keyboard(page)
    shapes = table_named(page, "Shape of every tensor")
    invariants = page.locator(".dl-invariants")
    badge = page.locator(".dl-badge")
    symptoms = page.locator(".dl-symptoms")
    expect(shapes).to_be_visible()
    expect(select(page, "Normalisation")).to_be_disabled()

    commit_prediction(page, kb, DL_ANSWER, "Commit prediction")
    expect(select(page, "Normalisation")).to_be_enabled()
    expect(badge).to_have_text("✓ PASS")
    expect(page.get_by_text("You predicted:")).to_contain_text("matches what the lab shows")

    # 1. Shapes
    with kb.step("B (ArrowRight)"):
        kb.tab_to(slider(page, "B (batch items)"))
        kb.press("ArrowRight")
        expect(shapes).to_contain_text("[2, 4, 8]")
    with kb.step("T (ArrowRight)"):
        kb.tab_to(slider(page, "T (positions)"))
        kb.press("ArrowRight")
        expect(shapes).to_contain_text("[2, 5, 8]")
    with kb.step("d (ArrowDown)"):
        kb.tab_to(select(page, "d (model width)"))
        kb.press("ArrowDown")
        expect(table_named(page, "Parameters of one block (d = 16")).to_be_visible()
    with kb.step("MLP expansion (ArrowDown)"):
        kb.tab_to(select(page, "MLP expansion"))
        kb.press("ArrowDown")
        expect(table_named(page, "Parameters of one block (d = 16, e = 8)")).to_be_visible()
    # 2. Design choices
    with kb.step("Normalisation (ArrowDown)"):
        kb.tab_to(select(page, "Normalisation"))
        kb.press("ArrowDown")
        expect(invariants).to_contain_text("every row has mean 0 and std 1")
    with kb.step("MLP (ArrowDown)"):
        kb.tab_to(select(page, "MLP"))
        kb.press("ArrowDown")
        expect(select(page, "MLP")).to_have_value("GELU")
        expect(table_named(page, "Parameters of one block")).to_contain_text("GELU")
    with kb.step("Placement (ArrowDown)"):
        kb.tab_to(select(page, "Placement"))
        kb.press("ArrowDown")
        expect(invariants).to_contain_text("post-norm: the sum is normalised")
    with kb.step("Heads (ArrowDown)"):
        kb.tab_to(select(page, "Heads"))
        kb.press("ArrowDown")
        expect(page.get_by_text("Describe “Attention weights, head 1” in words")).to_be_visible()
    with kb.step("Causal mask (Space)"):
        kb.tab_to(checkbox(page, "Causal mask"))
        kb.press("Space")
        expect(badge).to_have_text("✗ FAIL")
        expect(checkbox(page, "No causal mask")).to_be_checked()
    with kb.step("Reset every control (Enter)"):
        kb.tab_to(button(page, "Reset every control"), back=True)
        kb.press("Enter")
        expect(badge).to_have_text("✓ PASS")
        expect(invariants).to_contain_text("8 of 8 hold")
        expect(shapes).to_contain_text("[1, 4, 8]")
    # 3. Norms side by side
    norms_verdict = page.locator(".dl-verdict").first
    with kb.step("eps (ArrowDown)"):
        kb.tab_to(select(page, "eps"))
        kb.press("ArrowDown")
        expect(select(page, "eps")).to_have_value("1e-5")
    with kb.step("Constant 2, 2, 2, 2 (Enter)"):
        kb.tab_to(button(page, "Constant 2, 2, 2, 2"))
        kb.press("Enter")
        expect(norms_verdict).to_contain_text("A constant vector")
    with kb.step("Zero vector (Enter)"):
        kb.tab_to(button(page, "Zero vector"))
        kb.press("Enter")
        expect(page.get_by_role("textbox", name="Vector to normalise")).to_have_value(re.compile(r"^0(, 0)+$"))
    with kb.step("Default vector (Enter)"):
        kb.tab_to(button(page, "Default vector"))
        kb.press("Enter")
        expect(page.get_by_role("textbox", name="Vector to normalise")).to_have_value("3, -1, 0.5, 2")
    with kb.step("Vector to normalise (type, Enter)"):
        type_and_enter(kb, page.get_by_role("textbox", name="Vector to normalise"), "1, 2, 3, 4", back=True)
        expect(table_named(page, "The vector and its two normalisations")).to_contain_text("4.000")
    # 5. Causal safety
    with kb.step("Corrupt position (Home)"):
        kb.tab_to(slider(page, "Corrupt position"))
        kb.press("Home")
        expect(badge).to_have_text("– NOTHING TO TEST")
        kb.press("ArrowRight")
        expect(badge).to_have_text("✓ PASS")
    with kb.step("Corrupt value (type, Enter)"):
        type_and_enter(kb, page.get_by_role("textbox", name="Corrupt value"), "-5")
        expect(page).to_have_url(re.compile(r"[?&]corrupt_value=-5(&|$)"))
        delta_alt = page.locator("details.alt-text").filter(has_text="“|Δ output| per position and feature”")
        expect(delta_alt).to_contain_text("Position 1 of batch item 0 was set to −5 in every feature.")
    # 6. Depth
    with kb.step("Blocks (Home)"):
        kb.tab_to(slider(page, "Blocks"))
        kb.press("Home")
        expect(table_named(page, "After 1 block ")).to_be_visible()
    # 7. The worked example
    with kb.step("Intermediate (Home)"):
        kb.tab_to(select(page, "Intermediate"))
        kb.press("Home")
        expect(table_named(page, "X: this lab (float64)")).to_be_visible()
    # 8. Break it
    for label, symptom in [
        ("Missing residual (replace instead of add)", "Missing residual"),
        ("Norm after the addition instead of before (post-norm)", "Norm after the addition"),
        ("eps = 0, with an all-zero input row at position 0", "eps = 0"),
        ("Wrong gate/value split (chunk along positions, not features)", "Wrong split"),
        ("No causal mask", "No causal mask"),
    ]:
        with kb.step(f"{label} (Space)"):
            kb.tab_to(checkbox(page, label))
            kb.press("Space")
            expect(checkbox(page, label)).to_be_checked()
            expect(symptoms).to_contain_text(symptom)

    answer_checkpoint(page, kb, "How many weights does it hold?", "6d²",
                      "Right. 4d² for the combined projection plus 2d² for the output projection")
    opened.assert_clean()
    kb.finish()


# --- train the block: the race page --------------------------------------------------------------

RACE_ANSWER = "A reaches 90 % held-out accuracy first."


def test_train_the_block_by_keyboard(open_page) -> None:
    """Commit, one step, a slower speed and play, then look inside: another floor, a stage in the diagram."""
    opened = open_page("/explorables/train-the-block?task=copy&vs=residual&floors=2")
    page = opened.page
    kb = Keyboard(page)
    expect(button(page, "One step")).to_be_disabled()
    radio = page.get_by_role("radio", name=RACE_ANSWER, exact=True)
    kb.tab_to(radio, group=True)
    kb.choose(radio)
    kb.tab_to(button(page, "Commit prediction"))
    kb.press("Enter")
    expect(page.get_by_text(FINAL)).to_be_visible()
    with kb.step("One step (Enter)"):
        kb.tab_to(button(page, "One step"))
        kb.press("Enter")
        expect(page.get_by_text("Step 1 of 1,000.")).to_be_visible()
        expect(page.get_by_text(re.compile(r"^A: add, \d+ of \d+ right at step 1$"))).to_be_visible()
    with kb.step("Speed (ArrowDown)"):
        kb.tab_to(select(page, "Speed"))
        kb.press("ArrowDown")
        expect(select(page, "Speed")).to_have_value(re.compile("^Medium"))
    with kb.step("Play and Pause (Enter)"):
        kb.tab_to(button(page, "Play"), back=True)
        kb.press("Enter")
        expect(page.get_by_text(re.compile(r"^A: add: ([3-9]\d|\d{3,}) steps"))).to_be_visible(timeout=60_000)
        expect(page.get_by_role("status").filter(has_text="Playing.")).to_be_visible()
        kb.press("Enter")  # focus stays on the toggle: pressed again, it pauses
        expect(page.get_by_role("status").filter(has_text="Paused.")).to_be_visible()
    with kb.step("Floor (ArrowDown)"):
        kb.tab_to(select(page, "Floor"))
        kb.press("ArrowDown")
        expect(page.get_by_role("table", name=re.compile(r"^A: add, floor 2, at step \d+"))).to_be_visible()
    with kb.step("A stage in the diagram (Tab, ArrowRight, Enter)"):
        stages = page.get_by_role("toolbar", name=re.compile("Stages of the floor"))
        kb.tab_to(stages.get_by_role("button").and_(stages.locator('[tabindex="0"]')))
        kb.press("Home")
        kb.press("Enter")
        current = page.get_by_role("table", name=re.compile("A: add, floor 2")).locator('tr[aria-current="step"]')
        expect(current).to_contain_text("resid_pre")
    opened.assert_clean()
    kb.finish()
