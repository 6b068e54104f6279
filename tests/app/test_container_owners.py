"""app/tuning/container_owners.py: Bokeh's list and dict property values notify their owners as before."""

from __future__ import annotations

import pytest
from bokeh.core.property.wrappers import PropertyValueContainer
from bokeh.document import Document
from bokeh.document.events import ColumnDataChangedEvent, ModelChangedEvent
from bokeh.models import ColumnDataSource, Div

from blocktrace.app.tuning import container_owners


@pytest.fixture
def patched():
    """The patch installed, as a tuned server has it from its start (idempotent; left installed, like the
    other tuning tests: containers made under it rely on it)."""
    container_owners.apply()


def events_of(doc: Document) -> list:
    seen: list = []
    doc.on_change(lambda event: seen.append(event))
    return seen


def test_a_default_container_holds_its_owner_in_a_tuple(patched) -> None:
    div = Div()
    assert type(div.css_classes._owners) is tuple
    assert [owner for owner, _descriptor in div.css_classes._owners] == [div]
    assert PropertyValueContainer._owners == ()  # the shared empty tuple is never changed


def test_mutating_a_list_in_place_tells_the_document(patched) -> None:
    div = Div(text="x")
    doc = Document()
    doc.add_root(div)
    seen = events_of(doc)
    div.css_classes.append("bt-card")
    assert [(type(e), e.attr, list(e.new)) for e in seen] == [(ModelChangedEvent, "css_classes", ["bt-card"])]


def test_one_container_on_two_models_tells_both_and_each_once(patched) -> None:
    first, second = Div(), Div()
    shared = first.tags
    second.tags = shared  # Bokeh wraps the value it is given; take the one the second model holds
    held = second.tags
    held._register_owner(first, first.lookup("tags"))  # registering again changes nothing
    owners = [owner for owner, _ in held._owners]
    assert owners.count(first) <= 1 and owners.count(second) == 1
    doc = Document()
    doc.add_root(second)
    seen = events_of(doc)
    held.append("seen")
    assert [e.model for e in seen if isinstance(e, ModelChangedEvent)] == [second]


def test_an_owner_that_lets_go_is_not_told_again(patched) -> None:
    first, second = Div(), Div()
    held = first.tags
    descriptor = first.lookup("tags")
    held._register_owner(second, descriptor)
    held._unregister_owner(first, descriptor)
    held._unregister_owner(first, descriptor)  # a second time changes nothing
    assert held._owners == ((second, descriptor),)
    doc = Document()
    doc.add_root(first)
    seen = events_of(doc)
    held.append("stale")
    assert seen == []


def test_column_data_changes_still_reach_the_document(patched) -> None:
    source = ColumnDataSource({"x": [1, 2]})
    doc = Document()
    doc.add_root(source)
    seen = events_of(doc)
    source.data.update(x=[3, 4])
    source.patch({"x": [(0, 9)]})
    kinds = [type(e.hint).__name__ if isinstance(e, ModelChangedEvent) and e.hint else type(e).__name__
             for e in seen]
    assert kinds == [ColumnDataChangedEvent.__name__, "ColumnsPatchedEvent"]
    assert list(source.data["x"]) == [9, 4]
