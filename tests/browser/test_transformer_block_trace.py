"""The block-trace explorable in real Chromium: controls found by their labels, results read off the page."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlencode

import pytest
from playwright.sync_api import Locator, Page, expect

from tests.conftest import STUDENT_LAPTOP

pytestmark = pytest.mark.browser

TRACE = "/explorables/transformer-block-trace"
SCALE = "Attention update scale"
REPLACE = "Replace instead of add residuals (broken)"
VECTOR = "Input vector"
NORM = "Normalisation"
ANSWER = "Zero updates return the input unchanged; replacing would erase it."


# --- finding things the way a person does: by their visible words ----------------------------------

def stage_table(page: Page) -> Locator:
    return page.get_by_role("table", name=re.compile("One forward pass"))


def stage_row(page: Page, label: str) -> Locator:
    """The stage table's row whose header starts with `label`."""
    return stage_table(page).get_by_role("row", name=re.compile("^" + re.escape(label)))


def numbers(row: Locator) -> Locator:
    """The filled number cells of a row (components, then the norm)."""
    return row.locator("td:not(.empty)")


def slider(page: Page, label: str) -> Locator:
    """The slider labelled `label` (a range input the component draws, with its <label for>)."""
    return page.get_by_role("slider", name=label, exact=True)


def checkbox(page: Page, label: str) -> Locator:
    """The checkbox whose visible label is `label`."""
    return page.get_by_role("checkbox", name=label, exact=True)


def ready(page: Page) -> None:
    expect(stage_row(page, "Output after residual add 2")).to_be_visible()


def locked(page: Page) -> None:
    """The page is up, its gate locked: a note where the trace goes, and no value of the trace."""
    expect(page.get_by_text("The trace appears here once you commit your prediction")).to_be_visible()
    expect(stage_table(page)).to_have_count(0)


def set_vector(page: Page, text: str, key: str = "Enter") -> None:
    """Type into the vector field and submit: Enter, or Tab to leave the field."""
    field = page.get_by_label(VECTOR)
    field.fill(text)
    field.press(key)


def slider_to_zero(page: Page) -> None:
    handle = slider(page, SCALE)
    handle.focus()
    page.keyboard.press("Home")
    expect(handle).to_have_attribute("aria-valuenow", re.compile(r"^0(\.0+)?$"))


# --- the tests -----------------------------------------------------------------------------------

def test_controls_have_accessible_names(open_page) -> None:
    """Each control is reachable by its label through the accessibility tree (get_by_label / role + name)."""
    page = open_page(TRACE, teacher_link=True).page
    ready(page)
    found = {
        VECTOR: page.get_by_label(VECTOR),
        NORM: page.get_by_label(NORM),
        SCALE: page.get_by_role("slider", name=SCALE),
        REPLACE: page.get_by_role("checkbox", name=REPLACE),
    }
    missing = [label for label, locator in found.items() if locator.count() != 1]
    assert missing == [], f"no accessible name for: {missing}"


def test_prediction_gate_blocks_then_unlocks(open_page) -> None:
    """Controls are disabled until an answer is chosen and committed; then they work."""
    opened = open_page(TRACE)
    page = opened.page
    locked(page)
    # No empty chart frames either: the note says what will appear, and no chart or stage picker is drawn
    expect(page.get_by_text("the norm at each stage, each stage's components and the SwiGLU gates")).to_be_visible()
    expect(page.locator("figure.dv-chart")).to_have_count(0)
    expect(page.get_by_label("Stage to inspect")).to_be_hidden()
    expect(page.get_by_label(VECTOR)).to_be_disabled()
    expect(page.get_by_label(NORM)).to_be_disabled()
    expect(checkbox(page, REPLACE)).to_be_disabled()
    expect(slider(page, SCALE)).to_be_disabled()
    commit = page.get_by_role("button", name="Commit prediction")
    commit.click()  # nothing chosen yet
    expect(page.get_by_role("alert")).to_contain_text("Pick one of the answers")
    expect(page.get_by_label(VECTOR)).to_be_disabled()
    page.get_by_label(ANSWER).check()
    commit.click()
    expect(page.get_by_label(VECTOR)).to_be_enabled()
    expect(page.get_by_label(NORM)).to_be_enabled()
    expect(checkbox(page, REPLACE)).to_be_enabled()
    expect(page.get_by_text("Your prediction (final)")).to_be_visible()
    expect(page.get_by_role("button", name="Commit prediction")).to_be_hidden()
    expect(page.locator("figure.dv-chart svg[role=img]:visible")).to_have_count(3)
    expect(page.get_by_label("Stage to inspect")).to_be_enabled()
    slider_to_zero(page)  # the unlocked controls really drive the trace
    expect(numbers(stage_row(page, "Attention update"))).to_have_text(["0.000"] * 5)
    opened.assert_clean()


def test_the_trace_files_wait_for_the_commit_then_download(open_page) -> None:
    """Before the commit the download buttons are not shown (a note says why); after it, the CSV downloads with
    the trace of the state on screen."""
    page = open_page(TRACE).page
    locked(page)
    expect(page.get_by_text("can be downloaded once you commit your prediction")).to_be_visible()
    expect(page.get_by_role("button", name="Trace (CSV)")).to_be_hidden()
    page.get_by_label(ANSWER).check()
    page.get_by_role("button", name="Commit prediction").click()
    ready(page)
    slider_to_zero(page)
    expect(numbers(stage_row(page, "Attention update"))).to_have_text(["0.000"] * 5)
    expect(page.get_by_text("can be downloaded once you commit your prediction")).to_be_hidden()
    with page.expect_download() as info:
        page.get_by_role("button", name="Trace (CSV)").click()
    lines = Path(info.value.path()).read_text(encoding="utf-8").splitlines()
    assert lines[0] == "key,label,batch,head,pos,token,key_pos,component,value"
    attention = [line.split(",")[-1] for line in lines if line.startswith("blocks.0.attn_out,")]
    assert attention and all(float(value) == 0.0 for value in attention)  # the state on screen: scale 0


def test_scale_zero_zeroes_attention_and_keeps_the_input(open_page) -> None:
    """Attention update scale 0 makes the attention row zeros and the first residual row equal the input."""
    opened = open_page(TRACE, teacher_link=True)
    page = opened.page
    ready(page)
    input_cells = numbers(stage_row(page, "Input residual stream")).all_inner_texts()
    assert len(input_cells) == 5
    expect(numbers(stage_row(page, "Attention update"))).not_to_have_text(["0.000"] * 5)
    slider_to_zero(page)
    expect(numbers(stage_row(page, "Attention update"))).to_have_text(["0.000"] * 5)
    expect(numbers(stage_row(page, "Residual stream after residual add 1"))).to_have_text(input_cells)
    expect(page).to_have_url(re.compile(r"[?&]attention_scale=0(&|$)"))
    opened.assert_clean()


def test_replace_mode_marks_where_the_input_is_lost(open_page) -> None:
    """Replace mode marks "input lost here" on the first residual row, and on no other row; a click on the
    checkbox's words (its label) toggles it."""
    opened = open_page(TRACE, teacher_link=True)
    page = opened.page
    ready(page)
    expect(stage_table(page).get_by_text("input lost here")).to_have_count(0)
    checkbox(page, REPLACE).check()
    table = stage_table(page)
    expect(table.get_by_text("input lost here")).to_have_count(1)
    expect(table.locator("tbody tr").nth(3)).to_contain_text("input lost here")
    expect(table.locator("tbody tr").nth(3)).to_contain_text("Residual stream")
    expect(page).to_have_url(re.compile(r"[?&]residual=replace(&|$)"))
    page.get_by_text(REPLACE, exact=True).click()
    expect(checkbox(page, REPLACE)).not_to_be_checked()
    expect(table.get_by_text("input lost here")).to_have_count(0)
    opened.assert_clean()


def test_bad_vector_shows_an_error_and_keeps_the_trace(open_page) -> None:
    """An unreadable vector shows a message next to the field, naming the bad item; the table keeps its values."""
    opened = open_page(TRACE, teacher_link=True)
    page = opened.page
    ready(page)
    rows = stage_table(page).locator("tbody tr")
    before = rows.all_text_contents()
    set_vector(page, "1, abc")
    error = page.get_by_role("alert").filter(has_text="abc")
    expect(error).to_be_visible()
    field_box, error_box = page.get_by_label(VECTOR).bounding_box(), error.bounding_box()
    assert field_box and error_box
    assert 0 <= error_box["y"] - (field_box["y"] + field_box["height"]) < 120, "the message is not by the field"
    expect(rows).to_have_text(before)
    slider_to_zero(page)  # the kept vector is still the one traced when another control changes
    expect(numbers(stage_row(page, "Residual stream after residual add 1"))).to_have_text(
        ["+1.500", "\u22120.500", "+0.250", "+2.000", "2.562"])
    opened.assert_clean()


@pytest.mark.parametrize("key", ["Tab", "Enter"])
def test_new_vector_updates_the_table(open_page, key: str) -> None:
    """A vector submitted by leaving the field (Tab) or pressing Enter is traced, and clears an earlier error."""
    opened = open_page(TRACE, teacher_link=True)
    page = opened.page
    ready(page)
    set_vector(page, "1, abc", key)
    expect(page.get_by_role("alert").filter(has_text="abc")).to_be_visible()
    set_vector(page, "2, 2, 2, 2", key)
    expect(numbers(stage_row(page, "Input residual stream"))).to_have_text(["+2.000"] * 4 + ["4.000"])
    expect(numbers(stage_row(page, "RMSNorm 1"))).to_have_text(["+1.000"] * 4 + ["2.000"])
    expect(page.get_by_role("alert").filter(has_text="abc")).to_have_count(0)
    expect(page).to_have_url(re.compile(r"[?&]input=2%2C(\+|%20)2"))
    opened.assert_clean()


def test_typed_html_is_shown_as_text_and_never_runs(open_page) -> None:
    """HTML typed into the vector is shown literally in the message; no element is injected, no script runs."""
    opened = open_page(TRACE, teacher_link=True)
    page = opened.page
    ready(page)
    set_vector(page, "<img src=x onerror=alert(1)>")
    expect(page.get_by_role("alert")).to_contain_text("could not read '<img'")  # the markup, as text
    slider_to_zero(page)  # a round trip after the message, so an injected image would have loaded
    expect(numbers(stage_row(page, "Attention update"))).to_have_text(["0.000"] * 5)
    expect(page.locator("img[src='x']")).to_have_count(0)
    expect(page.locator("img")).to_have_count(0)
    assert not [u for u in opened.requests if u.rstrip("/").endswith("/x")]
    assert opened.dialogs == []
    opened.assert_clean()


def test_two_sessions_do_not_affect_each_other(open_page) -> None:
    """Changing one browser session leaves another session's controls and table as they were."""
    a = open_page(TRACE, teacher_link=True)
    b = open_page(TRACE, teacher_link=True)
    ready(a.page)
    ready(b.page)
    b_attention = numbers(stage_row(b.page, "Attention update")).all_inner_texts()
    slider_to_zero(a.page)
    checkbox(a.page, REPLACE).check()
    expect(numbers(stage_row(a.page, "Attention update"))).to_have_text(["0.000"] * 5)
    expect(stage_table(a.page).get_by_text("input lost here")).to_have_count(1)
    # B changes something of its own; its update arrives after A's changes were made.
    b.page.get_by_label(NORM).select_option(label="Mean-centred (LayerNorm)")
    expect(stage_row(b.page, "LayerNorm 1")).to_be_visible()
    expect(numbers(stage_row(b.page, "Attention update"))).not_to_have_text(["0.000"] * 5)
    expect(stage_table(b.page).get_by_text("input lost here")).to_have_count(0)
    expect(slider(b.page, SCALE)).to_have_attribute("aria-valuenow", re.compile(r"^1(\.0+)?$"))
    expect(checkbox(b.page, REPLACE)).not_to_be_checked()
    assert "attention_scale=0" not in b.page.url
    expect(stage_row(a.page, "RMSNorm 1")).to_be_visible()
    # And A kept its own state through B's change.
    expect(numbers(stage_row(a.page, "Attention update"))).to_have_text(["0.000"] * 5)
    assert b_attention != ["0.000"] * 5
    a.assert_clean()
    b.assert_clean()


def test_the_plots_arrive_once_the_page_is_up(open_page) -> None:
    """The three charts are drawn with the page's first payload, each an image with its name and its words, none
    left waiting."""
    opened = open_page(TRACE, teacher_link=True)
    page = opened.page
    ready(page)
    charts = page.locator("figure.dv-chart svg[role=img]")
    expect(charts).to_have_count(3)
    for name in ("Norm ‖·‖ at each stage", "Components of the selected stage: Output after residual add 2",
                 "SwiGLU, hidden unit by hidden unit"):
        expect(page.get_by_role("img", name=name, exact=True)).to_be_visible()
        expect(page.get_by_text(f"Describe “{name}” in words")).to_be_visible()
    expect(page.locator(".bt-figure-pending")).to_have_count(0)
    opened.assert_clean()


def test_the_page_arrives_titled_with_its_scripts_gzipped(browser, lan_server) -> None:
    """A student's Chromium gets BokehJS and Panel's bundle gzipped, shows the page's own title, and the
    page works (a page sent before its session is built: app/tuning/early_page.py, app/tuning/compressed_static.py)."""
    context = browser.new_context(viewport={"width": 1280, "height": 900}, extra_http_headers=STUDENT_LAPTOP)
    try:
        page = context.new_page()
        encodings: dict[str, str | None] = {}

        def on_response(response) -> None:
            name = response.url.split("?")[0].rsplit("/", 1)[-1]
            if name.endswith(".js"):
                encodings[name] = response.headers.get("content-encoding")

        page.on("response", on_response)
        for _ in range(2):  # the route's first page, then one sent before its session is built
            page.goto(lan_server.url(lan_server.teacher_link(TRACE)))
            ready(page)
            expect(page).to_have_title("Pre-norm Transformer block trace · blocktrace")
        assert encodings.get("bokeh.min.js") == "gzip" and encodings.get("panel.min.js") == "gzip", encodings
        set_vector(page, "1, 2, 3, 4")
        expect(numbers(stage_row(page, "Input residual stream")).first).to_have_text("+1.000")
    finally:
        context.close()


def test_panels_stylesheets_are_fetched_once_while_the_websocket_opens(browser, server) -> None:
    """An early page asks for Panel's component stylesheets when its scripts have run, not after the
    document has come over the websocket (app/tuning/early_page.py), and the document's own links reuse them."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        page = context.new_page()
        page.add_init_script("""(() => { const Original = window.WebSocket;
          window.WebSocket = function (...args) {
            window.__wsOpenedAt ??= performance.now();
            return new Original(...args);
          };
          window.WebSocket.prototype = Original.prototype; Object.assign(window.WebSocket, Original); })();""")
        for _ in range(2):  # the route's first page, then one sent before its session is built
            page.goto(server.url(server.teacher_link(TRACE)))
            ready(page)
        fetched = page.evaluate("""() => performance.getEntriesByType('resource')
            .filter(r => r.initiatorType === 'link' && r.name.split('?')[0].endsWith('.css'))
            .map(r => [r.name, r.startTime])""")
        opened = page.evaluate("window.__wsOpenedAt")
        names = [name for name, _ in fetched]
        assert any("/static/extensions/panel/" in name for name in names), names
        assert len(names) == len(set(names)), names  # each stylesheet fetched once
        late = [name for name, start in fetched if start > opened]
        assert late == [], f"asked for after the websocket opened at {opened:.0f} ms: {late}"
    finally:
        context.close()


def test_no_request_leaves_the_server_and_no_console_errors(open_page) -> None:
    """The index and the explorable (gate and controls used) load everything from this server, without errors."""
    index = open_page("/")
    expect(index.page.get_by_role("link", name="Pre-norm Transformer block trace")).to_be_visible()
    index.page.get_by_role("link", name="Pre-norm Transformer block trace").click()
    expect(index.page).to_have_url(re.compile(re.escape(TRACE)))
    locked(index.page)
    page = index.page
    page.get_by_label(ANSWER).check()
    page.get_by_role("button", name="Commit prediction").click()
    expect(page.get_by_label(NORM)).to_be_enabled()
    page.get_by_label(NORM).select_option(label="Mean-centred (LayerNorm)")
    expect(stage_row(page, "LayerNorm 1")).to_be_visible()
    page.get_by_role("button", name="Reset").click()
    expect(stage_row(page, "RMSNorm 1")).to_be_visible()
    assert index.requests, "no requests were recorded"
    assert any(u.startswith("ws://") for u in index.requests), "the websocket was not recorded"
    assert index.outside_requests() == []
    assert index.console_errors == []


LINKED = {"input": "0.3, -1.2, 4, 0.5, 2, -0.25", "attention_scale": "0.5", "residual": "replace",
          "norm": "layernorm", "stage": "blocks.0.mlp.hidden"}


def cells_of(table: Locator) -> list[tuple[str, list[str]]]:
    """(row header, filled cells) of each body row, as the page shows them."""
    out = []
    for row in table.locator("tbody tr").all():
        out.append((row.locator("th").inner_text().strip(), row.locator("td:not(.empty)").all_inner_texts()))
    return out


def test_the_numbers_drawn_are_the_engines(open_page) -> None:
    """Every number the browser draws from the payload (stage table, SwiGLU and comparison tables, the charts'
    hover values and words) is the engine's, written as numbers.number() writes it, for a linked state that
    exercises widths, replace mode, LayerNorm and the hidden stage."""
    from blocktrace.explorables.components.numbers import norm, number
    from blocktrace.explorables.transformer_block_trace import describe
    from blocktrace.explorables.transformer_block_trace.quantities import SWIGLU_SERIES, swiglu_parts
    from blocktrace.explorables.transformer_block_trace.state import ROW_KEYS, TraceState

    state = TraceState(input_text=LINKED["input"], attention_scale=0.5, replace=True, norm="layernorm",
                       inspect="blocks.0.mlp.hidden")
    opened = open_page(f"{TRACE}?{urlencode(LINKED)}", teacher_link=True)
    page = opened.page
    expect(stage_row(page, "Output after the MLP replaced it")).to_be_visible()
    lost = state.lost_at()
    expected = [(state.trace.stage(k).label + (" input lost here" if k == lost else ""),
                 [number(v, signed=True) for v in state.trace[k][0]] + [number(norm(state.trace[k][0]))])
                for k in ROW_KEYS]
    assert [(" ".join(h.split()), c) for h, c in cells_of(stage_table(page))] == expected
    parts = swiglu_parts(state)
    assert cells_of(page.get_by_role("table", name="SwiGLU detail")) == [
        (f"h{i}", [number(parts[name][i], signed=True) for name in SWIGLU_SERIES]) for i in range(len(parts["gate"]))]
    assert cells_of(page.get_by_role("table", name=re.compile("^Compared with the default block"))) == [
        (state.trace.stage(k).label, [number(norm(state.baseline[k][0])), number(norm(state.trace[k][0])),
                                      number(norm(state.trace[k][0] - state.baseline[k][0]))]) for k in ROW_KEYS]
    for title, sentences in (("Norm ‖·‖ at each stage", describe.norm_sentences(state)),
                             ("SwiGLU, hidden unit by hidden unit", describe.swiglu_sentences(state))):
        figure = page.locator("figure.dv-chart").filter(has=page.get_by_role("img", name=title, exact=True))
        figure.get_by_text(f"Describe “{title}” in words").click()
        expect(figure.locator("details p")).to_have_text(" ".join(sentences))
    # Hover values: a bar of the inspected stage, then a dot of the norm line.
    comp = page.locator("figure.dv-chart").filter(has_text="Components of the selected stage")
    comp.locator("rect.dv-mark").first.hover()
    expect(comp.locator(".dv-readout")).to_have_text(
        "h₀: " + number(state.trace["blocks.0.mlp.hidden"][0][0], signed=True))
    norms = page.locator("figure.dv-chart").filter(has_text="Norm ‖·‖ at each stage")
    norms.locator("circle.dv-dot").last.hover()
    expect(norms.locator(".dv-readout")).to_have_text(
        "this run, output: ‖·‖ " + number(norm(state.trace["blocks.0.resid_post"][0])))
    opened.assert_clean()


def test_each_chart_downloads_as_a_png(open_page) -> None:
    """Each chart's PNG button gives a PNG of the chart as drawn (twice its size on screen, so it prints sharp);
    the button waits for the commit with the chart."""
    opened = open_page(TRACE)
    page = opened.page
    locked(page)
    expect(page.get_by_role("button", name=re.compile("as PNG$"))).to_have_count(0)
    page.get_by_label(ANSWER).check()
    page.get_by_role("button", name="Commit prediction").click()
    ready(page)
    for title, name in (("Norm ‖·‖ at each stage", "norms"), ("SwiGLU, hidden unit by hidden unit", "swiglu")):
        svg = page.get_by_role("img", name=title, exact=True).element_handle()
        button = page.get_by_role("button", name=f"Download “{title}” as PNG")
        with page.expect_download() as info:  # the size read and the click in one task: no redraw between them
            width, height = button.evaluate(
                "(button, svg) => { const size = [Number(svg.getAttribute('width')),"
                " Number(svg.getAttribute('height'))]; button.click(); return size; }", svg)
        assert info.value.suggested_filename == f"transformer-block-trace-{name}.png"
        data = Path(info.value.path()).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
        assert (int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")) == (2 * width, 2 * height)
    opened.assert_clean()


def test_the_title_and_question_show_before_the_scripts_run(browser, server) -> None:
    """With none of its scripts loaded (a slow school network, 2.7 MB still on the way), the page already shows its
    title and its question, as plain HTML; once the page is drawn they are not shown twice."""
    from blocktrace.explorables.transformer_block_trace.view import QUESTION, TITLE

    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True)
    try:
        page = context.new_page()
        page.route(re.compile(r"\.js(\?|$)"), lambda route: route.abort())
        for _ in range(2):  # the route's first page, then an early one (app/tuning/early_page.py)
            page.goto(server.url(TRACE))
            expect(page.get_by_role("heading", name=TITLE, level=1)).to_be_visible()
            expect(page.get_by_text(QUESTION)).to_be_visible()
        page.unroute(re.compile(r"\.js(\?|$)"))
        page.goto(server.url(TRACE))
        locked(page)
        expect(page.get_by_role("heading", name=TITLE, level=1)).to_have_count(1)  # the page's own, drawn
    finally:
        context.close()


def test_server_logged_no_traceback(server) -> None:
    """After every browser session above (bad input included), the server has logged no traceback."""
    log = server.log()
    failures = [line for line in log.splitlines() if "Traceback" in line or " ERROR" in line]
    assert failures == [], "\n".join(failures)
