"""Train the block in real Chromium: predict, play, and watch one model learn while the other cannot."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Browser, expect

pytestmark = pytest.mark.browser

RACE = "/explorables/train-the-block?task=copy&vs=residual&floors=2"
# Each menu of the drawing: its id, its width, and the width it takes when nothing holds it in (as wide as its
# longest option). A select's scrollWidth is its clientWidth whatever its text, so it cannot tell.
MENU_WIDTHS = """menus => menus.map(menu => {
  const free = menu.cloneNode(true);
  free.removeAttribute("id");
  free.style.cssText = "position: absolute; left: 0; top: 0; width: auto; max-width: none; visibility: hidden";
  menu.after(free);
  const widths = [menu.id, menu.getBoundingClientRect().width, free.getBoundingClientRect().width];
  free.remove();
  return widths;
})"""


def test_a_race_runs_after_the_prediction_stops_at_its_verdict_and_trains_on(open_page) -> None:
    """Play is locked until the commit; then, pressed from the keyboard, it plays and says Pause with the focus
    still on it; add and replace race at two floors, the page shows both curves' steps in words, and the race
    stops once decided, with the verdict against the prediction and Keep training, which plays the same race
    on."""
    opened = open_page(RACE)
    page = opened.page
    play = page.get_by_role("button", name="Play")
    expect(play).to_be_disabled()
    expect(page.get_by_text("Commit your prediction to start the race.")).to_be_visible()
    page.get_by_label("A reaches 90 % held-out accuracy first.").check()
    page.get_by_role("button", name="Commit prediction").click()
    expect(play).to_be_enabled()
    expect(page.get_by_label("Task")).to_be_disabled()  # held as predicted until the race is decided
    play.focus()
    page.keyboard.press("Enter")
    expect(page.get_by_role("button", name="Pause")).to_be_focused()
    expect(page.get_by_role("status").filter(has_text="Playing.")).to_be_visible()
    expect(page.get_by_text(re.compile(r"^A: add: \d+ steps"))).to_be_visible(timeout=60_000)
    keep = page.get_by_role("button", name="Keep training")
    expect(keep).to_be_visible(timeout=120_000)
    status = page.get_by_role("status").filter(has_text="The race stopped here: Keep training")
    expect(status).to_contain_text("Decided: A (add) reached 90 % held-out accuracy first, at step")
    expect(page.get_by_text("Your prediction was right.")).to_contain_text(
        "You predicted: A reaches 90 % held-out accuracy first.")
    expect(page.get_by_role("button", name="Play")).to_be_enabled()
    expect(page.get_by_label("Task")).to_be_enabled()
    stopped = int(page.get_by_text(re.compile(r"^Step [\d,]+ of 1,000\.$")).inner_text().split()[1])
    keep.click()
    expect(page.get_by_role("button", name="Pause")).to_be_visible()
    expect(keep).to_be_hidden()
    expect(page.get_by_text(re.compile(rf"^Step (?!{stopped} )[\d,]+ of 1,000\.$"))).to_be_visible(timeout=60_000)
    opened.assert_clean()


def test_a_trained_floor_opens_in_the_decoder_lab(open_page) -> None:
    """After a step, the race offers the table's floor as a link; it opens the decoder lab in a new tab on the
    trained weights, its shape fixed, with the way back to the race."""
    opened = open_page(RACE)
    page = opened.page
    page.get_by_label("A reaches 90 % held-out accuracy first.").check()
    page.get_by_role("button", name="Commit prediction").click()
    page.get_by_role("button", name="One step").click()
    expect(page.get_by_text("Step 1 of 1,000.")).to_be_visible(timeout=60_000)
    page.get_by_role("button", name="Open this floor in the decoder lab").click()
    link = page.get_by_role("link", name=re.compile(r"Open floor 1 of add, as trained for \d+ steps?"))
    with page.context.expect_page() as opening:
        link.click()
    lab = opening.value
    expect(lab.get_by_text("Trained weights:")).to_be_visible(timeout=60_000)
    expect(lab.get_by_text(re.compile(r"floor 1 of 2 of the race's model add, after \d+ training steps?"))) \
        .to_be_visible()
    expect(lab.get_by_label("d (model width)")).to_be_disabled()
    expect(lab.get_by_role("link", name="Back to the race")).to_have_attribute("href", re.compile(r"vs=residual"))
    opened.assert_clean()


def _committed(open_page):
    opened = open_page(RACE)
    page = opened.page
    page.get_by_label("A reaches 90 % held-out accuracy first.").check()
    page.get_by_role("button", name="Commit prediction").click()
    expect(page.get_by_role("button", name="Play")).to_be_enabled()
    return opened, page


@pytest.mark.parametrize(("query", "phone"), [("&embed=1", False), ("&embed=1", True), ("", True)],
                         ids=["embedded-900", "embedded-phone", "phone"])
def test_every_menu_shows_its_longest_option_in_full(browser: Browser, server, query: str, phone: bool) -> None:
    """Embedded 900 px wide, and on a 390 px phone embedded or not, every menu of the race is as wide as its longest
    option (Speed's "Fast: as many steps as the server gives" was cut off in the embed's grid), and nothing runs
    past the page's right edge."""
    size = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True} if phone else \
        {"viewport": {"width": 900, "height": 700}}
    page = browser.new_context(**size).new_page()
    page.goto(server.url(RACE + query))
    expect(page.get_by_label("Speed")).to_have_value("Fast: as many steps as the server gives")
    widths = page.locator(".dv select").evaluate_all(MENU_WIDTHS)
    assert len(widths) == 10 and "dv-speed" in [w[0] for w in widths]
    assert [(name, shown, longest) for name, shown, longest in widths if shown < longest - 0.5] == []
    assert page.evaluate("document.documentElement.scrollWidth") == size["viewport"]["width"]
    page.context.close()


def test_a_bad_seed_is_refused_beside_its_field_and_the_last_good_kept(open_page) -> None:
    """Before the commit the seed can be typed: text that is not a whole number from 0 to 9,999 gets a message
    beside the field and the race keeps its last good seed (in the address too); a good one clears it."""
    opened = open_page(RACE)
    page = opened.page
    field = page.get_by_role("textbox", name="Seed (weights and data)")
    field.fill("12x")
    field.press("Enter")
    error = page.get_by_role("alert").filter(has_text="Could not use this seed")
    expect(error).to_contain_text("The last good seed, 0, is still used.")
    assert "seed=" not in page.url
    field.fill("7")
    field.press("Enter")
    expect(error).to_have_count(0)
    expect(page).to_have_url(re.compile(r"seed=7"))
    opened.assert_clean()


def test_the_charts_give_values_on_hover_words_a_log_axis_and_a_png(open_page) -> None:
    """After a few slices: the loss curves on a log axis (ticks at 1, 2 and 5 times powers of ten), the nearest
    step's losses on hover, the held-out readings and the attention cells each with their value, every chart with
    its legend off the marks, its words and its PNG."""
    opened, page = _committed(open_page)
    page.get_by_role("button", name="Play").click()
    expect(page.get_by_text(re.compile(r"^A: add: .*held-out accuracy"))).to_be_visible(timeout=60_000)
    page.get_by_role("button", name="Pause").click()
    expect(page.get_by_role("status").filter(has_text="Paused.")).to_be_visible()
    loss = page.locator("figure.dv-chart").filter(has_text="Training loss (log scale)")
    expect(loss.locator(".dv-legend")).to_have_text(re.compile(r"A: add\s*B: replace\s*loss of guessing"))
    y_ticks = loss.locator(".dv-axis").first.locator("text:not(.dv-axis-label)").evaluate_all(
        "els => els.map(e => e.textContent)")  # the y axis: drawn first
    assert len(y_ticks) >= 2 and all(re.fullmatch(r"0\.0*[125]|[125]0*", t) for t in y_ticks), y_ticks
    loss.locator("rect.tb-hover").hover()
    expect(loss.locator(".dv-readout")).to_have_text(re.compile(r"^step \d+: A: add \d\.\d{3}, B: replace \d\.\d{3}$"))
    accuracy = page.locator("figure.dv-chart").filter(has_text="Held-out accuracy: the race is to 90 %")
    accuracy.locator("circle.dv-mark").first.hover(force=True)
    expect(accuracy.locator(".dv-readout")).to_have_text(re.compile(r"^A: add, step 25: \d+\.\d %$"))
    heat = page.locator("figure.dv-chart").filter(has_text=re.compile(r"A: add: floor 1, head 1, step \d+"))
    heat.locator("rect.dv-heat").first.hover()
    expect(heat.locator(".dv-readout")).to_have_text(re.compile(r"^1 \w+, 1 \w+: \d\.\d{3}$"))
    accuracy.get_by_text("Describe “Held-out accuracy” in words").click()
    expect(accuracy.get_by_text("A: add: step 25 ", exact=False)).to_be_visible()
    depth = page.locator("figure.dv-chart").filter(has_text="Gradient reaching each floor now (log)")
    depth.get_by_text("Describe “Gradient reaching each floor” in words").click()
    expect(depth.get_by_text(re.compile(r"A: add: depth 0 \d\.\d\de[−+]\d+"))).to_be_visible()
    with page.expect_download() as info:
        page.get_by_role("button", name="Download “Training loss (log scale)” as PNG").click()
    assert info.value.suggested_filename == "race-training-loss.png"
    assert Path(info.value.path()).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    opened.assert_clean()


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_a_played_race_on_a_phone_passes_axe_and_fits(browser: Browser, server, theme: str) -> None:
    """On a 390 px phone, after a race has played: the curves, the maps and the wide tables fit the phone's width
    (the tables scroll in a focusable region of their own) and axe finds no serious violation."""
    page = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True).new_page()
    page.goto(server.url(f"{RACE}&theme={theme}"))
    page.get_by_label("A reaches 90 % held-out accuracy first.").check()
    page.get_by_role("button", name="Commit prediction").click()
    page.get_by_role("button", name="Play").click()
    expect(page.get_by_text(re.compile(r"^A: add: .*held-out accuracy"))).to_be_visible(timeout=60_000)
    page.get_by_role("button", name="Pause").click()
    expect(page.get_by_role("status").filter(has_text="Paused.")).to_be_visible()
    expect(page.get_by_role("region", name=re.compile(r"^A: add, floor 1, at step \d+"))).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth") == 390
    violations = Axe().run(page).response["violations"]
    serious = [f"{v['id']}: {v['help']}" for v in violations if v["impact"] in ("serious", "critical")]
    assert serious == []
    page.context.close()
