"""Logging a browser in as the teacher, as a teacher does: the page asked for, the login page, back to the page."""

from __future__ import annotations

from playwright.sync_api import Browser, Page, expect


def logged_in_page(browser: Browser, url: str, password: str, **context: object) -> Page:
    """A page of a new browser context (`context`: its options, such as a viewport) on `url` (a teacher's page),
    after logging in through the login page."""
    page = browser.new_context(**context).new_page()
    page.goto(url)
    expect(page.get_by_label("Teacher password")).to_be_visible()  # sent to the login page
    page.get_by_label("Teacher password").fill(password)
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(url)  # and back to the page asked for
    return page
