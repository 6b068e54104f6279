"""The train-the-block page: set up a race, predict its winner, then play it and watch both models learn.

The race trains in the runner's worker processes (runner.py); this view asks for one slice at a time from
a periodic callback of its own session (Panel's `add_periodic_callback`, ended with the session), records
it in the state and streams the new rows into the figures' sources. The server decides: the race moves
only once the prediction is unlocked, a set-up committed to stays until the race has decided it, and a
closed page's race is dropped at once.
"""

from __future__ import annotations

import asyncio
import atexit
import functools
import logging
from html import escape

import panel as pn
from bokeh.models import Span

from blocktrace.explorables.components.explorable import ExplorableView
from blocktrace.explorables.components.page_layout import READABLE_CONTROLS, STICKY_SIDE, readable
from blocktrace.explorables.components.prediction import GATE_EVENTS, PredictionGate
from blocktrace.explorables.components.style import styled
from blocktrace.explorables.components.updates import LiveHTML, batched, set_object
from blocktrace.explorables.components.url_state import sync_to_url
from blocktrace.explorables.engine import tasks as task_data
from blocktrace.explorables.engine.config import ConfigError
from blocktrace.explorables.train_the_block import plots
from blocktrace.explorables.train_the_block.runner import RaceLost, RaceRunner, Slice
from blocktrace.explorables.train_the_block.state import (
    BUDGET,
    DIFFERENCES,
    FLOORS,
    PREDICTION_CHOICES,
    QUERY_KEYS,
    RATES,
    TARGET,
    RaceState,
)

__all__ = ["RaceExplorable", "TITLE", "runner"]

log = logging.getLogger(__name__)

TITLE = "Train the block: race two floors"
INTRO = ("Two models learn the same small task from the same examples, starting from the same weights, and "
         "differ in one design choice. Choose the task and the difference, say which you expect to reach "
         f"{TARGET:.0%} accuracy on examples it never trained on first, then press Play.")
QUESTION = "Which model will reach 90 % held-out accuracy first?"
HINT = "A is the first side of the difference you chose, B the second; both are named above the answers."
TICK_MS = 100  # how often a playing page asks for the next slice (at most one is in flight)

class _Runner:
    """The process's runner, made on first use with the numbers the server set (`configure`); its workers start
    with the first race."""

    def __init__(self) -> None:
        self.numbers: dict = {}
        self.made: RaceRunner | None = None

    def configure(self, **numbers) -> None:
        """RaceRunner's arguments (the server's settings); a runner already made is shut down for a new one."""
        self.numbers = numbers
        if self.made is not None:
            self.made.shutdown()
            self.made = None

    def __call__(self) -> RaceRunner:
        if self.made is None:
            self.made = RaceRunner(**self.numbers)
            atexit.register(self.made.shutdown)  # the workers also end by themselves if the server is killed
        return self.made


runner = _Runner()


class RaceExplorable(ExplorableView):
    """One session's race: its own state, widgets, figures and race in the runner."""

    def __init__(self, query: dict[str, str] | None = None, embed: bool = False, predict: bool = True):
        state = RaceState()
        super().__init__(state, state.prediction, QUERY_KEYS, query, embed, predict, batch_query=True)
        self.playing = False
        self.race_id: int | None = None
        self._race_generation = -1
        self._busy = False
        self._callback = None
        self._build_widgets()
        self._build_views()
        state.param.watch(self._new_setup, ["generation"])
        state.param.watch(self._show_sides, ["difference", "floors", "lr"])
        state.prediction.param.watch(self._lock, GATE_EVENTS)
        state.param.watch(self._lock, ["predicted_setup", "decided"])
        sync_to_url(state, QUERY_KEYS)
        self._lock()
        if pn.state.curdoc is not None and pn.state.curdoc.session_context is not None:
            pn.state.on_session_destroyed(lambda _context: self.close())

    # --- building ---------------------------------------------------------------------------

    def _build_widgets(self) -> None:
        s = self.state
        self.task = pn.widgets.Select.from_param(
            s.param.task, label="Task", options={task_data.make_task(t).title: t for t in task_data.TASKS},
            sizing_mode="stretch_width")
        self.difference = pn.widgets.Select.from_param(
            s.param.difference, label="The one difference",
            options={d.label: key for key, d in DIFFERENCES.items()},
            sizing_mode="stretch_width")
        self.floors = pn.widgets.Select.from_param(s.param.floors, label="Floors in each model",
                                                   options={str(f): f for f in FLOORS}, sizing_mode="stretch_width")
        self.lr = pn.widgets.Select.from_param(s.param.lr, label="Learning rate (Adam)",
                                               options={f"{r:g}": r for r in RATES}, sizing_mode="stretch_width")
        self.seed = pn.widgets.IntInput.from_param(s.param.seed, label="Seed (weights and data)",
                                                   sizing_mode="stretch_width")
        self.play = pn.widgets.Button(label="Play", color="primary")
        self.step = pn.widgets.Button(label="One step")
        self.reset = pn.widgets.Button(label="Reset")
        self.play.on_click(lambda _: self.toggle())
        self.step.on_click(lambda _: self._schedule_one())
        self.reset.on_click(lambda _: self.restart())
        self.setup_widgets = [self.task, self.difference, self.floors, self.lr, self.seed]
        self.respond_quickly(self.setup_widgets)
        readable(self.setup_widgets)

    def _names(self) -> tuple[str, str]:
        a, b = self.state.side_names()
        return f"A: {a}", f"B: {b}"

    def _build_views(self) -> None:
        s = self.state
        self.gate = PredictionGate(s.prediction, QUESTION, HINT)
        names = self._names()
        chance = task_data.make_task(s.task).chance_loss
        self.loss_fig, self.loss_sources = plots.loss_figure(names, chance)
        self.accuracy_fig, self.accuracy_sources = plots.accuracy_figure(names)
        self.depth_fig, self.depth_source = plots.depth_figure(names)
        wide = styled(sizing_mode="stretch_width")
        self.status = LiveHTML(self._status_html(), **wide)
        self.task_note = LiveHTML(self._task_html(), **wide)
        self.sides = LiveHTML(self._sides_html(), **wide)
        self.words = LiveHTML(self._words_html(), **wide)

    # --- the race ---------------------------------------------------------------------------

    @batched
    def _lock(self, *_events) -> None:
        unlocked = self.state.prediction.unlocked
        for widget in (self.play, self.step, self.reset):
            widget.disabled = not unlocked
        for widget in self.setup_widgets:
            widget.disabled = self.state.setup_held
        set_object(self.status, self._status_html())

    def toggle(self) -> None:
        """Play or pause; refused (nothing moves) while the prediction is not unlocked."""
        if not self.state.prediction.unlocked:
            return
        self.playing = not self.playing and not self.state.finished
        self.play.label = "Pause" if self.playing else "Play"
        if self.playing and self._callback is None and pn.state.curdoc is not None:
            self._callback = pn.state.add_periodic_callback(self._tick, period=TICK_MS)

    def _schedule_one(self) -> None:
        if self.state.prediction.unlocked and not self.playing and pn.state.curdoc is not None:
            pn.state.execute(functools.partial(self.advance, 1))

    async def _tick(self) -> None:
        if self.playing:
            await self.advance()

    async def advance(self, steps: int | None = None) -> bool:
        """Ask the runner for the next slice of this page's race and show it; False when nothing moved."""
        s = self.state
        if self._busy or not s.prediction.unlocked or s.finished:
            return False
        self._busy = True
        try:
            if self.race_id is None or self._race_generation != s.generation:
                await self._start()
            generation = s.generation
            part = await runner().advance(self.race_id, steps)
        except RaceLost:
            self.race_id = None
            s.reset()  # clears the figures and the status, so the message comes after it
            self._message("The race's worker stopped; it starts again from step 0.")
            return False
        except ConfigError as error:
            self._message(str(error))
            self._pause()
            return False
        finally:
            self._busy = False
        if not s.record(generation, part):
            return False
        self._show(part)
        if s.finished:
            self._pause()
        return True

    async def _start(self) -> None:
        if self.race_id is not None:
            await runner().drop(self.race_id)
            self.race_id = None
        generation = self.state.generation
        self.race_id = await runner().start(self.state.spec)
        self._race_generation = generation

    def _pause(self) -> None:
        self.playing = False
        self.play.label = "Play"

    def restart(self) -> None:
        """Reset: the same set-up from step 0."""
        if self.state.prediction.unlocked:
            self._pause()
            self.state.reset()

    def close(self) -> None:
        """The page closed: stop asking, and free the race in its worker."""
        self.playing = False
        if self._callback is not None:
            self._callback.stop()
            self._callback = None
        if self.race_id is not None:
            race, self.race_id = self.race_id, None
            asyncio.ensure_future(runner().drop(race))

    # --- showing ----------------------------------------------------------------------------

    @batched
    def _show_sides(self, *_events) -> None:
        set_object(self.sides, self._sides_html())

    def _sides_html(self) -> str:
        a, b = self.state.side_names()
        return f'<p class="bt-muted">A is {escape(a)}; B is {escape(b)}. Everything else is the same.</p>'

    @batched
    def _new_setup(self, *_events) -> None:
        names = self._names()
        for fig in (self.loss_fig, self.accuracy_fig, self.depth_fig):
            for item, name in zip(fig.legend[0].items, names, strict=True):  # one item per side
                item.label = {"value": name}
        for source in (*self.loss_sources, *self.accuracy_sources):
            source.data = {key: [] for key in source.data}
        chance = task_data.make_task(self.state.task).chance_loss
        for line in self.loss_fig.select(type=Span):
            line.location = chance
        self.depth_source.data = {"depth": [], "a": [], "b": []}
        set_object(self.status, self._status_html())
        set_object(self.task_note, self._task_html())
        set_object(self.words, self._words_html())

    @batched
    def _show(self, part: Slice) -> None:
        """Stream what the slice added into the curves; the depth plot and the words show the latest step."""
        for source, records in zip(self.loss_sources, (part.a, part.b), strict=True):
            if records:
                source.stream(plots.loss_rows(records))
        for source, readings in zip(self.accuracy_sources, (part.held_out_a, part.held_out_b), strict=True):
            if readings:
                source.stream(plots.accuracy_rows(readings))
        self.depth_source.data = plots.depth_data(self.state)
        set_object(self.status, self._status_html())
        set_object(self.words, self._words_html())

    def _message(self, text: str) -> None:
        set_object(self.status, f'<p class="bt-field-error" role="alert">{escape(text)}</p>')

    def _task_html(self) -> str:
        task = task_data.make_task(self.state.task)
        return (f'<p class="bt-muted"><strong>{escape(task.title)}.</strong> {escape(task.needs)} '
                f"Guessing gives {100 * task.chance_accuracy:.1f} % (a loss of {task.chance_loss:.2f}).</p>")

    def _status_html(self) -> str:
        s = self.state
        if not s.prediction.unlocked:
            return '<p class="bt-live" role="status">Commit your prediction to start the race.</p>'
        steps = max(len(s.a.steps), len(s.b.steps))
        text = f"Step {steps} of {BUDGET}." if steps else "Ready: press Play, or One step."
        verdict = ""
        result = s.result()
        if result is not None:
            text = f"Decided after {steps} steps: {PREDICTION_CHOICES[result]}"
            if s.prediction.committed:
                right = s.prediction.choice == result
                verdict = (f'<p class="{"bt-ok" if right else "bt-bad"}">You predicted: '
                           f"{escape(PREDICTION_CHOICES[s.prediction.choice])} "
                           f"({'as it happened' if right else 'not what happened'}).</p>")
        return f'<p class="bt-live" role="status" aria-live="polite">{escape(text)}</p>{verdict}'

    def _words_html(self) -> str:
        items = "".join(f"<li>{escape(line)}</li>" for line in plots.race_sentences(self.state, self._names()))
        return f'<ul class="bt-alt">{items}</ul>'

    # --- layout -----------------------------------------------------------------------------

    def __panel__(self):
        controls = self.control_card(LiveHTML('<h2 class="bt-h2">The race</h2>', **styled()),
                                     self.task, (self.difference, self.sides), *self.setup_widgets[2:],
                                     (self.play, self.step, self.reset))
        gate = [self.gate] if self.show_gate else []
        left = pn.Column(*gate, controls, styles=self.side_styles(),
                         stylesheets=[] if self.embed else [STICKY_SIDE])
        right = pn.Column(self.task_note, self.status, self.loss_fig, self.accuracy_fig, self.depth_fig, self.words,
                          styles=self.main_styles("36rem"))
        head = [] if self.embed else [LiveHTML(f'<h1 class="bt-title">{TITLE}</h1><p class="bt-lead">{INTRO}</p>',
                                               **styled(sizing_mode="stretch_width"))]
        body = pn.FlexBox(left, right, flex_wrap="wrap", gap="1rem", sizing_mode="stretch_width")
        return pn.Column(*head, *self.notice_panes(), body, sizing_mode="stretch_width",
                         stylesheets=[READABLE_CONTROLS])
