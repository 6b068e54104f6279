"""Page shell and the index page: built fresh for every session."""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from pathlib import Path
from urllib.parse import urlencode

import panel as pn
from bokeh.core.templates import get_env

from blocktrace.app.server import loop_pauses, session_memory
from blocktrace.app.server.catalogue import EXPLORABLES
from blocktrace.app.server.session_setup import for_a_browser
from blocktrace.explorables.components.build_turns import serving_loop
from blocktrace.explorables.components.style import dark, styled

__all__ = ["apply_theme", "index_page", "lesson_cards", "page_title", "query_flag", "shell", "theme_of"]

SITE = "blocktrace"
TAGLINE = "inside one floor of a language model"


def query_flag(query: Mapping[str, str], key: str, default: bool) -> bool:
    value = query.get(key)
    if value is None:
        return default
    return value.lower() not in ("0", "off", "false", "no")


def theme_of(query: Mapping[str, str]) -> str:
    """Light unless the link says ?theme=dark."""
    return "dark" if query.get("theme") == "dark" else "light"


def apply_theme(query: Mapping[str, str]) -> str:
    """Sets Panel's and Bokeh's theme (theme_of the query) for this session only."""
    theme = theme_of(query)
    if theme == "dark":
        pn.config.theme = "dark"
        if pn.state.curdoc is not None:
            pn.state.curdoc.theme = "dark_minimal"
    return theme


def theme_link(query: Mapping[str, str]) -> str:
    other = "light" if query.get("theme") == "dark" else "dark"
    rest = {k: v for k, v in query.items() if k != "theme" and not k.startswith("bokeh-")}
    href = "?" + urlencode({**rest, "theme": other})
    return f'<a class="bt-theme" href="{escape(href)}">{"Light" if other == "light" else "Dark"} theme</a>'


# Panel's page template with the viewport for phones and the title and question shown before the scripts run
# (templates/page.html), compiled once in Bokeh's own template environment: a document's template given as text
# is compiled again for every page.
PAGE_TEMPLATE = get_env().from_string((Path(__file__).parent / "templates" / "page.html").read_text("utf-8"))


def page_title(title: str) -> str:
    """The browser tab's title of a page: its own name, then the site's."""
    return f"{title} · {SITE}"


def shell(body: pn.viewable.Viewable, title: str, embed: bool = False,
          question: str | None = None) -> pn.viewable.Viewable:
    """Header with the home link around a page's body; the body alone when embedded (?embed=1), which in an
    iframe reports its height to the page around it (explorables/components/embed.py). The page's HTML shows
    its title and `question` while its scripts load (templates/page.html)."""
    from blocktrace.explorables.components.a11y import name_widgets_script

    if pn.state.curdoc is not None and pn.state.curdoc.session_context is not None:
        pn.state.curdoc.js_on_event("document_ready", name_widgets_script())
    if pn.state.curdoc is not None:
        pn.state.curdoc.title = page_title(title)
        pn.state.curdoc.template = PAGE_TEMPLATE  # the same for every link of a route: early_page keeps one
        pn.state.curdoc.template_variables.update(early_title=title, early_question=question, early_dark=dark())
    if embed:  # as tall as its content: the page framing it sizes the iframe to the height it reports
        from blocktrace.explorables.components.embed import frame_height_script, is_script_tag_session

        if pn.state.curdoc is not None and pn.state.curdoc.session_context is not None \
                and not is_script_tag_session():
            pn.state.curdoc.js_on_event("document_ready", frame_height_script())
        return tracked(pn.Column(body, sizing_mode="stretch_width", styles={"padding": "0.25rem"}))
    from blocktrace.explorables.components.url_state import session_query

    header = pn.pane.HTML(
        f'<header class="bt-header"><a class="bt-home" href="/">{SITE}</a>'
        f'<span class="bt-tagline">{escape(TAGLINE)}</span>{theme_link(session_query())}</header>',
        **styled(sizing_mode="stretch_width"),
    )
    styles = {"max-width": "1400px", "margin": "0 auto", "padding": "0 0.75rem"}
    if dark():
        styles.update({"background": "#0d1117", "color": "#e6edf3"})
    return tracked(pn.Column(header, body, sizing_mode="stretch_width", styles=styles))


def tracked(page: pn.viewable.Viewable) -> pn.viewable.Viewable:
    """The page, its memory looked after (session_memory.py): frozen once built, given back once it closes; the
    serving process's event loop watched for pauses from its first page on (loop_pauses.py)."""
    session_memory.track_page(page)
    doc = pn.state.curdoc
    if doc is not None and for_a_browser(doc.session_context):
        loop_pauses.start(serving_loop(doc))
    return page


def lesson_cards(flat: bool = False, class_code: str | None = None) -> str:
    from blocktrace.app.classroom.join import with_class
    from blocktrace.app.lessons.loading import load_lessons

    if flat:
        return '<p class="bt-muted">Lessons are served by <code>blocktrace serve</code>.</p>'
    cards = []
    for lesson in load_lessons():
        objectives = "".join(f"<li>{escape(o)}</li>" for o in lesson.objectives)
        needs = ", ".join(lesson.prerequisites) or "none"
        cards.append(
            f'<article class="bt-card"><span class="bt-badge">lesson {lesson.order}</span>'
            f'<h3><a href="{escape(with_class(lesson.route, class_code))}">{escape(lesson.title)}</a></h3>'
            f"<p><strong>You will</strong></p><ul>{objectives}</ul>"
            f'<p class="bt-muted">Before this: {escape(needs)}</p></article>'
        )
    return "".join(cards)


def classroom_on() -> bool:
    """Whether this server records a class (not `--no-classroom`)."""
    from blocktrace.app.classroom import learner

    return learner.current() is not None


def index_page(flat: bool = False) -> pn.viewable.Viewable:
    """The index; flat=True links explorables as /<id>, as plain `panel serve app/server/apps/*.py` routes them.
    In a served classroom it also says which class this browser is in, with the field to join one, and the
    learner's name field."""
    from blocktrace.app.classroom import learner
    from blocktrace.app.classroom.join import class_of, index_join_section, refusal, with_class
    from blocktrace.app.server.session_setup import learner_bar, start_session
    from blocktrace.explorables.components.url_state import session_query

    query = session_query()
    apply_theme(query)
    code, join, bar = None, "", None
    if not flat and classroom_on():
        classroom = learner.current()
        code = class_of(query, dict(pn.state.cookies or {}), classroom.admits)
        join = index_join_section(code, refusal(query.get("class"), classroom.admits, classroom.thread.classes))
        bar = learner_bar(start_session(query), class_shown=False)
    cards = []
    for e in EXPLORABLES:
        route = f"/{e.id}" if flat else with_class(e.route, code)
        objectives = "".join(f"<li>{escape(o)}</li>" for o in e.objectives)
        cards.append(
            f'<article class="bt-card"><span class="bt-badge">{escape(e.kind)}</span>'
            f'<h3><a href="{escape(route)}">{escape(e.title)}</a></h3>'
            f"<p>{escape(e.summary)}</p><p><strong>You will</strong></p><ul>{objectives}</ul></article>"
        )
    top = (
        '<h1 class="bt-title">Explore the Transformer block</h1>'
        '<p class="bt-lead">Predict what a change will do, then change it and read every intermediate. '
        "Each explorable runs on your teacher's server; nothing loads from elsewhere.</p>"
        f"{join}"
    )
    rest = (
        '<h2 class="bt-h2">Lessons, in order</h2>'
        f'<section class="bt-cards" aria-label="Lessons">{lesson_cards(flat, code)}</section>'
        '<h2 class="bt-h2">Explorables</h2>'
        f'<section class="bt-cards" aria-label="Explorables">{"".join(cards)}</section>'
    )
    if bar is None:
        body = pn.pane.HTML(top + rest, **styled(sizing_mode="stretch_width"))
    else:  # the name field under "Your class"
        body = pn.Column(pn.pane.HTML(top, **styled(sizing_mode="stretch_width")), bar,
                         pn.pane.HTML(rest, **styled(sizing_mode="stretch_width")), sizing_mode="stretch_width")
    return shell(body, index_page.title)


index_page.title = "Explorables"
