"""The train-the-block page: set up a race, predict its winner, then play it and watch both models learn.

The race trains in the runner's worker processes (runner.py); this view asks for one slice at a time from
a periodic callback of its own session (Panel's `add_periodic_callback`, ended with the session), records
it in the state and streams the new rows into the figures' sources. The server decides: the race moves
only once the prediction is unlocked, a set-up committed to stays until the race has decided it, and a
closed page's race is dropped at once.
"""

from __future__ import annotations

import atexit
import io
import logging
from html import escape
from urllib.parse import urlencode

import numpy as np
import panel as pn
from bokeh.document import without_document_lock
from bokeh.models import Span

from blocktrace.explorables.components import trained_floors
from blocktrace.explorables.components.embed import state_query
from blocktrace.explorables.components.explorable import ExplorableView
from blocktrace.explorables.components.floor_diagram import DiagramPlace
from blocktrace.explorables.components.heatmap import heatmap_data, heatmap_figure, set_factors, token_factors
from blocktrace.explorables.components.html import alt_text
from blocktrace.explorables.components.page_layout import READABLE_CONTROLS, STICKY_SIDE, readable
from blocktrace.explorables.components.prediction import GATE_EVENTS, PredictionGate
from blocktrace.explorables.components.style import styled
from blocktrace.explorables.components.updates import LiveHTML, batched, set_object
from blocktrace.explorables.components.url_state import sync_to_url
from blocktrace.explorables.decoder_block_lab.state import QUERY_KEYS as LAB_KEYS
from blocktrace.explorables.decoder_block_lab.view import ROUTE as LAB_ROUTE
from blocktrace.explorables.engine import tasks as task_data
from blocktrace.explorables.engine.config import ConfigError
from blocktrace.explorables.engine.forward import block_keys
from blocktrace.explorables.train_the_block import files, inside, plots
from blocktrace.explorables.train_the_block.play_button import PlayButton
from blocktrace.explorables.train_the_block.runner import (
    EVALUATE_EVERY,
    EXAMPLES,
    Look,
    LookAt,
    RaceLost,
    RaceRunner,
    RaceSpec,
    Slice,
)
from blocktrace.explorables.train_the_block.state import (
    BUDGET,
    DIFFERENCES,
    FLOORS,
    QUERY_KEYS,
    RATES,
    TARGET_TEXT,
    WARMUPS,
    RaceState,
    outcome_sentence,
    verdict_sentence,
)

__all__ = ["RaceExplorable", "TITLE", "runner"]

log = logging.getLogger(__name__)

ROUTE = "/explorables/train-the-block"
TITLE = "Train the block: race two floors"
INTRO = ("Two models learn the same small task from the same examples, starting from the same weights, and "
         "differ in one design choice. Choose the task and the difference, say which you expect to reach "
         f"{TARGET_TEXT} accuracy on examples it never trained on first, then press Play.")
QUESTION = f"Which model will reach {TARGET_TEXT} held-out accuracy first?"
HINT = "A is the first side of the difference you chose, B the second; both are named above the answers."
NO_CURVES = ("Both loss curves, the held-out accuracy and the gradient reaching each floor are drawn here from "
             "the first step.")
LOOK_FIRST = "Take a step to look inside: the attention weights and stages of the models as they are now."
TWO_MAPS = ":host > * { flex: 1 1 18rem; }"  # A's and B's maps side by side where they fit, else one above the other
TICK_MS = 100  # how often a playing page asks for the next slice (at most one is in flight)
SPEEDS = {"Fast: as many steps as the server gives": 0, "Medium: at most 5 steps a tick": 5,
          "Slow: one step a tick": 1}  # steps asked for every TICK_MS (0: the server's slice)

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
        self.keep_going = False  # played on past the verdict (Keep training, or Play after it): no stop there
        self.race_id: int | None = None
        self._race_generation = -1
        self._busy = False  # a slice (or a look) is on its way: one at a time
        self.closed = False
        self._doc = pn.state.curdoc  # the page's document (None outside a server): slices are shown through it
        self._callback = None
        self.work_done = 0  # floor-steps this page has trained, over all its races (runner().session_work caps it)
        self.look: Look | None = None  # the latest look inside both models
        self._look_again = False  # a look was asked for while the race was busy
        self._ready: tuple | None = None  # the race's first step, taken before Play and not shown yet (_prepare)
        self._one_waiting = False  # One step was pressed while the worker was busy: it is taken next
        self._build_widgets()
        self._build_views()
        state.param.watch(self._new_setup, ["generation"])
        state.param.watch(self._show_sides, ["difference", "floors", "lr", "warmup"])
        state.prediction.param.watch(self._lock, GATE_EVENTS)
        state.param.watch(self._lock, ["predicted_setup", "decided", "difference"])
        sync_to_url(state, QUERY_KEYS)
        if pn.state.curdoc is not None and pn.state.curdoc.session_context is not None:
            pn.state.on_session_destroyed(lambda _context: self.close())
            runner().warm()  # the workers start while the student reads, not when they press Play
        self._lock()

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
        self.warmup = pn.widgets.Select.from_param(
            s.param.warmup, label="Warm-up (both models)",
            options={"none": 0, **{f"{w} steps": w for w in WARMUPS if w}}, sizing_mode="stretch_width")
        self.seed = pn.widgets.IntInput.from_param(s.param.seed, label="Seed (weights and data)",
                                                   sizing_mode="stretch_width")
        self.play = PlayButton()  # says Pause while playing, and keeps the keyboard's focus (play_button.py)
        self.step = pn.widgets.Button(label="One step")
        self.reset = pn.widgets.Button(label="Reset")
        # Beside the verdict, once the race has stopped there: the same race plays on, within the same limits
        self.keep = pn.widgets.Button(label="Keep training", color="primary", visible=False)
        self.keep.on_click(lambda _: self.keep_training())
        self.speed = pn.widgets.Select(label="Speed", options=SPEEDS, value=0, sizing_mode="stretch_width")
        self.play.param.watch(self._play_pressed, ["value"])
        self.step.on_click(lambda _: self._schedule_one())
        self.reset.on_click(lambda _: self.restart())
        self.setup_widgets = [self.task, self.difference, self.floors, self.lr, self.warmup, self.seed]
        # Looking inside: which held-out example, which floor and head; whose stages the table shows
        self.example = pn.widgets.Select(label="Example", options={f"Example {i + 1}": i for i in range(EXAMPLES)},
                                         value=0, sizing_mode="stretch_width")
        self.look_floor = pn.widgets.Select(label="Floor", options=self._floor_options(), value=0,
                                            sizing_mode="stretch_width")
        self.head = pn.widgets.Select(label="Head", options=self._head_options(), value=0,
                                      sizing_mode="stretch_width")
        self.table_side = pn.widgets.Select(label="Stage table of", options={"A": "a", "B": "b"}, value="a",
                                            sizing_mode="stretch_width")
        self.look_widgets = [self.example, self.look_floor, self.head, self.table_side]
        for widget in self.look_widgets[:2]:
            widget.param.watch(lambda _event: self._ask_look(), ["value"])
        self.look_floor.param.watch(lambda _event: self.look is None and self._show_diagram(), ["value"])
        for widget in self.look_widgets[2:]:
            widget.param.watch(lambda _event: self._show_look(), ["value"])
        self.respond_quickly([*self.setup_widgets, self.speed, *self.look_widgets])
        readable([*self.setup_widgets, self.speed, *self.look_widgets])

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
        self.curve_figs = (self.loss_fig, self.accuracy_fig, self.depth_fig)
        wide = styled(sizing_mode="stretch_width")
        self.no_curves = LiveHTML(f'<p class="bt-muted bt-placeholder">{NO_CURVES}</p>', **wide)
        self._curves_shown(False)
        self.status = LiveHTML(self._status_html(), **wide)
        self.progress = LiveHTML("", **wide)
        self.task_note = LiveHTML(self._task_html(), **wide)
        self.sides = LiveHTML(self._sides_html(), **wide)
        self.words = LiveHTML(self._words_html(), **wide)
        # inside the models: both heatmaps are built once, on the example's own tokens, and filled by each look
        tokens = token_factors(self._example_tokens())
        empty = heatmap_data(np.zeros((len(tokens), len(tokens))), tokens, tokens)
        self.maps, self.map_sources = zip(*(heatmap_figure(f"{name}: attention weights", dict(empty), tokens, tokens,
                                                           height=300) for name in names), strict=True)
        for fig in self.maps:  # up to 16 × 16 cells: colour only (darker is more weight), the numbers on hover
            for renderer in fig.renderers[1:]:  # the cells' printed values
                renderer.visible = False
        self.look_note = LiveHTML(f'<p class="bt-muted">{LOOK_FIRST}</p>', **wide)
        self.picked = "attn.pattern"  # the stage marked in the diagram and the table (a local key)
        self.diagram = DiagramPlace(self._pick)
        self._show_diagram()
        self.answers = LiveHTML("", **wide)
        self.stage_table = LiveHTML("", **wide)
        self.maps_alt = LiveHTML("", **wide)
        self.curves_file = pn.widgets.FileDownload(filename="race-curves.csv", label="Curves (CSV)", color="light",
                                                   embed=False, callback=self._curves_file)
        self.weights_file = pn.widgets.FileDownload(filename="race-weights.json", label="Weights (JSON)",
                                                    color="light", embed=False, callback=self._weights_file)
        self.to_lab = pn.widgets.Button(label="Open this floor in the decoder lab", color="light")
        self.to_lab.on_click(self._open_in_lab)
        self.lab_link = LiveHTML("", **wide)
        self._kept = 0  # floors this page has kept for the lab

    # --- the race ---------------------------------------------------------------------------

    @batched
    def _lock(self, *_events) -> None:
        unlocked = self.state.prediction.unlocked
        for widget in (self.play, self.step, self.reset):
            widget.disabled = not unlocked
        for widget in self.setup_widgets:
            widget.disabled = self.state.setup_held
        if self.state.difference == "warmup":  # each side has its own warm-up then
            self.warmup.disabled = True
        self._curves_shown(bool(self.state.a.steps or self.state.b.steps))
        self._show_status()
        self._prepare()

    def _play_pressed(self, event) -> None:
        if event.new != self.playing:
            self.toggle()

    def toggle(self) -> None:
        """Play or pause; refused (nothing moves, the button is set back) while the prediction is not unlocked.
        Playing after the race is decided plays on past the verdict. The first slice is asked for at once, not at
        the next tick."""
        s = self.state
        if s.prediction.unlocked:
            self.playing = not self.playing and not s.finished
        if self.playing and s.result() is not None:
            self.keep_going = True
        if self.play.value != self.playing:
            self.play.value = self.playing
        if self.playing and self._doc is not None:
            if self._callback is None:
                self._callback = pn.state.add_periodic_callback(self._tick, period=TICK_MS)
            self._tick()
        self._show_status()

    def keep_training(self) -> None:
        """The race stopped at its verdict: play the same race on, from where it stopped (up to BUDGET steps and
        within the page's share of work, as any slice)."""
        if not self.playing:
            self.toggle()

    def _schedule_one(self) -> None:
        if self.state.prediction.unlocked and not self.playing and self._doc is not None:
            if self._busy:  # taken as soon as the worker is free (e.g. right after the commit's first step)
                self._one_waiting = True
            else:
                self._run_unlocked(1)

    def _tick(self) -> None:
        if self.playing:
            self._run_unlocked(None)

    def _cost(self) -> int:
        """Floor-steps one step of this race costs: a step of an n-floor model counts n."""
        spec = self.state.spec
        return spec.config_a.n_layers + spec.config_b.n_layers

    async def advance(self, steps: int | None = None) -> bool:
        """Ask the runner for the next slice of this page's race and show it; False when nothing moved.

        At most `steps` steps (None: the speed chosen), and never past the page's share of work. A first step
        taken ahead (prepare) is shown first, without asking. The served page runs the same parts with the wait
        for the worker outside the document's lock (_run_unlocked)."""
        ready = self._take_ready()
        if ready is not None:
            return self._apply(ready)
        asked = self._ask(steps)
        return asked is not None and self._apply(await self._fetch(*asked))

    async def prepare(self) -> None:
        """Build the race and take its first step without showing it (the served page does this by itself as
        soon as the race may run: see _prepare)."""
        asked = self._ask_first()
        if asked is not None:
            self._keep(await self._fetch(*asked))

    def _run_unlocked(self, steps: int | None) -> None:
        """From a callback of the page (which holds its document's lock): show the first step if it was taken
        ahead; else ask for a slice now, wait for the worker outside the lock, then show the slice in a callback
        of its own. Bokeh holds a session's lock for the whole of a coroutine callback, awaits included, so
        waiting inside one kept the student's own clicks (Pause among them) waiting behind slice after slice on a
        busy machine."""
        ready = self._take_ready()
        if ready is not None:
            self._apply(ready)
            return
        asked = self._ask(steps)
        if asked is not None:
            self._wait_then_show(lambda: self._fetch(*asked), self._apply)

    def _prepare(self) -> None:
        """As soon as the race may run (the commit, a new set-up or a reset once committed), build it in its worker
        and take its first step, held here: Play (or One step) then shows that step at once instead of waiting
        for a worker's start, the race's build and a step, each slow on a busy server (issue 38: 2.4-5 s). None
        of it is shown, or sent to the page, before Play or One step; and nothing runs before the commit."""
        if self._doc is None:
            return
        asked = self._ask_first()
        if asked is not None:
            self._wait_then_show(lambda: self._fetch(*asked), self._keep)

    def _ask_first(self) -> tuple[int, int, LookAt] | None:
        """The first step of a race not built yet, or None when there is nothing to prepare."""
        s = self.state
        built = self.race_id is not None and self._race_generation == s.generation
        if self._ready is not None or s.a.steps or s.b.steps or built:
            return None
        return self._ask(1, quiet=True)

    def _keep(self, outcome: tuple) -> None:
        """The first step, taken ahead: kept until Play or One step shows it (at once if either was pressed
        meanwhile). A step of an older set-up is replaced by one of the new; after a refusal (the server's races
        are full) or a lost worker nothing is tried again until Play, which then says why if it must."""
        self._busy = False
        if outcome[0] == "slice" and outcome[1] == self.state.generation:
            self._ready = outcome
            if self.playing or self._one_waiting:
                self._one_waiting = False
                self._apply(self._take_ready())
            return
        if outcome[0] == "lost":
            self.race_id = None
        if self._one_waiting:
            self._one_waiting = False
            self._schedule_one()
        elif outcome[0] == "slice":
            self._prepare()  # the set-up changed meanwhile

    def _take_ready(self) -> tuple | None:
        ready, self._ready = self._ready, None
        return ready

    def _free(self) -> None:
        """The worker is free again: take a step asked for meanwhile, or prepare a race not built yet."""
        if self._one_waiting:
            self._one_waiting = False
            self._schedule_one()
        else:
            self._prepare()

    def _wait_then_show(self, wait, show) -> None:
        """Await `wait()` on the server's loop without the document's lock (Bokeh's without_document_lock), then
        call `show` with its result in a locked callback of the page. Scheduled through the document, which is
        safe from any thread (Bokeh 3.10 runs callbacks on threads)."""
        doc = self._doc

        @without_document_lock
        async def wait_then_show() -> None:
            result = await wait()
            if not self.closed:
                doc.add_next_tick_callback(lambda: show(result))

        doc.add_next_tick_callback(wait_then_show)

    def _ask(self, steps: int | None, quiet: bool = False) -> tuple[int, int, LookAt] | None:
        """What the next slice may be (steps, the race's generation, what to look at), or None when nothing may
        move now; marks the page busy until the slice is shown. `quiet`: a page out of its share says nothing."""
        s = self.state
        if self._busy or not s.prediction.unlocked or s.finished or self.closed:
            return None
        if steps is None:
            steps = self.speed.value if self.speed.value in SPEEDS.values() and self.speed.value else None
        left = (runner().session_work - self.work_done) // self._cost()
        if left < 1:
            if not quiet:
                self._pause()
                self._message(f"This page has trained as much as one page may ({self.work_done:,} floor-steps). "
                              "Open the page again to race more.")
            return None
        left = min(left, BUDGET - max(len(s.a.steps), len(s.b.steps)))  # the race ends at BUDGET steps
        self._busy = True
        always, self._look_again = self.look is None or self._look_again, False
        return min(runner().slice_steps if steps is None else steps, left), s.generation, self._look_at(always)

    async def _fetch(self, steps: int, generation: int, look: LookAt) -> tuple:
        """The worker's part, touching no model of the page: ("slice", generation, Slice), ("lost",) or
        ("refused", message)."""
        spec = self.state.spec
        try:
            if self.race_id is None or self._race_generation != generation:
                await self._start(spec, generation)
            part = await runner().advance(self.race_id, steps, look)
        except RaceLost:
            return ("lost",)
        except ConfigError as error:
            return ("refused", str(error))
        self.work_done += len(part.a) * spec.config_a.n_layers + len(part.b) * spec.config_b.n_layers
        return ("slice", generation, part)

    def _apply(self, outcome: tuple) -> bool:
        """Show what the worker did; True when the race moved."""
        self._busy = False
        moved = self._show_outcome(outcome)
        self._free()
        return moved

    def _show_outcome(self, outcome: tuple) -> bool:
        s = self.state
        if outcome[0] == "lost":
            self.race_id = None
            s.reset()  # clears the figures and the status, so the message comes after it
            self._message("The race's worker stopped; it starts again from step 0.")
            return False
        if outcome[0] == "refused":
            self._pause()  # first: the status it writes would replace the message
            self._message(outcome[1])
            return False
        _, generation, part = outcome
        if not s.record(generation, part):
            return False
        self._show(part)
        if part.look is not None:
            self.look = part.look
            self._show_look()
        if s.finished:
            self._pause()
        elif self.playing and not self.keep_going and s.result() is not None:
            self._pause()  # stopped at the verdict: Keep training plays the same race on
        return True

    def _look_at(self, always: bool) -> LookAt:
        """The example and floor picked (a value no menu offers, as a crafted message might send, counts as the
        first)."""
        example = self.example.value if self.example.value in range(EXAMPLES) else 0
        floor = self.look_floor.value if self.look_floor.value in self._floor_options().values() else 0
        return LookAt(example, floor, always)

    def _ask_look(self) -> None:
        """A new example or floor: look again, now if the race is idle (waiting for the worker outside the
        document's lock, as _run_unlocked does), else with its next slice."""
        if self.race_id is None or self.look is None:
            return
        if self._busy or self._doc is None:
            self._look_again = True
            return
        self._busy = True
        self._wait_then_show(self._fetch_look, self._apply_look)

    async def _look_now(self) -> None:
        """Look inside both models as they are now, and show it (the served page does the two apart)."""
        if self._busy or self.race_id is None:
            self._look_again = True
            return
        self._busy = True
        self._apply_look(await self._fetch_look())

    async def _fetch_look(self) -> tuple[int, Look | None]:
        generation = self.state.generation
        try:
            return generation, await runner().look(self.race_id, self._look_at(True))
        except (RaceLost, ConfigError):
            return generation, None

    def _apply_look(self, fetched: tuple[int, Look | None]) -> None:
        self._busy = False
        generation, look = fetched
        if look is not None and generation == self.state.generation:
            self.look = look
            self._show_look()
        self._free()

    async def _start(self, spec: RaceSpec, generation: int) -> None:
        # The page's hold on the race of this set-up (shared with every page that plays it), from step 0; the old
        # hold goes, its computed steps kept when the set-up is the same (a reset).
        old, self.race_id = self.race_id, None
        race = await runner().start(spec, replacing=old)
        if self.closed:  # the page closed while the race was being built
            await runner().drop(race)
            raise RaceLost("the page closed")
        self.race_id, self._race_generation = race, generation

    def _pause(self) -> None:
        self.playing = False
        if self.play.value:
            self.play.value = False
        self._show_status()

    def restart(self) -> None:
        """Reset: the same set-up from step 0."""
        if self.state.prediction.unlocked:
            self._pause()
            self.state.reset()

    def close(self) -> None:
        """The page closed: stop asking, and free the race in its worker."""
        self.playing, self.closed = False, True
        if self._callback is not None:
            self._callback.stop()
            self._callback = None
        if self.race_id is not None:
            race, self.race_id = self.race_id, None
            runner().forget(race)

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
        self._curves_shown(False)
        self.look, self._look_again = None, False
        self.keep_going, self._ready = False, None  # a new race: it stops at its own verdict
        self.look_floor.options = floors = self._floor_options()
        if self.look_floor.value not in floors.values():
            self.look_floor.value = 0
        self.head.options = self._head_options()
        tokens = token_factors(self._example_tokens())
        for fig, source, name in zip(self.maps, self.map_sources, names, strict=True):
            set_factors(fig, tokens, tokens)
            source.data = heatmap_data(np.zeros((len(tokens), len(tokens))), tokens, tokens)
            fig.title.text = f"{name}: attention weights"
        for pane in (self.answers, self.stage_table, self.maps_alt):
            set_object(pane, "")
        self._show_diagram()
        set_object(self.look_note, f'<p class="bt-muted">{LOOK_FIRST}</p>')
        self._show_status()
        set_object(self.progress, self._progress_html())
        set_object(self.task_note, self._task_html())
        set_object(self.words, self._words_html())
        self._prepare()

    def _curves_shown(self, shown: bool) -> None:
        """The figures once there is something to draw (empty, Bokeh draws neither axes nor grid); a line in their
        place until then. Once the race may run, the figures are laid out in their places but not shown (their
        space kept, under the line that says they are drawn there), so the first step only fills and uncovers
        them: laying three figures out took the browser most of a second on a busy machine (issue 38), now spent
        while the student reads rather than after Play. Uncovering is a change of style, which BokehJS applies
        without laying the page out again."""
        placed = shown or self.state.prediction.unlocked
        for fig in self.curve_figs:
            if fig.visible != placed:
                fig.visible = placed
            styles = {"visibility": None if shown else "hidden"}  # None: BokehJS removes the property
            if dict(fig.styles) != styles:
                fig.styles = styles
        line = {"display": "none" if shown else None}
        if dict(self.no_curves.styles) != line:
            self.no_curves.styles = line

    @batched
    def _show(self, part: Slice) -> None:
        """Stream what the slice added into the curves; the depth plot and the words show the latest step."""
        self._curves_shown(True)
        for source, records in zip(self.loss_sources, (part.a, part.b), strict=True):
            if records:
                source.stream(plots.loss_rows(records))
        for source, readings in zip(self.accuracy_sources, (part.held_out_a, part.held_out_b), strict=True):
            if readings:
                source.stream(plots.accuracy_rows(readings))
        self.depth_source.data = plots.depth_data(self.state)
        self._show_status()
        set_object(self.progress, self._progress_html())
        set_object(self.words, self._words_html())

    # --- inside the models ---------------------------------------------------------------------

    def _floor_options(self) -> dict[str, int]:
        spec = self.state.spec
        return {f"Floor {i + 1}": i for i in range(max(spec.config_a.n_layers, spec.config_b.n_layers))}

    def _head_options(self) -> dict[str, int]:
        return {f"Head {h + 1}": h for h in range(self.state.spec.config_a.n_heads)}

    def _example_tokens(self) -> list[str]:
        task = task_data.make_task(self.state.task)
        return [task.vocab[t] for t in self.state.example_tokens(self._look_at(False).example)]

    @batched
    def _show_look(self) -> None:
        """The latest look: both heatmaps, the answers, the chosen model's stage table and the words."""
        look = self.look
        if look is None:
            self._show_diagram()
            return
        vocab = task_data.make_task(self.state.task).vocab
        tokens = [vocab[t] for t in look.tokens]
        factors = token_factors(tokens)
        names = self._names()
        floor = look.floor
        head = self.head.value if self.head.value in self._head_options().values() else 0
        sentences = []
        for fig, source, side, name in zip(self.maps, self.map_sources, (look.a, look.b), names, strict=True):
            set_factors(fig, factors, factors)
            source.data = heatmap_data(inside.pattern_of(side, head, len(tokens)), factors,
                                                             factors)
            there = side.pattern is not None
            fig.title.text = (f"{name}: floor {floor + 1}, head {head + 1}, step {side.steps}" if there
                              else f"{name}: no floor {floor + 1}")
            sentences += inside.attention_sentences(side, name, floor, head, tokens)
        set_object(self.answers, inside.answers_html(look, vocab, names))
        which = self._table_side()
        side = (look.a, look.b)[which]
        position = int(np.flatnonzero(look.scored)[-1])
        set_object(self.stage_table, inside.stage_table_html(side, names[which], floor, position, tokens[position],
                                                             self.picked))
        self._show_diagram()
        set_object(self.maps_alt, alt_text("Attention weights", sentences))
        set_object(self.look_note, '<p class="bt-muted">A held-out example: neither model ever trains on it. In the '
                                   "maps, a darker cell is more weight (hover a cell for its value, or open the words "
                                   "under them); the maps, answers and table follow the models every "
                                   f"{EVALUATE_EVERY} steps.</p>")

    def _table_side(self) -> int:
        return 1 if self.table_side.value == "b" else 0

    def _show_diagram(self) -> None:
        """The diagram of the table's model and floor: named only before the first look, its RMS after."""
        which = self._table_side()
        floor = self._look_at(False).floor if self.look is None else self.look.floor
        spec = self.state.spec
        config = (spec.config_a, spec.config_b)[which]
        side = None if self.look is None else (self.look.a, self.look.b)[which]
        for pane in self.diagram.panes:
            pane.visible = floor < config.n_layers
        if floor >= config.n_layers:
            return
        position = 0 if self.look is None else int(np.flatnonzero(self.look.scored)[-1])
        self.diagram.show(lambda: inside.diagram_view(side, self._names()[which], config, floor, position,
                                                      self.picked))

    def _pick(self, key: str) -> None:
        """A stage chosen in the diagram: marked there and in the table."""
        local = key.split(".", 2)[-1]
        if local in block_keys(self.state.spec.config_a) and self.look is not None:
            self.picked = local
            self._show_look()

    # --- downloads ------------------------------------------------------------------------------

    def _curves_file(self) -> io.BytesIO:
        return io.BytesIO(files.curves_csv(self.state).encode("utf-8"))

    async def _weights_file(self) -> io.BytesIO | None:
        """Both models' weights as they are now: asked of the race's worker (nothing before the race starts)."""
        if self.race_id is None:
            self._message("Take a step first: the weights are those of the race as it stands.")
            return None
        try:
            weights = await runner().weights(self.race_id)
        except RaceLost:
            return None
        return io.BytesIO(files.weights_json(self.state, weights).encode("utf-8"))

    async def _open_in_lab(self, _event) -> None:
        """Keep the table's model and floor as they are now (components/trained_floors.py) and offer the link
        that opens it in the decoder lab, in a new tab (a link the student follows, never a pop-up)."""
        which, floor = self._table_side(), self._look_at(False).floor
        config = (self.state.spec.config_a, self.state.spec.config_b)[which]
        name = self.state.side_names()[which]
        if self.race_id is None:
            set_object(self.lab_link, '<p class="bt-field-error" role="alert">Take a step first: the lab opens the '
                                      "floor's weights as the race has trained them.</p>")
            return
        if floor >= config.n_layers:
            set_object(self.lab_link, f'<p class="bt-field-error" role="alert">{escape(name)} has no floor '
                                      f"{floor + 1}.</p>")
            return
        if self._kept >= trained_floors.PER_PAGE:
            set_object(self.lab_link, '<p class="bt-field-error" role="alert">This page has opened '
                                      f"{trained_floors.PER_PAGE} floors, as many as one page may: the links "
                                      "already given still work.</p>")
            return
        self._kept += 1
        example = self.example.value if self.example.value in range(EXAMPLES) else 0
        try:
            cut = await runner().cut_floor(self.race_id, which, floor, example)
        except RaceLost:
            return
        race = f"{ROUTE}?{urlencode(state_query(self.state, QUERY_KEYS))}"
        key = trained_floors.keep(trained_floors.TrainedFloor(cut, name, floor, config.n_layers, race))
        query = {"run": key, "placement": config.placement, "residual": config.residual,
                 "causal": LAB_KEYS["causal"].write(config.causal), "B": 1,
                 "T": min(cut.inputs.shape[1], trained_floors.MAX_POSITIONS)}
        text = f"Open floor {floor + 1} of {name}, as trained for {cut.steps:,} steps, in the decoder lab"
        set_object(self.lab_link, f'<p><a href="{LAB_ROUTE}?{escape(urlencode(query))}" target="_blank" '
                                  f'rel="noopener">{escape(text)}</a> (a new tab). The link keeps these weights '
                                  "while the server runs; share it with your class if you like.</p>")

    def _message(self, text: str) -> None:
        set_object(self.status, f'<p class="bt-field-error" role="alert">{escape(text)}</p>')

    def _task_html(self) -> str:
        task = task_data.make_task(self.state.task)
        return (f'<p class="bt-muted"><strong>{escape(task.title)}.</strong> {escape(task.needs)} '
                f"Guessing gives {100 * task.chance_accuracy:.1f} % (a loss of {task.chance_loss:.2f}).</p>")

    def _show_status(self) -> None:
        """The status line and the verdict; Keep training beside them while the race stands stopped at its
        verdict."""
        set_object(self.status, self._status_html())
        s = self.state
        stopped = s.prediction.unlocked and not self.playing and not s.finished and s.result() is not None
        if self.keep.visible != stopped:
            self.keep.visible = stopped

    def _status_html(self) -> str:
        """What the race is doing, read out by screen readers when it changes (so never the step count, which
        changes with every slice: that is the progress line), what happened once it is decided, and the
        prediction against it."""
        s = self.state
        if not s.prediction.unlocked:
            return '<p class="bt-live" role="status">Commit your prediction to start the race.</p>'
        steps = max(len(s.a.steps), len(s.b.steps))
        result = s.result()
        if s.finished:
            text = f"Both models have stopped (each stops after {BUDGET:,} steps, or when its numbers blow up)."
        elif self.playing:
            text = "Playing."
        elif result is not None:
            text = f"The race stopped here: Keep training to watch both models go on, up to {BUDGET:,} steps."
        else:
            text = "Paused." if steps else "Ready: press Play, or One step."
        verdict = ""
        if result is not None:  # what happened first, then what the race is doing
            happened = outcome_sentence(result, s.side_names(), (s.a.reached, s.b.reached),
                                        (not s.a.running, not s.b.running))
            text = f"Decided: {happened} {text}"
            if s.prediction.committed:
                right = s.prediction.choice == result
                verdict = (f'<p class="{"bt-ok" if right else "bt-bad"}">'
                           f"{escape(verdict_sentence(s.prediction.choice, result))}</p>")
        return f'<p class="bt-live" role="status" aria-live="polite">{escape(text)}</p>{verdict}'

    def _progress_html(self) -> str:
        s = self.state
        steps = max(len(s.a.steps), len(s.b.steps))
        return f'<p class="bt-muted">Step {steps:,} of {BUDGET:,}.</p>' if steps else ""

    def _words_html(self) -> str:
        items = "".join(f"<li>{escape(line)}</li>" for line in plots.race_sentences(self.state, self._names()))
        return f'<ul class="bt-alt">{items}</ul>'

    # --- layout -----------------------------------------------------------------------------

    def __panel__(self):
        controls = self.control_card(LiveHTML('<h2 class="bt-h2">The race</h2>', **styled()),
                                     self.task, (self.difference, self.sides), *self.setup_widgets[2:],
                                     (self.play, self.step, self.reset), self.speed)
        gate = [self.gate] if self.show_gate else []
        left = pn.Column(*gate, controls, styles=self.side_styles(),
                         stylesheets=[] if self.embed else [STICKY_SIDE])
        look = pn.Column(LiveHTML('<h2 class="bt-h2">Inside the two models</h2>', **styled()), self.look_note,
                         pn.GridBox(*self.look_widgets, ncols=2, sizing_mode="stretch_width"),
                         self.answers, pn.FlexBox(*self.maps, flex_wrap="wrap", gap="1rem",
                                                  sizing_mode="stretch_width", stylesheets=[TWO_MAPS]),
                         self.maps_alt, *self.diagram.panes, self.stage_table, sizing_mode="stretch_width")
        saved = pn.Column(LiveHTML('<h2 class="bt-h2">Take it with you</h2><p class="bt-muted">The curves as a '
                                   "table, and both models' weights as they are now. Each plot's toolbar saves it "
                                   "as a picture.</p>", **styled(sizing_mode="stretch_width")),
                          pn.FlexBox(self.curves_file, self.weights_file, flex_wrap="wrap"),
                          LiveHTML('<p class="bt-muted">The floor the stage table shows, as trained so far, in the '
                                   "decoder lab: every stage, the causal test and the failure modes on these "
                                   "weights.</p>", **styled(sizing_mode="stretch_width")),
                          self.to_lab, self.lab_link,
                          sizing_mode="stretch_width")
        right = pn.Column(self.task_note, self.status, self.keep, self.progress, self.no_curves, *self.curve_figs,
                          self.words, look, saved, styles=self.main_styles("36rem"))
        head = [] if self.embed else [LiveHTML(f'<h1 class="bt-title">{TITLE}</h1><p class="bt-lead">{INTRO}</p>',
                                               **styled(sizing_mode="stretch_width"))]
        body = pn.FlexBox(left, right, flex_wrap="wrap", gap="1rem", sizing_mode="stretch_width")
        return pn.Column(*head, *self.notice_panes(), body, sizing_mode="stretch_width",
                         stylesheets=[READABLE_CONTROLS])
