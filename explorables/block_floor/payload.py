"""What the browser draws of the block floor (block_floor.js): one payload per change, numbers and short strings.

meta (JSON): the controls' values and the options and bounds that follow the state, the banner, the claim's
verdict; once the bet is committed also the settling sentence and, per order on view, its words, table labels,
captions and each chart's text alternative, with offsets into `values` (float64): per order the table (x0, x1,
‖·‖ per stage), the arrows (this stage's and the previous one's vector) and the floor's attention weights.
While the bet is not committed nothing of either trace leaves the server: `values` is empty.
"""

from __future__ import annotations

import logging

import numpy as np

from blocktrace.explorables.block_floor import plots
from blocktrace.explorables.block_floor.divergence import agree, floor_rows, slot, stage_labels
from blocktrace.explorables.block_floor.state import CORRECT_BET, FloorState
from blocktrace.explorables.components.drawn_view import json_text
from blocktrace.explorables.components.drawn_view.values import Values
from blocktrace.explorables.components.numbers import number, vector

__all__ = ["EMPTY", "LOCKED_NOTE", "banner", "claim_line", "order_part", "payload", "settle_line", "table_caption"]

log = logging.getLogger(__name__)

EMPTY = np.zeros(0)
LOCKED_NOTE = "The traces appear here once you commit your prediction."
ORDER_TITLES = ("Original order", "Reversed order")


def banner(state: FloorState) -> list[str]:
    """[the stage line, the status line] above the stepper."""
    s = state
    head = f"Stage {s.stage} / {s.last_stage} · {stage_labels(s.original)[s.stage - 1]}"
    if not s.bet.unlocked:
        status = "Commit your prediction, then compare the two orders stage by stage."
    elif not s.reverse:
        status = "Turn on Reverse order to compare the two orders."
    elif not s.differs_at(s.stage):
        status = "Same vectors in both orders at this stage."
    else:
        status = "The two orders differ at this stage."
    return [head, status]


def settle_line(state: FloorState) -> list[str] | None:
    """[sentence, the bet's outcome, "ok" or "bad"] at stage 8 once unlocked, else None."""
    s = state
    if s.stage != 8 or not s.bet.unlocked:
        return None
    pos = s.tracked
    incoming = s.original["blocks.0.resid_mid"][pos]
    correction = s.original["blocks.0.mlp_out"][pos]
    out = s.original["blocks.0.resid_post"][pos]
    text = (f"Stage 8 settles the prediction: block output = incoming stream + MLP correction: "
            f"{vector(incoming)} + {vector(correction)} = {vector(out)}. "
            "Nothing the stream carried was discarded.")
    if not s.bet.committed:
        return [text, "", ""]
    right = s.bet.choice == CORRECT_BET
    outcome = "was right" if right else "was not: the stream is kept and the correction added"
    return [text, f"Your prediction, “{s.bet.choices[s.bet.choice]}”, {outcome}.", "ok" if right else "bad"]


def claim_line(state: FloorState) -> list[str] | None:
    """[verdict, "ok" or "bad", the rest of the sentence] of the last claim, or None."""
    result = state.claim_result
    if result is None:
        return None
    stage, short, why = result
    claimed = "they never diverge" if stage is None else f"stage {stage}"
    return [short, "ok" if short == "Right on" else "bad", f" (you claimed {claimed}). {why}"]


def table_caption(title: str, trace, position: int) -> str:
    floors = "The full floor" if trace.config.n_layers == 1 else f"The {trace.config.n_layers} floors"
    return f"{floors} for “{trace.tokens[position]}” in slot {slot(position)} ({title.lower()})"


def order_part(state: FloorState, n: int, trace, position: int, other, put) -> dict:
    """One order's words and labels; its numbers go to `put(name, array) -> offset`."""
    title = ORDER_TITLES[n]
    rows = floor_rows(trace, position)
    other_rows = floor_rows(*other) if other else None
    labels, orders = [], []
    for k, row in enumerate(rows):
        labels.append(f"{row.stage}. {row.name}" if row.floor == 1 else f"Floor {row.floor} · {row.stage}. {row.name}")
        if other_rows:
            orders.append("same" if agree(row.vector, other_rows[k].vector) else "differs")
    table = put([[r.vector[0], r.vector[1], np.linalg.norm(r.vector)] for r in rows])
    current, previous = plots.arrow_data(state, trace, position)
    arrows = [current["x1"][0], current["y1"][0], *(previous["x1"] + previous["y1"])]
    floor = plots.pattern_floor(state)
    pattern = plots.attention_pattern(trace, floor)
    pos = trace["pos_embed"][position] if "pos_embed" in trace else None
    added = (f"slot {slot(position)}, position vector added {vector(pos)}" if pos is not None
             else f"slot {slot(position)}, positions off: nothing added")
    mask = ("causal mask on: each word reads only itself and the words before it, so every weight on a later word "
            "is 0" if trace.config.causal else "causal mask off: every word reads every word, later ones too")
    sums = ", ".join(number(x) for x in pattern.sum(axis=1))
    return {
        "title": title, "tag": "AB"[n], "words": list(trace.tokens),
        "slots": [slot(i) for i in range(len(trace.tokens))], "tracked": position, "added": added,
        "caption": table_caption(title, trace, position), "labels": labels, "orders": orders,
        "table": table, "arrows": put(arrows), "n_arrows": len(arrows) // 2,
        "arrow_labels": [f"stage {state.stage}", f"stage {state.stage - 1}"],
        "arrow_words": plots.arrow_sentences(state, title, trace, position),
        "factors": plots.slot_factors(trace.tokens), "pattern": put(pattern),
        "heat_title": f"{'AB'[n]} · attention weights, floor {floor}",
        "sums": f"Floor {floor}, row sums: {sums} (each row sums to 1); {mask}.",
        "heat_words": plots.attention_sentences(pattern, trace.tokens),
    }


def _results(state: FloorState) -> tuple[dict, np.ndarray]:
    s = state
    numbers = Values()
    put = numbers.put
    orders = [(s.original, s.tracked), (s.reversed_, s.mirror)]
    parts = []
    for n, (trace, pos) in enumerate(orders[:2 if s.reverse else 1]):
        other = orders[1 - n] if s.reverse else None
        parts.append(order_part(s, n, trace, pos, other, put))
    return {"orders": parts, "limit": plots.plane_limit(s), "settle": settle_line(s)}, numbers.array()


def payload(state: FloorState, controls: dict, ack: int = 0) -> tuple[str, np.ndarray]:
    """(meta as JSON text, values) for this session now. `ack` is the number of the browser's last change
    answered. Locked: the controls, the stepper's banner and a note, no value of either trace."""
    s = state
    error = (f"Could not use this phrase: {s.phrase_error}. The last good phrase is still shown."
             if s.phrase_error else "")
    locked = not s.bet.unlocked
    own = {"controls": controls, "ack": ack, "locked": locked, "error": error, "error_field": "phrase",
           "options": {"tracked": [[f"{word} (slot {slot(i)})", i] for i, word in enumerate(s.words)]},
           "bounds": {"stage": [1, s.last_stage]},
           "disabled": ["claim", "never"] if locked or not s.reverse else [],
           "banner": banner(s), "claim": claim_line(s)}
    if locked:
        return json_text({**own, "note": LOCKED_NOTE}), EMPTY
    results, values = _results(s)
    return json_text({**results, **own}), values
