"""The teacher's pages and the class-joining sections as Tornado templates (app/classroom/templates/*.html).

Every `{{ value }}` is escaped by the template (Tornado's default autoescape, xhtml_escape), so what a learner
typed (a name, an explanation, a class code) reaches the page as text. `{% raw %}` takes only HTML another of
these templates made. The whitespace of a template's markup collapses to single spaces ("oneline"), so a
template can be laid out on several lines and a sentence wrapped without changing the words on the page.

    render("store_status.html", notices=["..."])  # the page's HTML, a str
"""

from __future__ import annotations

from pathlib import Path

from tornado.template import Loader

__all__ = ["noun", "plural", "render"]

TEMPLATES = Path(__file__).with_name("templates")


def noun(n: int, one: str, many: str | None = None) -> str:
    """'answer' for 1, 'answers' otherwise (or `many`)."""
    return one if n == 1 else (many or one + "s")


def plural(n: int, one: str, many: str | None = None) -> str:
    """'1 answer', '2 answers', '0 answers'."""
    return f"{n} {noun(n, one, many)}"


# One loader for the package: it holds the compiled templates and no state of any session or request.
_LOADER = Loader(str(TEMPLATES), whitespace="oneline", namespace={"noun": noun, "plural": plural})


def render(name: str, **values: object) -> str:
    """The template `name` filled in with `values`, escaped, as text."""
    return _LOADER.load(name).generate(**values).decode("utf-8").strip()
