"""The block-floor explorable in real Chromium: the bet, the divergence claim, typed phrases as text."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

pytestmark = pytest.mark.browser
FLOOR = "/explorables/block-floor"
BET = "It is kept: the correction is added on top of it."


def _commit_bet(page: Page) -> None:
    page.get_by_text(BET).click()
    page.get_by_role("button", name="Commit bet").click()
    expect(page.get_by_text("Your prediction (final)")).to_be_visible()


def test_the_bet_locks_and_unlocks_the_controls(open_page) -> None:
    """Controls stay disabled until the bet is committed; afterwards the bet cannot be changed."""
    opened = open_page(FLOOR)
    page = opened.page
    expect(page.get_by_role("button", name="Next stage ▶")).to_be_disabled()
    _commit_bet(page)
    expect(page.get_by_role("button", name="Next stage ▶")).to_be_enabled()
    expect(page.get_by_role("button", name="Commit bet")).to_be_hidden()
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
    expect(page.get_by_text("reordered", exact=False).or_(page.get_by_text("neighbours", exact=False)).first
           ).to_be_visible()
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
