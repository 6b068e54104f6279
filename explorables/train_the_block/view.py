"""The train-the-block page: set up a race, predict its winner, then play it and watch both models learn.

The race trains in the runner's worker processes (runner.py); this view asks for one slice at a time from
a periodic callback of its own session (Panel's `add_periodic_callback`, ended with the session) and records
it in the state. One component draws the controls, the curves and the look inside the models in the browser
(components/drawn_view/train_the_block.js) from one payload per change or slice (payload.py); the question, the
floor diagram, the downloads and the link to the lab stay Panel's.

The server decides: every change the browser sends is checked here (a known control, the set-up not held, the
parameter's own bounds and choices) and answered with the payload as it then is, so a refused one puts the
browser's input back; the race moves only once the prediction is unlocked, a set-up committed to stays until the
race has decided it, and a closed page's race is dropped at once.
"""

from __future__ import annotations

import atexit
import io
import json
import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from html import escape
from typing import Any
from urllib.parse import urlencode

import numpy as np
import panel as pn
import param
from bokeh.document import without_document_lock

from blocktrace.explorables.components import trained_floors
from blocktrace.explorables.components.drawn_view import DrawnView, json_text, spec_json
from blocktrace.explorables.components.drawn_view.answering import AnswersTheDrawing
from blocktrace.explorables.components.embed import state_query
from blocktrace.explorables.components.explorable import ExplorableView
from blocktrace.explorables.components.figures import DrawnAfterLoad
from blocktrace.explorables.components.floor_diagram import DiagramPlace
from blocktrace.explorables.components.page_layout import READABLE_CONTROLS
from blocktrace.explorables.components.prediction import GATE_EVENTS, PredictionGate
from blocktrace.explorables.components.style import dark, styled
from blocktrace.explorables.components.updates import LiveHTML, set_object
from blocktrace.explorables.components.url_state import sync_to_url
from blocktrace.explorables.decoder_block_lab.state import QUERY_KEYS as LAB_KEYS
from blocktrace.explorables.decoder_block_lab.view import ROUTE as LAB_ROUTE
from blocktrace.explorables.engine import tasks as task_data
from blocktrace.explorables.engine.config import ConfigError
from blocktrace.explorables.engine.forward import block_keys
from blocktrace.explorables.train_the_block import files, inside, plots
from blocktrace.explorables.train_the_block.payload import DrawnLook, PageFacts, names, payload
from blocktrace.explorables.train_the_block.runner import (
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
    SETUP_PARAMS,
    TARGET_TEXT,
    WARMUPS,
    RaceState,
)

__all__ = ["ACTIONS", "LookChoices", "RaceDrawing", "RaceExplorable", "TITLE", "controls_spec", "runner"]

log = logging.getLogger(__name__)

ROUTE = "/explorables/train-the-block"
TITLE = "Train the block: race two floors"
INTRO = ("Two models learn the same small task from the same examples, starting from the same weights, and "
         "differ in one design choice. Choose the task and the difference, say which you expect to reach "
         f"{TARGET_TEXT} accuracy on examples it never trained on first, then press Play.")
QUESTION = f"Which model will reach {TARGET_TEXT} held-out accuracy first?"
HINT = "A is the first side of the difference you chose, B the second; both are named above the answers."
TICK_MS = 100  # how often a playing page asks for the next slice (at most one is in flight)
SPEEDS = {"Fast: as many steps as the server gives": 0, "Medium: at most 5 steps a tick": 5,
          "Slow: one step a tick": 1}  # steps asked for every TICK_MS (0: the server's slice)
ACTIONS = {"play": "Play", "step": "One step", "reset": "Reset", "keep": "Keep training"}
CHOICES = ("speed", "example", "floor", "head", "table")  # the page's own choices (LookChoices), not the race's
SEED_TEXT = re.compile(r"\s*\d{1,6}\s*")
MAX_SEED = RaceState.param.seed.bounds[1]


class LookChoices(param.Parameterized):
    """What this page asks of the race besides its set-up: how fast it plays, and what it looks at inside."""

    speed = param.Selector(default=0, objects=list(SPEEDS.values()), doc="Steps asked for a tick (0: the server's).")
    example = param.Integer(default=0, bounds=(0, EXAMPLES - 1), doc="The held-out example looked inside.")
    floor = param.Integer(default=0, bounds=(0, max(FLOORS) - 1), doc="The floor looked inside (from 0).")
    head = param.Integer(default=0, bounds=(0, None), doc="The head whose weights the maps show (from 0).")
    table = param.Selector(default="a", objects=["a", "b"], doc="Whose stages the table and the diagram show.")


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


def controls_spec(embed: bool = False) -> list[dict]:
    """The controls the browser draws, in their focus order: the race's card (`group: "race"`), Keep training beside
    the status (`"keep"`), and what to look at inside the models (`"look"`)."""
    def select(name, label, options, group="race"):
        return {"name": name, "kind": "select", "label": label, "options": [[k, v] for k, v in options.items()],
                "group": group}

    race = [
        select("task", "Task", {task_data.make_task(t).title: t for t in task_data.TASKS}),
        select("difference", "The one difference", {d.label: key for key, d in DIFFERENCES.items()}),
        select("floors", "Floors in each model", {str(f): f for f in FLOORS}),
        select("lr", "Learning rate (Adam)", {f"{r:g}": r for r in RATES}),
        select("warmup", "Warm-up (both models)", {"none": 0, **{f"{w} steps": w for w in WARMUPS if w}}),
        {"name": "seed", "kind": "text", "label": "Seed (weights and data)", "hint": f"0 to {MAX_SEED:,}; press Enter",
         "group": "race"},
        *({"name": name, "kind": "button", "label": ACTIONS[name], "group": "race", "row": "play"}
          for name in ("play", "step", "reset")),
        select("speed", "Speed", SPEEDS),
    ]
    keep = [{"name": "keep", "kind": "button", "label": ACTIONS["keep"], "group": "keep"}]
    look = [select("example", "Example", {f"Example {i + 1}": i for i in range(EXAMPLES)}, "look"),
            {"name": "floor", "kind": "select", "label": "Floor", "options": [], "group": "look"},
            {"name": "head", "kind": "select", "label": "Head", "options": [], "group": "look"},
            select("table", "Stage table of", {"A": "a", "B": "b"}, "look")]
    return [*race, *keep, *look]


def _spec(embed: bool) -> str:
    """The shared spec and each side's colour (plots.SIDE_SERIES) and dash."""
    spec = json.loads(spec_json(controls_spec(embed), embed))
    spec["sides"] = [{"series": s, "dash": d} for s, d in zip(plots.SIDE_SERIES, ("", "6 4"), strict=True)]
    return json_text(spec)


class RaceDrawing(DrawnView):
    """The race's controls, curves and the look inside its models, drawn by train_the_block.js."""

    _scripts = DrawnView.scripts_for("train_the_block.js", "trainTheBlock")
    _css = "train_the_block.css"


class RaceExplorable(AnswersTheDrawing, ExplorableView):
    """One session's race: its own state, drawing, diagram and race in the runner."""

    CONTROLS = SETUP_PARAMS
    ACTIONS = ACTIONS

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
        self._drawn_look = DrawnLook()  # that look as the payload drew it: drawn again only when it changes
        self._look_again = False  # a look was asked for while the race was busy
        self._look_trails = False  # the look shows an earlier step than the curves (a kept race, recomputed)
        self._ready: tuple | None = None  # the race's first step, taken before Play and not shown yet (_prepare)
        self._one_waiting = False  # One step was pressed while the worker was busy: it is taken next
        self._alert = ""  # a message shown in the status's place until the status next changes
        self._seed_error = ""  # the seed field's message, until a seed is taken
        self._dark = dark()  # the session's theme, read while its config is at hand (slices arrive from the loop)
        self.choices = LookChoices()
        self.picked = "attn.pattern"  # the stage marked in the diagram and the table (a local key)
        self._build_views()
        state.param.watch(self._new_setup, ["generation"])
        state.param.watch(self._send, [*SETUP_PARAMS])
        state.prediction.param.watch(self._lock, GATE_EVENTS)
        state.param.watch(self._lock, ["predicted_setup", "decided", "difference"])
        sync_to_url(state, QUERY_KEYS)
        if pn.state.curdoc is not None and pn.state.curdoc.session_context is not None:
            pn.state.on_session_destroyed(lambda _context: self.close())
            runner().warm(state.spec)  # the workers start (and check its shape) while the student reads, not on Play
        self._lock()

    # --- building ---------------------------------------------------------------------------

    def _build_views(self) -> None:
        s = self.state
        self.gate = PredictionGate(s.prediction, QUESTION, HINT)
        self.drawing = RaceDrawing(on_control=self._control, spec=_spec(self.embed))
        self.diagram = DiagramPlace(self._pick)
        self.curves_file = pn.widgets.FileDownload(filename="race-curves.csv", label="Curves (CSV)", color="light",
                                                   embed=False, callback=self._curves_file)
        self.weights_file = pn.widgets.FileDownload(filename="race-weights.json", label="Weights (JSON)",
                                                    color="light", embed=False, callback=self._weights_file)
        self.to_lab = pn.widgets.Button(label="Open this floor in the decoder lab", color="light")
        self.to_lab.on_click(self._open_in_lab)
        self.lab_link = LiveHTML("", **styled(sizing_mode="stretch_width"))
        self._kept = 0  # floors this page has kept for the lab

    # --- the browser's changes, checked here (AnswersTheDrawing), and one payload per change or slice ------------

    def _control(self, change: dict[str, Any]) -> None:
        """The page's own choices are checked and applied here; the seed's text is read first; the rest as the
        mixin does (a known set-up control, not held, within the parameter's choices)."""
        name, value = change["name"], change["value"]
        if name in CHOICES:
            if isinstance(change.get("n"), int):
                self._ack = change["n"]
            with self._one_payload():
                try:
                    self._choose(name, value)
                except (ValueError, TypeError) as err:
                    log.info("refused a control change: %s", err)
            return
        if name == "seed" and isinstance(value, str):
            if not SEED_TEXT.fullmatch(value) or int(value) > MAX_SEED:
                self._seed_error = (f"Could not use this seed: a whole number from 0 to {MAX_SEED:,}, please. The "
                                    f"last good seed, {self.state.seed}, is still used.")
                if isinstance(change.get("n"), int):
                    self._ack = change["n"]
                self._send()
                return
            change = {**change, "value": int(value)}
        if name == "seed":
            self._seed_error = ""
        super()._control(change)

    def _choose(self, name: str, value: Any) -> None:
        c = self.choices
        if name == "floor" and not (isinstance(value, int) and 0 <= value < self._floors()):
            raise ValueError(f"no floor {value!r} to look at")
        if name == "head" and not (isinstance(value, int) and 0 <= value < self._heads()):
            raise ValueError(f"no head {value!r} to look at")
        setattr(c, name, value)  # param checks type, bounds and choices
        if name in ("example", "floor"):
            self._ask_look()

    @contextmanager
    def _one_payload(self) -> Iterator[None]:
        """What happens inside is answered with one payload, at its end (nested: at the outermost end)."""
        if self._answering:
            yield
            return
        self._answering = True
        try:
            yield
        finally:
            self._answering = False
            self._send()

    def _refresh(self) -> None:
        """The page changed: one payload now, or at the end of the change or slice being answered."""
        if not self._answering:
            self._send()

    def _unlocked(self) -> bool:
        # The set-up may change before the commit (the student chooses the race first); _check holds it after,
        # and Play, One step and Reset do nothing before it (toggle, _schedule_one, restart).
        return True

    def _check(self, name: str, value: Any) -> None:
        if self.state.setup_held:
            raise ValueError("the set-up is held until the race it was predicted for is decided")
        if name == "warmup" and self.state.difference == "warmup":
            raise ValueError("warm-up is the difference: each side has its own")

    def _act(self, name: str) -> None:
        if name == "play":
            self.toggle()
        elif name == "step":
            self._schedule_one()
        elif name == "reset":
            self.restart()
        elif name == "keep":
            self.keep_training()

    def _facts(self) -> PageFacts:
        c = self.choices
        return PageFacts(playing=self.playing, alert=self._alert, look=self.look,
                         choices={name: getattr(c, name) for name in CHOICES}, picked=self.picked,
                         error=self._seed_error, floors=self._floors(), heads=self._heads(), dark=self._dark,
                         drawn=self._drawn_look)

    def _payload(self, controls: dict[str, Any], ack: int):
        return payload(self.state, self._facts(), controls, ack=ack)

    def _diagram_view(self):
        """The diagram of the table's model and floor: named only before the first look, its RMS after; hidden when
        that model has no such floor."""
        which = self._table_side()
        floor = self._look_at(False).floor if self.look is None else self.look.floor
        spec = self.state.spec
        config = (spec.config_a, spec.config_b)[which]
        there = floor < config.n_layers
        for pane in self.diagram.panes:
            if pane.visible != there:
                pane.visible = there
        side = None if self.look is None or not there else (self.look.a, self.look.b)[which]
        position = 0 if self.look is None else self._position()
        name = names(self.state)[which]
        return lambda: inside.diagram_view(side, name, config, floor, position, self.picked)

    def _status_changed(self) -> None:
        """The status follows the race again: a message in its place goes."""
        self._alert = ""
        self._refresh()

    def _message(self, text: str) -> None:
        self._alert = text
        self._refresh()

    def _show(self, _part: Slice) -> None:
        """A slice was recorded: the curves, the depth plot and the words follow (in the payload)."""
        self._status_changed()

    # --- the race ---------------------------------------------------------------------------

    def _lock(self, *_events) -> None:
        """The gate or the hold changed: what is disabled follows (in the payload), and a race that may run now is
        prepared."""
        self._status_changed()
        self._prepare()

    def toggle(self) -> None:
        """Play or pause; refused (nothing moves, the button is set back) while the prediction is not unlocked.
        Playing after the race is decided plays on past the verdict. The first slice is asked for at once, not at
        the next tick."""
        s = self.state
        if s.prediction.unlocked:
            self.playing = not self.playing and not s.finished
        if self.playing and s.result() is not None:
            self.keep_going = True
        if self.playing and self._doc is not None:
            if self._callback is None:
                self._callback = pn.state.add_periodic_callback(self._tick, period=TICK_MS)
            self._tick()
        self._status_changed()

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
        """The worker is free again: take a step asked for meanwhile, bring a trailing look on (a kept race's,
        while its recomputation catches up with the curves, once the race stands still), or prepare a race not
        built yet."""
        if self._one_waiting:
            self._one_waiting = False
            self._schedule_one()
        elif self._look_trails and not self.playing and not self.closed:
            self._ask_look()
        else:
            self._prepare()

    def _trails(self, look: Look | None) -> bool:
        """True when `look` shows both models at an earlier step than the curves have reached."""
        s = self.state
        return look is not None and max(look.a.steps, look.b.steps) < max(len(s.a.steps), len(s.b.steps))

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
            steps = self.choices.speed or None
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
        """Show what the worker did, as one payload; True when the race moved."""
        with self._one_payload():
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
            self._look_trails = self._trails(part.look)
        if s.finished:
            self._pause()
        elif self.playing and not self.keep_going and s.result() is not None:
            self._pause()  # stopped at the verdict: Keep training plays the same race on
        return True

    def _look_at(self, always: bool) -> LookAt:
        """The example and floor picked (a value no menu offers, as a crafted message might send, counts as the
        first)."""
        c = self.choices
        example = c.example if c.example in range(EXAMPLES) else 0
        floor = c.floor if c.floor in range(self._floors()) else 0
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
        with self._one_payload():
            self._busy = False
            generation, look = fetched
            before, self._look_trails = self.look, False
            if look is not None and generation == self.state.generation:
                self.look = look
                # Asked again while the recomputation moves on; a look that did not move (no room on the server
                # to recompute, or the worker gone) ends it.
                self._look_trails = (self._trails(look) and before is not None
                                     and max(look.a.steps, look.b.steps) > max(before.a.steps, before.b.steps))
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
        self._status_changed()

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

    # --- the set-up and inside the models ---------------------------------------------------------

    def _new_setup(self, *_events) -> None:
        """A new race (set-up or reset): nothing of the old one is shown, the menus follow its models."""
        self.look, self._look_again, self._look_trails = None, False, False
        self.keep_going, self._ready = False, None  # a new race: it stops at its own verdict
        c = self.choices
        if c.floor >= self._floors():
            c.floor = 0
        if c.head >= self._heads():
            c.head = 0
        self._status_changed()
        self._prepare()

    def _floors(self) -> int:
        """Floors of the deeper model: the Floor menu's length."""
        spec = self.state.spec
        return max(spec.config_a.n_layers, spec.config_b.n_layers)

    def _heads(self) -> int:
        return self.state.spec.config_a.n_heads

    def _table_side(self) -> int:
        return 1 if self.choices.table == "b" else 0

    def _position(self) -> int:
        """The example's last scored position: the one the table and the diagram show."""
        return int(np.flatnonzero(self.look.scored)[-1])

    def _pick(self, key: str) -> None:
        """A stage chosen in the diagram: marked there and in the table."""
        local = key.split(".", 2)[-1]
        if local in block_keys(self.state.spec.config_a) and self.look is not None:
            self.picked = local
            self._refresh()

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
        except ConfigError as error:  # a kept race, and no room on the server to recompute its models now
            self._message(str(error))
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
        example = self._look_at(False).example
        try:
            cut = await runner().cut_floor(self.race_id, which, floor, example)
        except RaceLost:
            return
        except ConfigError as error:  # a kept race, and no room on the server to recompute its models now
            set_object(self.lab_link, f'<p class="bt-field-error" role="alert">{escape(str(error))}</p>')
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

    # --- layout -----------------------------------------------------------------------------

    def __panel__(self):
        head = [] if self.embed else [LiveHTML(f'<h1 class="bt-title">{TITLE}</h1><p class="bt-lead">{INTRO}</p>',
                                               **styled(sizing_mode="stretch_width"))]
        saved = pn.Column(LiveHTML('<h2 class="bt-h2">Take it with you</h2><p class="bt-muted">The curves as a '
                                   "table, and both models' weights as they are now. Each chart's PNG button saves "
                                   "it as a picture.</p>", **styled(sizing_mode="stretch_width")),
                          pn.FlexBox(self.curves_file, self.weights_file, flex_wrap="wrap"),
                          LiveHTML('<p class="bt-muted">The floor the stage table shows, as trained so far, in the '
                                   "decoder lab: every stage, the causal test and the failure modes on these "
                                   "weights.</p>", **styled(sizing_mode="stretch_width")),
                          self.to_lab, self.lab_link, css_classes=["bt-card"], sizing_mode="stretch_width")
        # Below the first screen: it follows once the page is up (fewer models first).
        saved_place = DrawnAfterLoad().later(lambda: [saved], sizing_mode="stretch_width")
        top = self.gate_row(self.state.prediction.skipped)  # the question beside the floor it races
        # READABLE_CONTROLS: the Panel widgets left (the question, downloads, the lab's button) at the prose's size.
        return pn.Column(*head, *self.notice_panes(), *top, self.drawing, saved_place, sizing_mode="stretch_width",
                         stylesheets=[READABLE_CONTROLS])
