"""The train-the-block page without a browser: the gate holds the race, slices reach the figures in place,
the set-up stays as predicted, and a closed page frees its race."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

from blocktrace.explorables.train_the_block import RaceExplorable
from blocktrace.explorables.train_the_block.runner import EVALUATE_EVERY
from blocktrace.explorables.train_the_block.view import runner


@pytest.fixture
def page():
    runner.configure(workers=1, slice_steps=EVALUATE_EVERY, slice_cpu_s=60.0)  # slices of exactly 25 steps
    explorable = RaceExplorable(query={"task": "copy", "floors": "2", "vs": "residual"})
    yield explorable
    runner.configure()  # shuts the test's workers down


def _play(page: RaceExplorable, slices: int) -> list[bool]:
    async def go():
        return [await page.advance() for _ in range(slices)]
    return asyncio.run(go())


def test_nothing_trains_before_the_prediction_is_committed(page: RaceExplorable) -> None:
    """Before the commit the race neither starts nor moves, whatever is pressed or sent."""
    page.toggle()
    assert _play(page, 2) == [False, False]
    assert page.race_id is None and page.state.a.steps == [] and not page.playing
    assert page.play.disabled and page.step.disabled


def test_slices_reach_the_figures_in_place(page: RaceExplorable) -> None:
    """After the commit each slice streams its rows into the same sources, and the words follow."""
    page.state.prediction.commit("a-first")
    sources = list(page.loss_sources)
    assert _play(page, 2) == [True, True]
    assert page.loss_sources == sources and page.loss_sources[0].data["step"] == list(range(1, 2 * EVALUATE_EVERY + 1))
    assert page.accuracy_sources[0].data["step"] == [EVALUATE_EVERY, 2 * EVALUATE_EVERY]
    assert len(page.depth_source.data["a"]) == 3  # two floors and the output
    assert f"Step {2 * EVALUATE_EVERY} of" in page.status.object
    assert "A: add: 50 steps" in page.words.object


def test_a_set_up_sent_after_the_commit_is_set_back(page: RaceExplorable) -> None:
    """A changed task arriving after the commit (the widget is disabled, but a message can still come) is
    refused by the server: the race keeps its set-up and its steps."""
    page.state.prediction.commit("b-first")
    _play(page, 1)
    assert all(w.disabled for w in page.setup_widgets)
    page.task.value = "sort"
    assert page.state.task == "copy" and page.task.value == "copy" and len(page.state.a.steps) == EVALUATE_EVERY


def test_a_closed_page_frees_its_race(page: RaceExplorable) -> None:
    """Closing the page drops the race in its worker at once."""
    page.state.prediction.commit("a-first")

    async def go():
        await page.advance()
        held = await runner().held_in_workers()
        page.close()
        await asyncio.sleep(0)  # the drop is scheduled on the loop, as the session's end would
        while runner().races:
            await asyncio.sleep(0)
        return held, await runner().held_in_workers()

    assert asyncio.run(go()) == (1, 0)


def test_a_bad_link_keeps_the_defaults_and_says_so() -> None:
    """Values a link cannot use (HTML included) are refused with a notice, shown as text."""
    explorable = RaceExplorable(query={"task": "<img src=x onerror=alert(1)>", "floors": "7"})
    assert explorable.state.task == "copy" and explorable.state.floors == 12
    assert len(explorable.notices) == 2
    html = "".join(p.object for p in explorable.notice_panes())
    assert "<img" not in html and "&lt;img" in html


def test_the_legends_and_the_note_name_the_sides_of_the_race(page: RaceExplorable) -> None:
    """After a new set-up the figures' legends and the note under the difference name both sides anew."""
    page.state.param.update(difference="depth", floors=24)
    labels = [item.label["value"] for item in page.loss_fig.legend[0].items]
    assert labels == ["A: 2 floors", "B: 24 floors"]
    assert "A is 2 floors; B is 24 floors." in page.sides.object


def test_one_step_is_one_step(page: RaceExplorable) -> None:
    """The One step button's call moves each model by exactly one step, not a whole slice."""
    page.state.prediction.commit("a-first")

    async def go():
        return await page.advance(1)

    assert asyncio.run(go()) and len(page.state.a.steps) == len(page.state.b.steps) == 1


def test_a_lost_race_says_so_and_starts_again(page: RaceExplorable) -> None:
    """When the race's worker dies, the page says the race starts again from step 0, and the next slice does."""
    page.state.prediction.commit("a-first")

    async def go():
        await page.advance()
        os.kill(await runner()._call(0, os.getpid), signal.SIGKILL)
        lost = await page.advance()
        message = page.status.object
        again = await page.advance()
        return lost, message, again

    lost, message, again = asyncio.run(go())
    assert not lost and "starts again from step 0" in message and 'role="alert"' in message
    assert again and len(page.state.a.steps) == EVALUATE_EVERY
