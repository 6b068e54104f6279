"""Train the block in real Chromium: predict, play, and watch one model learn while the other cannot."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser

RACE = "/explorables/train-the-block?task=copy&vs=residual&floors=2"


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
