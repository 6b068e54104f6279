"""The decoder lab's cost budget: every lesson's sizes run, the sizes that froze a class are refused."""

from __future__ import annotations

import pytest

from blocktrace.app.lessons.loading import load_lessons
from blocktrace.explorables.decoder_block_lab import budget
from blocktrace.explorables.decoder_block_lab.state import BUDGETED, D_CHOICES, EXPANSIONS, LabState
from blocktrace.explorables.decoder_block_lab.view import DecoderLabExplorable
from tests.drawn import meta
from tests.lab_page import page_parts

HEAVY = {"B": 4, "T": 8, "d": 512, "heads": 8, "expansion": 8, "mlp": "gelu", "blocks": 48}  # issue 16's link
# What the decoder-block lesson asks for on top of its link's state ("Run the comparison", steps 2-3).
LESSON_STEPS = [{"d": 512}, {"d": 512, "norm": "layernorm", "mlp": "gelu"},
                {"d": 512, "norm": "layernorm", "mlp": "gelu", "placement": "post", "heads": 2}]


def lesson_states() -> list[dict]:
    """The lab's state in every lesson that shows it, as the lesson's link gives it."""
    return [dict(d.attrs.get("state") or {}) for lesson in load_lessons()
            for d in lesson.directives("explorable") if d.attrs["id"] == "decoder-block-lab"]


def sizes_of(state: dict) -> dict:
    defaults = {name: LabState.param[name].default for name in BUDGETED}
    return {**defaults, **{k: v for k, v in state.items() if k in BUDGETED}}


def test_a_lesson_shows_the_lab() -> None:
    """The lessons name the lab at least once (else the next test would check nothing)."""
    assert lesson_states()


@pytest.mark.parametrize("step", [{}, *LESSON_STEPS])
def test_every_lesson_configuration_is_within_the_budget(step: dict) -> None:
    """The lesson's link and each change its steps ask for stay within the budget, at every batch size it shows."""
    for state in lesson_states():
        cost = budget.cost(**sizes_of({**state, **step}))
        assert cost.within(), (state, step, cost)


def test_the_heavy_link_of_issue_16_is_over_the_budget() -> None:
    """B=4, T=8, d=512, expansion 8, GELU, 48 blocks: over on work and on memory."""
    cost = budget.cost(**HEAVY)
    assert cost.work > budget.MAX_WORK and cost.floats > budget.MAX_FLOATS
    assert "multiply-adds" in cost.refusal() and "MB" in cost.refusal()


def test_the_estimate_grows_with_every_size() -> None:
    """Each size the lab offers adds work: a larger value never costs less."""
    base = sizes_of({})
    for name, bigger in (("B", 4), ("T", 8), ("d", 512), ("expansion", 8), ("blocks", 48)):
        small = budget.cost(**{**base, name: 1 if name in ("B", "blocks") else base[name]})
        assert budget.cost(**{**base, name: bigger}).work >= small.work, name
    assert budget.cost(**{**base, "mlp": "gelu"}).floats > budget.cost(**base).floats  # GELU keeps all e·d


def test_a_refused_change_keeps_the_last_good_state_and_says_why() -> None:
    """Sizes over the budget are set back to the last ones that fit, nothing is recomputed, a message says why."""
    state = LabState()
    state.d = 512
    trace, depth = state.trace, state.depth
    state.param.update(B=4, T=8, expansion=8, mlp="gelu")
    assert (state.B, state.T, state.d, state.expansion, state.mlp) == (1, 4, 512, 4, "swiglu")
    assert state.trace is trace and state.depth is depth
    assert "multiply-adds" in state.budget_error
    state.T = 6  # a change that fits clears the message
    assert state.budget_error == "" and state.T == 6 and state.trace is not trace


def test_a_link_over_the_budget_opens_at_the_default_sizes_with_the_message_beside_the_controls() -> None:
    """The link's sizes give way to the defaults, and panels 1 and 6 say why; the rest of the link stands."""
    view = DecoderLabExplorable(query={**{k: str(v) for k, v in HEAVY.items()}, "norm": "layernorm"}, predict=False)
    view.__panel__()
    s = view.state
    assert {name: getattr(s, name) for name in BUDGETED} == sizes_of({})
    assert s.norm == "layernorm"
    message = meta(view)["budget"]
    assert "multiply-adds" in message and "last sizes that fit" in message
    parts = page_parts(view)  # drawn in panel 1, under the sizes, and in panel 6, under the Blocks slider
    at = [i for i, part in enumerate(parts) if part == message]
    assert len(at) == 2 and parts.index("1. Shapes") < at[0] < parts.index("2. Design choices")
    assert parts.index("6. Depth") < at[1] < parts.index("7. The worked example")


def test_every_single_size_the_controls_offer_runs_at_the_lessons_other_sizes() -> None:
    """Each width and expansion, with the lesson's other sizes, is allowed (only combinations are refused)."""
    base = sizes_of(lesson_states()[0])
    for d in D_CHOICES:
        for expansion in EXPANSIONS:
            for mlp in ("swiglu", "gelu"):
                sizes = {**base, "d": d, "expansion": expansion, "mlp": mlp}
                if (d, expansion, mlp) == (512, 8, "gelu"):
                    continue  # 85 MB: the one single choice refused at the lesson's sizes
                assert budget.cost(**sizes).within(), sizes


def test_the_weights_cache_stays_within_the_memory_budget() -> None:
    """Going through every width keeps at most MAX_FLOATS numbers of cached weights in one session."""
    state = LabState()
    for d in D_CHOICES:
        state.d = d
        cached = sum(v.size for params in state._params_cache.values() for v in params.values())
        assert cached <= budget.MAX_FLOATS, d
    assert state.d == 512 and state.budget_error == ""
