"""The train-the-block page without a browser: the gate holds the race, each slice reaches the drawing as one
payload, the set-up stays as predicted, and a closed page frees its race. The page is driven as the browser drives
it (tests/drawn.py): its payload read, its controls' changes sent and checked by the server."""

from __future__ import annotations

import asyncio
import csv
import html
import io
import json
import os
import re
import signal
from urllib.parse import parse_qsl, urlsplit

import numpy as np
import pytest

from blocktrace.explorables.components import trained_floors
from blocktrace.explorables.components.numbers import number
from blocktrace.explorables.decoder_block_lab import DecoderLabExplorable
from blocktrace.explorables.engine import language_model as lm
from blocktrace.explorables.engine.ops import rms
from blocktrace.explorables.train_the_block import RaceExplorable
from blocktrace.explorables.train_the_block.kept import RaceStore
from blocktrace.explorables.train_the_block.runner import EVALUATE_EVERY, RaceRunner
from blocktrace.explorables.train_the_block.view import runner
from tests.drawn import meta, press, send


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
    for label in ("Play", "One step", "Reset"):
        press(page, label)
    assert _play(page, 2) == [False, False]
    assert page.race_id is None and page.state.a.steps == [] and not page.playing
    assert {"play", "step", "reset"} <= set(meta(page)["disabled"]) and meta(page)["play"] == "Play"
    assert page.drawing.values.size == 0 and meta(page)["curves"] is None and meta(page)["look"] is None


def _loss(page: RaceExplorable, side: int) -> list[float]:
    """One side's training losses as the payload holds them (step k + 1 at index k)."""
    m = meta(page)["curves"]["sides"][side]
    return page.drawing.values[m["loss"]:m["loss"] + m["n"]].tolist()


def test_slices_reach_the_drawing_as_one_payload_each(page: RaceExplorable) -> None:
    """Before the first step the payload holds the line that says where the curves come and no numbers; each slice
    is then one change of the drawing (its meta and its values together), holding every step's loss, each held-out
    reading and the depth plot's rows, and the words follow."""
    page.state.prediction.commit("a-first")
    assert meta(page)["curves"] is None and "drawn here from the first step" in meta(page)["no_curves"]
    changes: list[set[str]] = []
    page.drawing.param.watch(lambda *events: changes.append({e.name for e in events}), ["meta", "values"])
    assert _play(page, 2) == [True, True]
    assert changes == [{"meta", "values"}, {"meta", "values"}]  # one payload a slice, numbers and words together
    assert _loss(page, 0) == [r.loss for r in page.state.a.steps] and len(_loss(page, 0)) == 2 * EVALUATE_EVERY
    assert [r.step for r in page.state.a.steps] == list(range(2 * EVALUATE_EVERY))  # index k is step k + 1
    curves = meta(page)["curves"]
    held = curves["sides"][0]
    assert page.drawing.values[held["held"]:held["held"] + 2 * held["n_held"]].tolist()[::2] == [
        EVALUATE_EVERY, 2 * EVALUATE_EVERY]
    assert curves["n_depth"] == 3  # two floors and the output
    m = meta(page)
    assert m["progress"] == f"Step {2 * EVALUATE_EVERY} of 1,000." and "Step" not in m["status"]["text"]
    assert "A: add: 50 steps" in " ".join(m["words"])


def test_a_set_up_sent_after_the_commit_is_set_back(page: RaceExplorable) -> None:
    """A changed task arriving after the commit (the widget is disabled, but a message can still come) is
    refused by the server: the race keeps its set-up and its steps."""
    page.state.prediction.commit("b-first")
    _play(page, 1)
    assert {"task", "difference", "floors", "lr", "warmup", "seed"} <= set(meta(page)["disabled"])
    send(page, "task", "sort")
    assert page.state.task == "copy" and meta(page)["controls"]["task"] == "copy"
    assert meta(page)["ack"] == page._sent_n and len(page.state.a.steps) == EVALUATE_EVERY


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
    send(page, "difference", "depth")
    send(page, "floors", 24)
    assert meta(page)["names"] == ["A: 2 floors", "B: 24 floors"]
    assert meta(page)["sides"] == "A is 2 floors; B is 24 floors. Everything else is the same."
    assert meta(page)["options"]["floor"][-1] == ["Floor 24", 23]


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
        message = meta(page)["status"]
        again = await page.advance()
        return lost, message, again

    lost, message, again = asyncio.run(go())
    assert not lost and "starts again from step 0" in message["text"] and message["alert"]
    assert again and len(page.state.a.steps) == EVALUATE_EVERY


# --- inside the models, the page's share of work, speed and downloads ----------------------------------


def _run_here(page: RaceExplorable, steps: int):
    """The same race trained in this process, as an independent check on what the worker sent."""
    race = page.state.spec.build()
    for _ in range(steps):
        race.step()
    return race


def test_the_look_inside_is_the_models_at_their_current_weights(page: RaceExplorable) -> None:
    """After a slice the maps hold the chosen floor and head of each model, on the chosen held-out example, as
    the same race trained here gives them; a new floor is looked at without a step."""
    page.state.prediction.commit("a-first")
    send(page, "example", 3)
    send(page, "head", 1)
    assert _play(page, 1) == [True]
    race = _run_here(page, EVALUATE_EVERY)
    tokens = page.state.example_tokens(3)
    for n, run in enumerate((race.a, race.b)):
        trace, _ = lm.trace_sequence(run.config, run.params, tokens, run.task.vocab)
        assert _map(page, n) == trace["blocks.0.attn.pattern"][1].ravel().tolist()
    send(page, "floor", 1)

    async def look_again():
        await page._look_now()
    asyncio.run(look_again())
    trace, logits = lm.trace_sequence(race.a.config, race.a.params, tokens, race.a.task.vocab)
    assert _map(page, 0) == trace["blocks.1.attn.pattern"][1].ravel().tolist()
    look = meta(page)["look"]
    assert "floor 2, head 2, step 25" in look["maps"][0]["title"]
    scored = page.look.scored
    right = int((logits.argmax(-1)[scored] == page.look.targets[scored]).sum())
    assert [f"A: add, {right} of {int(scored.sum())} right at step 25"] == [r[0] for r in look["answers"] if
                                                                            r[0].startswith("A: ")]
    table = look["table"]
    assert "Floor 2, at step 25" not in table["caption"] and "floor 2, at step 25" in table["caption"]
    keys = [row[1] for row in table["rows"]]
    assert not any("blocks.1" in k for k in keys) and "resid_post" in keys
    position = int(np.flatnonzero(scored)[-1])
    row = next(r for r in table["rows"] if r[1] == "resid_post")
    assert page.drawing.values[row[3]] == rms(trace["blocks.1.resid_post"][position])
    send(page, "head", 9)  # a head the models lack (a crafted message): refused, the last good kept
    assert meta(page)["controls"]["head"] == 1 and meta(page)["ack"] == page._sent_n


def _map(page: RaceExplorable, side: int) -> list[float]:
    """One model's attention map as the payload holds it, row by row."""
    m = meta(page)["look"]["maps"][side]
    n = len(meta(page)["look"]["factors"])
    return page.drawing.values[m["at"]:m["at"] + n * n].tolist()


def test_a_floor_only_the_deeper_model_has_is_said_not_drawn() -> None:
    runner.configure(workers=1, slice_steps=1, slice_cpu_s=60.0)
    try:
        page = RaceExplorable(query={"task": "copy", "floors": "6", "vs": "depth"})
        page.state.prediction.commit("a-first")
        send(page, "floor", 4)
        assert _play(page, 1) == [True]
        maps = meta(page)["look"]["maps"]
        assert set(_map(page, 0)) == {0.0} and "no floor 5" in maps[0]["title"]
        assert maps[0]["words"] == ["A: 2 floors has no floor 5."]
        assert "floor 5, head 1, step 1" in maps[1]["title"]
        assert meta(page)["look"]["table"]["missing"] == "A: 2 floors has no floor 5."
    finally:
        runner.configure()


def test_a_page_trains_no_more_than_its_share() -> None:
    """With a share of 3 slices' work the fourth slice is refused with a message, and nothing past it runs."""
    cost = 2 * 2  # two models of two floors
    runner.configure(workers=1, slice_steps=10, slice_cpu_s=60.0, session_work=cost * 25)
    try:
        page = RaceExplorable(query={"task": "copy", "floors": "2", "vs": "residual"})
        page.state.prediction.commit("a-first")
        page.playing = True
        assert _play(page, 4) == [True, True, True, False]
        assert len(page.state.a.steps) == 25 and page.work_done == cost * 25  # the third slice took only 5
        assert "as much as one page may" in meta(page)["status"]["text"] and not page.playing
        page.restart()  # a reset does not give the page a new share
        page.state.prediction.commit("a-first")
        assert _play(page, 1) == [False] and page.state.a.steps == []
    finally:
        runner.configure()


def test_slow_speed_asks_for_one_step_a_tick(page: RaceExplorable) -> None:
    page.state.prediction.commit("a-first")
    send(page, "speed", 1)
    assert _play(page, 3) == [True, True, True] and len(page.state.a.steps) == 3
    send(page, "speed", "many")  # what a crafted message might hold: refused, the last good speed kept
    assert meta(page)["controls"]["speed"] == 1 and meta(page)["ack"] == page._sent_n
    assert _play(page, 1) == [True] and len(page.state.a.steps) == 4
    send(page, "speed", 0)  # Fast: the server's slice, never more
    assert _play(page, 1) == [True] and len(page.state.a.steps) == 4 + EVALUATE_EVERY


def test_the_downloads_hold_the_curves_drawn_and_the_weights_trained(page: RaceExplorable) -> None:
    """The CSV has a row per model per step with the held-out readings where they were taken; the JSON holds
    both models' parameters as the same race trained here has them."""
    page.state.prediction.commit("a-first")
    assert asyncio.run(page._weights_file()) is None and "Take a step first" in meta(page)["status"]["text"]
    assert _play(page, 2) == [True, True]
    rows = list(csv.DictReader(io.StringIO(page._curves_file().getvalue().decode())))
    assert len(rows) == 4 * EVALUATE_EVERY and [r["model"] for r in rows[::2 * EVALUATE_EVERY]] == ["A", "B"]
    assert [r["step"] for r in rows if r["held_out_accuracy"]] == ["25", "50", "25", "50"]
    assert float(rows[0]["loss"]) == page.state.a.steps[0].loss
    saved = json.loads(asyncio.run(page._weights_file()).getvalue())
    race = _run_here(page, 2 * EVALUATE_EVERY)
    assert saved["race"]["floors"] == 2 and saved["models"]["B"]["name"] == "replace"
    for model, run in (("A", race.a), ("B", race.b)):
        assert saved["models"][model]["steps"] == 2 * EVALUATE_EVERY
        assert saved["models"][model]["config"]["residual"] == run.config.residual
        assert {k: np.asarray(v) for k, v in saved["models"][model]["params"].items()}.keys() == run.params.keys()
        for name, value in run.params.items():
            assert np.array_equal(np.asarray(saved["models"][model]["params"][name]), value)


def test_the_floor_diagram_shows_the_tables_model_and_a_picked_stage_marks_its_row(page: RaceExplorable) -> None:
    """Before the first step the diagram names the floor's stages only; after it each card holds its stage's RMS
    at the example's last scored position, as the same race trained here gives it, and a stage picked in the
    diagram is marked in the table."""
    diagram = page.diagram.component
    assert diagram.locked and diagram.values == {} and "values appear after the first step" in diagram.caption
    page.state.prediction.commit("a-first")
    send(page, "table", "b")
    assert _play(page, 1) == [True]
    race = _run_here(page, EVALUATE_EVERY)
    trace, _ = lm.trace_sequence(race.b.config, race.b.params, page.look.tokens, race.b.task.vocab)
    position = int(np.flatnonzero(page.look.scored)[-1])
    mid = trace["blocks.0.resid_mid"][position]
    assert not diagram.locked and diagram.values["blocks.0.resid_mid"] == f"RMS {number(rms(mid))}"
    assert "B: replace, floor 1 at step 25" in diagram.caption and diagram.selected == "blocks.0.attn.pattern"
    diagram.selected = "blocks.0.resid_mid"  # a click in the browser
    assert page.picked == "resid_mid" and diagram.selected == "blocks.0.resid_mid"
    assert [row[1] for row in meta(page)["look"]["table"]["rows"] if row[6]] == ["resid_mid"]  # marked: current
    diagram.selected = "blocks.0.nonsense"  # a crafted key is set back
    assert page.picked == "resid_mid" and diagram.selected == "blocks.0.resid_mid"


def test_the_play_button_is_set_back_before_the_commit_and_says_what_a_press_does(page: RaceExplorable) -> None:
    """Pressed before the commit (a crafted message: it is disabled) the button springs back and nothing plays;
    after it, pressing plays and the button says Pause, pressing again pauses and it says Play; the status says
    which, without a step count."""
    assert "play" in meta(page)["disabled"] and meta(page)["play"] == "Play"
    press(page, "Play")
    assert not page.playing and meta(page)["play"] == "Play" and meta(page)["ack"] == page._sent_n
    page.state.prediction.commit("a-first")
    assert "play" not in meta(page)["disabled"]
    press(page, "Play")
    assert page.playing and meta(page)["play"] == "Pause" and "Playing." in meta(page)["status"]["text"]
    press(page, "Play")
    assert not page.playing and meta(page)["play"] == "Play" and "Ready" in meta(page)["status"]["text"]
    assert _play(page, 1) == [True] and "Paused." in meta(page)["status"]["text"]
    assert "Step" not in meta(page)["status"]["text"]


def test_the_race_stops_at_its_verdict_and_keeps_training_when_asked(page: RaceExplorable, monkeypatch) -> None:
    """Playing, the race stops on the slice that decides it, says so with the verdict and offers Keep training;
    that plays the same race on from where it stopped, to the end of its steps (a shorter budget here), and no
    further stop at the verdict."""
    monkeypatch.setattr("blocktrace.explorables.train_the_block.state.TARGET", 0.3)  # decided in a few slices
    for module in ("view", "state"):
        monkeypatch.setattr(f"blocktrace.explorables.train_the_block.{module}.BUDGET", 200)
    s = page.state
    s.prediction.commit("b-first")

    async def play_while_playing() -> int:
        slices = 0
        while page.playing:
            assert await page.advance()
            slices += 1
        return slices

    press(page, "Play")
    assert page.playing and not meta(page)["keep"]
    asyncio.run(play_while_playing())
    stopped_at = len(s.a.steps)
    assert s.result() is not None and not s.finished and stopped_at < 200
    m = meta(page)
    assert m["keep"] and m["play"] == "Play" and not page.keep_going and "keep" not in m["disabled"]
    status, verdict = m["status"]["text"], m["status"]["verdict"]
    assert status.count("Decided: ") == 1 and "The race stopped here: Keep training" in status
    assert verdict[0].startswith("Your prediction was ") and verdict[1] == ("ok" if s.result() == "b-first" else "bad")
    assert "You predicted: B reaches 90 % held-out accuracy first." in verdict[0]
    press(page, "Keep training")
    assert page.playing and page.keep_going and not meta(page)["keep"] and meta(page)["play"] == "Pause"
    assert asyncio.run(play_while_playing()) > 1
    assert s.finished and len(s.a.steps) == 200 and s.a.steps[stopped_at].step == stopped_at  # the same race on
    assert not meta(page)["keep"] and "Both models have stopped" in meta(page)["status"]["text"]


def test_the_first_step_is_taken_ahead_once_committed_and_shown_at_play(page: RaceExplorable, monkeypatch) -> None:
    """Nothing is built before the commit. After it the race is built and its first step taken, a slice of one
    step that is shown nowhere; Play then shows that step without asking the worker again."""
    asked: list[int | None] = []
    advance = RaceRunner.advance

    async def spy(self, race_id, steps=None, look=None):
        asked.append(steps)
        return await advance(self, race_id, steps, look)

    monkeypatch.setattr(RaceRunner, "advance", spy)

    async def go():
        await page.prepare()
        before = (page.race_id, list(asked))
        page.state.prediction.commit("a-first")
        await page.prepare()
        await page.prepare()  # already taken: not again
        m = meta(page)
        held = (list(asked), m["curves"], page.drawing.values.size, m["progress"], m["words"])
        return before, held, await page.advance()

    before, (held_asked, curves, numbers, progress, words), moved = asyncio.run(go())
    assert before == (None, [])
    assert held_asked == [1] and curves is None and numbers == 0 and progress == "" and "A: add: not started." in words
    assert moved and asked == [1] and _loss(page, 0) == [page.state.a.steps[0].loss]
    assert meta(page)["progress"] == "Step 1 of 1,000."


def test_a_race_stops_at_its_budget_of_steps(page: RaceExplorable, monkeypatch) -> None:
    """The last slice takes only the steps left, so no side ever shows more steps than the race has."""
    monkeypatch.setattr("blocktrace.explorables.train_the_block.view.BUDGET", 60)
    monkeypatch.setattr("blocktrace.explorables.train_the_block.state.BUDGET", 60)
    page.state.prediction.commit("a-first")
    assert _play(page, 4) == [True, True, True, False]
    assert len(page.state.a.steps) == len(page.state.b.steps) == 60 and page.state.finished


def test_a_floor_opens_in_the_decoder_lab_as_trained(page: RaceExplorable) -> None:
    """The button keeps the table's model and floor as the race has trained it; the link it offers opens the lab
    on those weights and on the stream that enters that floor, as the same race trained here computes it."""
    page.state.prediction.commit("a-first")
    asyncio.run(page._open_in_lab(None))
    assert "Take a step first" in page.lab_link.object
    assert _play(page, 1) == [True]
    send(page, "table", "b")
    send(page, "floor", 1)
    send(page, "example", 2)
    asyncio.run(page._open_in_lab(None))
    link = re.search(r'href="([^"]+)"', page.lab_link.object).group(1)
    assert link.startswith("/explorables/decoder-block-lab?") and "floor 2 of replace" in page.lab_link.object
    query = dict(parse_qsl(urlsplit(html.unescape(link)).query))
    assert query["residual"] == "replace" and query["causal"] == "on"
    lab = DecoderLabExplorable(query=query)
    race = _run_here(page, EVALUATE_EVERY)
    sequence = race.b.held_out.tokens[2]
    whole, _ = lm.trace_sequence(race.b.config, race.b.params, sequence, race.b.task.vocab)
    assert np.array_equal(lab.state.trace.output[0], whole["blocks.1.resid_post"][:8])
    note = json.loads(lab.drawing.meta)["trained"]  # drawn as "Trained weights: …" with a link "Back to the race"
    assert "after 25 training steps" in note["lines"][0] and note["race"] == lab.state.trained.race != ""
    lab.state.prediction.commit("exact")  # the lab's own gate
    m = json.loads(lab.drawing.meta)
    assert not m["locked"] and {"d", "norm"} <= set(m["disabled"]) and not {"T", "placement"} & set(m["disabled"])


def test_a_page_keeps_only_its_share_of_floors(page: RaceExplorable, monkeypatch) -> None:
    """However often the button is pressed (or its message sent), one page keeps at most PER_PAGE floors."""
    monkeypatch.setattr(trained_floors, "PER_PAGE", 3)
    page.state.prediction.commit("a-first")
    assert _play(page, 1) == [True]
    links = []
    for _ in range(5):
        asyncio.run(page._open_in_lab(None))
        links.append(re.search(r"run=([\w-]+)", page.lab_link.object))
    assert [link is not None for link in links] == [True, True, True, False, False]
    assert "as many as one page may" in page.lab_link.object
    assert all(trained_floors.find(link.group(1)) is not None for link in links[:3])


def test_a_refused_race_is_not_tried_again_until_play_which_says_why() -> None:
    """With the server's races full, the first step taken ahead is refused quietly, nothing is retried by
    itself, and Play then tries again and says why it cannot start."""
    runner.configure(workers=1, max_races=0)
    try:
        page = RaceExplorable(query={"task": "copy", "floors": "2", "vs": "residual"})
        page.state.prediction.commit("a-first")
        asyncio.run(page.prepare())
        assert page._ready is None and not page._busy and "Ready" in meta(page)["status"]["text"]
        assert _play(page, 1) == [False] and "already training 0 races" in meta(page)["status"]["text"]
    finally:
        runner.configure()


def test_a_bad_seed_is_refused_beside_its_field_and_the_last_good_kept(page: RaceExplorable) -> None:
    """A seed that is not a whole number in range gets a message beside its field (not the typed text back) and the
    race keeps its last good seed; a good one is taken and the message goes."""
    for typed in ("12x", "<b>1</b>", "-3", "10000"):
        send(page, "seed", typed)
        m = meta(page)
        assert m["error_field"] == "seed" and m["error"].startswith("Could not use this seed")
        assert typed not in m["error"]
        assert page.state.seed == 0 and m["controls"]["seed"] == 0 and m["ack"] == page._sent_n
    send(page, "seed", " 42 ")
    assert page.state.seed == 42 and meta(page)["controls"]["seed"] == 42 and meta(page)["error"] == ""


def test_a_kept_race_is_drawn_at_once_and_its_looks_say_the_step_they_show(tmp_path) -> None:
    """After a restart, a page playing a kept race is given its curves as the first computation drew them, bit for
    bit, while its worker only recomputes the models for the looks; each look says the step it shows, and the
    weights downloaded are those of the page's step."""
    query = {"task": "copy", "floors": "2", "vs": "residual", "seed": "3"}

    def played(**numbers) -> tuple[RaceExplorable, list]:
        runner.configure(workers=1, slice_steps=EVALUATE_EVERY, store=RaceStore(tmp_path, 10), **numbers)
        page = RaceExplorable(query=query)
        page.state.prediction.commit("a-first")
        assert _play(page, 2) == [True, True]
        return page, _loss(page, 0) + _loss(page, 1)

    try:
        first, computed = played(slice_cpu_s=60.0)
        first.close()  # the race's last page: it is kept
        runner().flush()
        page, kept = played(slice_cpu_s=1e-9)  # a restart, whose slices of recomputation take one step
        look, taken = page.look, runner().steps_computed
        saved = json.loads(asyncio.run(page._weights_file()).getvalue())
    finally:
        runner.configure()
    assert np.array(kept).tobytes() == np.array(computed).tobytes() and len(kept) == 4 * EVALUATE_EVERY
    assert look.a.steps < 2 * EVALUATE_EVERY and taken == look.a.steps
    assert f"step {look.a.steps}" in meta(page)["look"]["maps"][0]["title"]
    assert [saved["models"][m]["steps"] for m in "AB"] == [2 * EVALUATE_EVERY] * 2
