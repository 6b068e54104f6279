"""Bokeh's serialization of a model, and its walk over a document's models, without working out
defaults that cannot change the result.

To write a model into a message (`to_serializable`), Bokeh 3.9 asks `query_properties_with_values`
for the properties set on it, and that method first gets the value of every property the model
has, defaults included (each one built and validated), before it drops the ones that were never
set. A Panel model has a hundred-odd properties and sets a dozen. So writing the explorable's
document (70 models) for its browser (PULL-DOC) took about 22 ms of the server's time, on the path
between the websocket opening and the page being drawn; here it takes 8 ms. The figures that follow
the page, and every update that adds models, are written the same way.

Here a property that was not set is passed over without getting its value when getting it could
change nothing: its default is stable (Bokeh does not keep it on the model) and defined (getting it
cannot raise). Every other property is got exactly as before, so the result, and what the model
keeps, are Bokeh's (tests/app/test_lean_properties.py compares them on every model of every page).

The same test serves Bokeh's walk to the models a model refers to (`visit_immediate_value_references`,
behind `Model.references()` and the document's `recompute` of its model set): a passable property that
was never set holds a plain value (a number, a string, None), which refers to no model, so its value
is not got. Each time a page places content after loading (figures, later tables), Bokeh walks the
whole document again: for the block trace's page (218 models) that walk took 18.0 ms and takes 8.8 ms
here (benchmarks/document_walk.py). The models found are Bokeh's (the test compares them on every model
of every page).

Upstream: app/tuning/UPSTREAM.md, "lean_properties" (what would retire this patch).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bokeh.core.has_props import HasProps
from bokeh.core.property.descriptors import PropertyDescriptor, UnsetValueError
from bokeh.core.property.singletons import Undefined
from bokeh.core.property.wrappers import PropertyValueContainer
from bokeh.model import util

_original = HasProps.query_properties_with_values
_original_walk = util.visit_immediate_value_references
_PASSABLE: dict[type, frozenset[str]] = {}  # model class -> properties whose default needs no getting


def passable(cls: type[HasProps]) -> frozenset[str]:
    """The properties of `cls` whose default is stable (by Bokeh's own test, `has_unstable_default`,
    overrides included) and defined."""
    found = _PASSABLE.get(cls)
    if found is None:
        overridden = cls._overridden_defaults()
        names = set()
        for name in cls.properties(_with_props=True):
            descriptor = cls.lookup(name)
            if not isinstance(descriptor, PropertyDescriptor):  # an alias: left to Bokeh's own path
                continue
            if descriptor.property._may_have_unstable_default():
                continue
            if PropertyDescriptor.is_unstable(cls.__overridden_defaults__.get(name, None)):
                continue
            if overridden.get(name, descriptor.property._default) is Undefined:
                continue
            names.add(name)
        found = _PASSABLE[cls] = frozenset(names)
    return found


def query_properties_with_values(self, query: Callable[[PropertyDescriptor[Any]], bool], *,
                                 include_defaults: bool = True, include_undefined: bool = False) -> dict[str, Any]:
    """Bokeh's method; with include_defaults=False, unset properties in `passable` are not got."""
    if include_defaults:
        return _original(self, query, include_defaults=include_defaults, include_undefined=include_undefined)

    themed_keys: set[str] = set()
    result: dict[str, Any] = {}
    keys = self.properties(_with_props=True)
    selected_keys = set(self._property_values.keys()) | set(self._unstable_default_values.keys())
    themed_values = self.themed_values()
    if themed_values is not None:
        themed_keys = set(themed_values.keys())
        selected_keys |= themed_keys
    skip = passable(type(self))

    for key in keys:
        if key not in selected_keys and key in skip:
            continue
        descriptor = self.lookup(key)
        if not query(descriptor):
            continue
        try:
            value = descriptor.get_value(self)
        except UnsetValueError:
            if include_undefined:
                value = Undefined
            else:
                raise
        else:
            if key not in selected_keys:
                continue
            if key not in themed_keys:
                if isinstance(value, PropertyValueContainer) and key in self._unstable_default_values:
                    continue
        result[key] = value

    return result


def visit_immediate_value_references(value: Any, visitor: Callable[[Any], None]) -> None:
    """Bokeh's function; an unset property of `value` in `passable` (not kept, not themed) is not got."""
    if not isinstance(value, HasProps):
        util.visit_value_and_its_immediate_references(value, visitor)
        return
    skip = passable(type(value))
    held, kept = value._property_values, value._unstable_default_values
    themed = value.themed_values() or ()
    for name in value.properties_with_refs():
        if name in skip and name not in held and name not in kept and name not in themed:
            continue
        util.visit_value_and_its_immediate_references(getattr(value, name), visitor)


def apply() -> None:
    """Install once (idempotent)."""
    if HasProps.query_properties_with_values is not query_properties_with_values:
        HasProps.query_properties_with_values = query_properties_with_values
    util.visit_immediate_value_references = visit_immediate_value_references
