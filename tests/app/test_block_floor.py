"""The block-floor explorable without a server: divergence, attention, verdicts, the bet, links and numbers, and the
payload the browser draws from (block_floor.js)."""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import re

import numpy as np
import pytest

from blocktrace.app.cli import main as cli
from blocktrace.explorables.block_floor import FloorExplorable, FloorState
from blocktrace.explorables.block_floor.divergence import verdict
from blocktrace.explorables.components.numbers import number
from blocktrace.explorables.engine import run_preset
from tests.drawn import meta, press, send

# The lesson's eight stages, and the six each later floor repeats, written out here rather than taken from
# the code under test.
EIGHT = ["embed", "blocks.0.resid_pre", "blocks.0.ln1.normalized", "blocks.0.attn_out", "blocks.0.resid_mid",
         "blocks.0.ln2.normalized", "blocks.0.mlp_out", "blocks.0.resid_post"]
SIX = ["ln1.normalized", "attn_out", "resid_mid", "ln2.normalized", "mlp_out", "resid_post"]
WORDS = ["eat", "an", "orange"]


# --- the page as the browser gets it (the drawing component's payload) and drives it (its `sent`) -------------

def drawn_disabled(view: FloorExplorable) -> dict[str, bool]:
    """Each drawn control's disabled state as block_floor.js sets it: all while locked, else those listed."""
    m = meta(view)
    return {c["name"]: m["locked"] or c["name"] in m["disabled"] for c in json.loads(view.drawing.spec)["controls"]}


def table_rows(view: FloorExplorable, order: int = 0) -> list[tuple[str, list[str], bool]]:
    """An order's stage table as block_floor.js writes it: (row header, cell texts, is the current row)."""
    m, values = meta(view), view.drawing.values
    o = m["orders"][order]
    rows = []
    for k, label in enumerate(o["labels"]):
        x0, x1, size = values[o["table"] + 3 * k: o["table"] + 3 * k + 3]
        cells = [number(x0, signed=True), number(x1, signed=True), number(size)] + o["orders"][k:k + 1]
        rows.append((label, cells, k + 1 == m["controls"]["stage"]))
    return rows


def every_stage(floors: int) -> list[str]:
    return EIGHT + [f"blocks.{layer}.{key}" for layer in range(1, floors) for key in SIX]


def differs(words: list[str], index: int, positions: bool, causal: bool, floors: int = 1) -> list[bool]:
    """An independent answer: at each stage, does the word's row differ between the two orders' traces?"""
    settings = dict(positions=positions, causal=causal, n_layers=floors)
    forward = run_preset("eat-an-orange", tokens=words, **settings)
    backward = run_preset("eat-an-orange", tokens=words[::-1], **settings)
    return [bool(np.max(np.abs(forward[key][index] - backward[key][len(words) - 1 - index])) > 1e-9)
            for key in every_stage(floors)]


def first_split(words: list[str], index: int, positions: bool, causal: bool, floors: int = 1) -> int | None:
    split = differs(words, index, positions, causal, floors)
    return split.index(True) + 1 if any(split) else None


@pytest.mark.parametrize("floors", [1, 2])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("positions", [True, False])
@pytest.mark.parametrize("index", [0, 1, 2])
def test_first_divergence_matches_the_engine(index: int, positions: bool, causal: bool, floors: int) -> None:
    """For every tracked word, positions on/off, mask on/off and 1 or 2 floors, the answer is the engine's."""
    state = FloorState(tracked=index, positions=positions, causal=causal, floors=floors)
    assert state.divergence() == first_split(WORDS, index, positions, causal, floors)


def test_a_split_that_starts_on_floor_two_is_found() -> None:
    """Positions off, mask on, "c" in "a b c a b": the same words precede it, so the split waits for floor 2."""
    words = ["a", "b", "c", "a", "b"]
    assert first_split(words, 2, False, True, 1) is None
    assert first_split(words, 2, False, True, 2) == 10  # floor 2's attention, stage 8 + 2
    state = FloorState(phrase="a b c a b", tracked=2, positions=False, causal=True, floors=2)
    assert state.divergence() == 10


def test_the_lessons_answers() -> None:
    """Middle word with positions: attention (4); positions off, no mask: never; end words: + position vector (2)."""
    assert FloorState(tracked=1).divergence() == 4
    assert FloorState(tracked=1, positions=False).divergence() is None
    assert FloorState(tracked=0).divergence() == 2
    assert FloorState(tracked=2).divergence() == 2


@pytest.mark.parametrize("causal", [False, True])
def test_attention_rows_sum_to_one_and_the_mask_hides_the_future(causal: bool) -> None:
    """Each row of weights sums to 1 in both orders; with the mask on, every future weight is exactly 0."""
    state = FloorState(causal=causal, phrase="the cat sat on the mat")
    for _, trace, _ in state.traces():
        pattern = trace["blocks.0.attn.pattern"][0]
        assert np.allclose(pattern.sum(axis=1), 1.0)
        future = pattern[np.triu_indices(len(trace.tokens), k=1)]
        assert np.all(future == 0.0) if causal else np.all(future > 0.0)


def test_claims_are_judged_against_the_computed_stage() -> None:
    """Before the split is too early, after it too late, at it right on; "never" is right only when it is."""
    assert verdict(3, 4, "why")[0] == "Too early"
    assert verdict(5, 4, "why")[0] == "Too late"
    assert verdict(4, 4, "why") == ("Right on", "why")
    assert verdict(None, 4, "why")[0] == "They do diverge"
    assert verdict(None, None, "why") == ("Right on", "why")
    assert verdict(2, None, "why")[0] == "No split here"
    state = FloorState(tracked=1)
    assert state.claim(3)[0] == "Too early"
    assert state.claim(4)[0] == "Right on"
    assert "slot" in state.claim(4)[1]


def test_never_with_the_mask_on_is_answered_they_do_diverge() -> None:
    """Positions off, mask on, at stage 1: "never" is wrong, and the answer says so without "Too late"."""
    state = FloorState(tracked=1, positions=False, causal=True)
    assert state.stage == 1
    short, why = state.claim(None)
    assert short == "They do diverge"
    assert "“never” is wrong" in why and "Too late" not in why and "step back" not in why.lower()
    assert "4" not in why  # the split is at stage 4, not yet found: not given away


CLAIM_CASES = list(itertools.product([True, False], [False, True], [0, 1, 2], [1, 2]))


@pytest.mark.parametrize(("positions", "causal", "index", "floors"), CLAIM_CASES)
def test_every_claim_gets_the_verdict_the_traces_support(positions: bool, causal: bool, index: int,
                                                         floors: int) -> None:
    """Each claim (every stage of every floor, and "never"), from each stage on view, against the traces' truth."""
    split = differs(WORDS, index, positions, causal, floors)
    truth = split.index(True) + 1 if any(split) else None
    state = FloorState(tracked=index, positions=positions, causal=causal, floors=floors)
    for on_view in range(1, len(split) + 1):
        state.stage = on_view
        short, why = state.claim(on_view)
        if truth is None:
            assert short == "No split here", on_view
        else:
            assert short == ("Too early" if on_view < truth else "Right on" if on_view == truth else "Too late")
        short, why = state.claim(None)
        if truth is None:
            assert short == "Right on"
            continue
        assert short == "They do diverge" and "“never” is wrong" in why and "Too late" not in why
        if split[on_view - 1]:
            assert f"At stage {on_view}, on view, the two traces differ" in why
        else:  # nothing on view shows a split: the answer names no stage
            assert not re.search(r"\d", why), why


def test_a_claim_on_a_later_floor_is_judged() -> None:
    """The split on floor 2 (stage 10) is right on when claimed there; stage 4 is too early, 16 too late."""
    state = FloorState(phrase="a b c a b", tracked=2, positions=False, causal=True)
    state.floors = 3
    assert [state.claim(n)[0] for n in (4, 9, 10, 16)] == ["Too early", "Too early", "Right on", "Too late"]
    assert state.claim(None)[0] == "They do diverge"


# (phrase, tracked, positions, causal, floors, first divergence, words the reason must hold, words it must not)
REASONS = [
    ("eat an orange", 0, True, False, 1, 2, ["slot p₀", "slot p₂", "position vector"], ["mask"]),
    ("eat an orange", 2, True, True, 1, 2, ["slot p₂", "slot p₀", "position vector"], ["mask"]),
    ("eat an orange", 1, True, False, 1, 4, ["keeps slot p₁", "other position vectors", "attention"], ["mask"]),
    ("eat an orange", 1, False, True, 1, 4, ["causal mask", "“eat” comes before “an”", "“orange” comes before"],
     ["slot", "position vector"]),
    ("eat an orange", 0, False, True, 1, 4, ["causal mask", "No word comes before “eat”"], ["slot"]),
    ("eat an orange", 1, True, True, 1, 4, ["causal mask", "before"], []),
    ("a b c a b", 2, True, True, 1, 4, ["causal mask", "same words before it", "other slots"], []),
    ("a b c a b", 2, False, True, 2, 10, ["floor 2", "floor 1 left them"], ["slot"]),
    ("eat an orange", 1, False, False, 1, None, ["permutation symmetry", "no mask"], ["same phrase"]),
    ("eat an eat", 1, True, True, 1, None, ["same phrase"], ["permutation"]),
]


@pytest.mark.parametrize(("phrase", "index", "positions", "causal", "floors", "truth", "says", "never_says"),
                         REASONS)
def test_right_on_gives_the_true_reason(phrase: str, index: int, positions: bool, causal: bool, floors: int,
                                        truth: int | None, says: list[str], never_says: list[str]) -> None:
    """"Right on" explains the case: a changed slot stamp, reordered neighbours' stamps, or the mask's history."""
    state = FloorState(phrase=phrase, tracked=index, positions=positions, causal=causal)
    state.floors = floors
    assert state.divergence() == truth == first_split(phrase.split(), index, positions, causal, floors)
    short, why = state.claim(truth)
    assert short == "Right on"
    for words in says:
        assert words in why, (words, why)
    for words in never_says:
        assert words not in why, (words, why)


def test_the_bet_is_final() -> None:
    """A committed bet cannot be changed, and the controls unlock only once it is committed."""
    view = FloorExplorable()
    assert all(drawn_disabled(view).values()) and meta(view)["locked"]
    assert view.state.bet.commit("kept-added") is None
    assert not any(drawn_disabled(view).values()) and not meta(view)["locked"]
    assert view.state.bet.commit("replaced") is not None
    assert view.state.bet.choice == "kept-added"


def test_stage_eight_settles_the_bet_with_the_numbers() -> None:
    """At stage 8 the page states output = incoming stream + MLP correction, with this word's numbers."""
    view = FloorExplorable(predict=False)
    send(view, "stage", 8)
    assert view.state.stage == 8
    trace, i = view.state.original, view.state.tracked
    expected = trace["blocks.0.resid_mid"][i] + trace["blocks.0.mlp_out"][i]
    assert np.allclose(expected, trace["blocks.0.resid_post"][i])
    assert f"{trace['blocks.0.resid_post'][i][1]:.3f}" in meta(view)["settle"][0]
    send(view, "stage", 7)
    assert meta(view)["settle"] is None


@pytest.mark.parametrize(("positions", "causal", "floors"), [(True, False, 1), (False, True, 3)])
def test_numbers_equal_the_command_line(positions: bool, causal: bool, floors: int) -> None:
    """The explorable's trace is `blocktrace trace --preset eat-an-orange` with the same settings."""
    state = FloorState(positions=positions, causal=causal, floors=floors)
    args = ["trace", "--preset", "eat-an-orange", "--json", "--positions", "on" if positions else "off",
            "--causal", "on" if causal else "off", "--layers", str(floors)]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli(args) == 0
    stages = {s["key"]: np.array(s["values"], dtype=float) for s in json.loads(out.getvalue())["stages"]}
    for stage in state.original:
        if stage.local_key != "attn.scores":
            assert np.allclose(stage.values, stages[stage.key]), stage.key


def test_a_typed_phrase_is_text_and_a_bad_one_keeps_the_last_good() -> None:
    """HTML in a phrase reaches the browser as a word (drawn as text) and never as markup in the payload; an
    empty or over-long phrase is refused with a message by its field, the last good one kept."""
    view = FloorExplorable(predict=False)
    send(view, "phrase", "<img src=x onerror=alert(1)> eats")
    text = view.drawing.meta
    assert "<img" not in text and "<" not in text  # JSON's \u003c: nothing for an HTML sanitizer to read
    assert meta(view)["orders"][0]["words"][0] == "<img"
    assert meta(view)["controls"]["phrase"] == "<img src=x onerror=alert(1)> eats"
    good = list(view.state.words)
    send(view, "phrase", "   ")
    assert view.state.phrase_error and view.state.words == good
    send(view, "phrase", " ".join(["w"] * 9))
    assert "at most 8" in view.state.phrase_error and view.state.words == good
    m = meta(view)
    assert m["error_field"] == "phrase" and m["error"].startswith("Could not use this phrase")
    assert "The last good phrase is still shown" in m["error"] and m["orders"][0]["words"] == good
    send(view, "phrase", 42)  # not text: refused, the phrase as it was
    assert view.state.words == good


def test_a_change_the_browser_sends_is_checked_on_the_server() -> None:
    """Out of bounds, of the wrong type or unknown: refused and answered (the ack), the state as it was."""
    view = FloorExplorable(predict=False)
    s = view.state
    before = (s.stage, s.floors, s.tracked, s.positions)
    for name, value in (("stage", 9), ("stage", 2.5), ("floors", 7), ("tracked", 3), ("tracked", -1),
                        ("positions", "no"), ("words", ["a"]), ("action", "explode")):
        send(view, name, value)
        assert meta(view)["ack"] == view._sent_n, name
    assert (s.stage, s.floors, s.tracked, s.positions) == before and s.words == ["eat", "an", "orange"]


def test_links_restore_state_and_refuse_bad_values() -> None:
    """Every URL key restores its control; values the explorable cannot use fall back with a notice."""
    view = FloorExplorable(query={"tokens": "a b c d", "positions": "off", "tracked": "2", "reverse": "off",
                                  "causal": "on", "stage": "5", "floors": "3"})
    s = view.state
    assert (s.words, s.positions, s.tracked, s.reverse, s.causal, s.stage, s.floors) == (
        ["a", "b", "c", "d"], False, 1, False, True, 5, 3)
    assert view.notices == []
    bad = FloorExplorable(query={"stage": "9", "floors": "zero", "positions": "maybe"})
    assert (bad.state.stage, bad.state.floors, bad.state.positions) == (1, 1, True)
    assert len(bad.notices) == 3


@pytest.mark.parametrize("floors", range(1, 7))
def test_the_stepper_reaches_every_stage_of_every_floor(floors: int) -> None:
    """Slider, buttons, banner and table agree: 8 + 6 stages per further floor, each one on view in turn."""
    view = FloorExplorable(predict=False)
    s = view.state
    send(view, "floors", floors)
    last = 8 + 6 * (floors - 1)
    assert meta(view)["bounds"]["stage"] == [1, last]
    rows = [label for label, _, _ in table_rows(view)]
    assert len(rows) == last
    seen = []
    for _ in range(last + 1):  # one press more than needed: the last stage holds
        [label] = [label for label, _, current in table_rows(view) if current]
        assert label == rows[s.stage - 1]
        banner = re.fullmatch(r"Stage (\d+) / (\d+) · (.*)", meta(view)["banner"][0])
        assert (int(banner.group(1)), int(banner.group(2))) == (s.stage, last)
        assert label.endswith(banner.group(3).rpartition(" · ")[2])  # the same stage name
        seen.append(s.stage)
        press(view, "Next stage ▶")
    assert seen == [*range(1, last + 1), last]
    if floors > 1:
        assert rows[8] == "Floor 2 · 9. RMSNorm (before attention)"
        assert rows[last - 1] == f"Floor {floors} · {last}. + residual = block output"
        assert f"floor {floors}" in meta(view)["orders"][0]["heat_title"]  # the weights of the floor on view
    press(view, "◀ Previous stage")
    assert s.stage == last - 1


def test_fewer_floors_bring_the_stage_back_into_range() -> None:
    """Lowering Floors from 3 to 2 at stage 20 moves the stage to 14, the last one left; the claim is cleared."""
    view = FloorExplorable(predict=False)
    s = view.state
    send(view, "floors", 3)
    send(view, "stage", 20)
    press(view, "They never diverge")
    assert s.claim_result is not None and meta(view)["claim"][0] == "They do diverge"
    send(view, "floors", 2)
    m = meta(view)
    assert (s.stage, m["controls"]["stage"], m["bounds"]["stage"][1]) == (14, 14, 14)
    assert s.claim_result is None and m["claim"] is None
    assert m["banner"][0] == "Stage 14 / 14 · Floor 2 · + residual = block output"


def test_links_restore_a_stage_on_a_later_floor() -> None:
    """A link's stage counts across floors: stage 20 with 3 floors opens there; without the floors it is refused."""
    view = FloorExplorable(query={"stage": "20", "floors": "3"})
    assert (view.state.floors, view.state.stage, view.notices) == (3, 20, [])
    alone = FloorExplorable(query={"stage": "20"})
    assert alone.state.stage == 1 and len(alone.notices) == 1
    last = FloorExplorable(query={"floors": "6", "stage": "38"})
    assert (last.state.stage, last.notices) == (38, [])


def test_chips_heatmap_and_tables_name_slots_alike() -> None:
    """One slot convention, p₀, p₁, p₂ as the position vectors: chips, heatmap axes, alt text, table, select."""
    view = FloorExplorable(predict=False)
    original, reversed_ = meta(view)["orders"]
    assert list(zip(original["words"], original["slots"], strict=True)) == [("eat", "p₀"), ("an", "p₁"),
                                                                           ("orange", "p₂")]
    assert original["factors"] == ["p₀ eat", "p₁ an", "p₂ orange"]
    assert reversed_["factors"] == ["p₀ orange", "p₁ an", "p₂ eat"]
    assert "Query p₀ eat reads: p₀ eat" in " ".join(original["heat_words"])
    assert "“orange” in slot p₂" in original["caption"] and "“orange” in slot p₀" in reversed_["caption"]
    assert "slot p₂, position vector added" in original["added"]
    assert [label for label, _ in meta(view)["options"]["tracked"]] == ["eat (slot p₀)", "an (slot p₁)",
                                                                       "orange (slot p₂)"]
    shown = " ".join([original["added"], original["caption"], *original["labels"], *original["heat_words"],
                      *original["arrow_words"]])
    assert not re.search(r"\bp\d|\b[123] (eat|an|orange)\b|word [123]\b", shown)


def test_vectors_in_sentences_use_true_minus_signs() -> None:
    """Vectors written out (settling the bet, the plot's words) use − and never show −0.000."""
    view = FloorExplorable(predict=False)
    send(view, "stage", 8)
    m = meta(view)
    assert "[−0.823, 1.520] + [0.000, 1.244] = [−0.823, 2.764]" in m["settle"][0]
    assert "[−0.823, 2.764]" in " ".join(m["orders"][0]["arrow_words"])
    for text in (m["settle"][0], *m["orders"][0]["arrow_words"], m["orders"][1]["added"]):
        assert not re.search(r"-\d", text)


def test_the_table_is_the_traces_numbers_and_the_orders_column_their_agreement() -> None:
    """Each drawn row is the tracked word's vector and its norm at that stage, in both orders; "same" and
    "differs" agree with the engine's own comparison."""
    view = FloorExplorable(predict=False)
    s = view.state
    truth = differs(WORDS, s.tracked, True, False)
    for order, (trace, pos) in enumerate(((s.original, s.tracked), (s.reversed_, s.mirror))):
        rows = table_rows(view, order)
        for k, key in enumerate(every_stage(1)):
            v = trace[key][pos]
            x0, x1, size, agreement = rows[k][1]
            assert (x0, x1, size) == (number(v[0], signed=True), number(v[1], signed=True),
                                      number(float(np.linalg.norm(v))))
            assert agreement == ("differs" if truth[k] else "same")
    send(view, "reverse", False)  # one order, no Orders column
    assert len(meta(view)["orders"]) == 1 and meta(view)["orders"][0]["orders"] == []
