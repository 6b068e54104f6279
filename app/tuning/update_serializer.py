"""Document updates (PATCH-DOC) both ways without a pass over every model of the page for each one.

Bokeh's `patch_doc.create` starts each update with `Serializer(references=synced_references)`: a set
of every model the browser already has, then a dict with a fresh reference object for each. A
block-trace page has about 300 models and an update names a dozen, so that set-up was the largest
single cost of sending an update: about an eighth of the server's time in a class of 100.

Here the serializer asks the document, when it meets a model, whether the browser already has it,
and makes that model's reference then. The message is the same, byte for byte (tested against
Bokeh's own); the document's list of models still new to the browser is updated the same way.

The other way, `Document.apply_json_patch` starts each update from the browser by building a map
from id to model over every model, reading each model's id property. The document keeps that
very map; here it is copied in one step instead. The rest of the method is Bokeh's.

Upstream: app/tuning/UPSTREAM.md, "update_serializer" (what would retire this patch).
"""

from __future__ import annotations

import logging
from typing import Any

from bokeh.core.serialization import Deserializer, Ref, Serializer, UnknownReferenceError
from bokeh.document import Document
from bokeh.document.events import DocumentPatchedEvent
from bokeh.model import Model
from bokeh.protocol.messages.patch_doc import PatchJson, patch_doc

_original_create = patch_doc.create
_original_apply = Document.apply_json_patch


class SyncedSerializer(Serializer):
    """A Serializer whose known references are the document's synced models, looked up when met."""

    def __init__(self, doc: Document):
        super().__init__()
        self._doc_models = doc.models

    def _synced(self, obj: Any) -> bool:
        models = self._doc_models
        return isinstance(obj, Model) and models.get_by_id(obj.id) is obj and obj not in models._new_models

    def has_ref(self, obj: Any) -> bool:
        return super().has_ref(obj) or self._synced(obj)

    def get_ref(self, obj: Any) -> Ref | None:
        ref = self._references.get(id(obj))
        if ref is None and self._synced(obj):
            ref = self._references[id(obj)] = obj.ref
        return ref


def create(cls, events, **metadata) -> patch_doc:
    """`patch_doc.create`, with the serializer above (the checks and the steps are Bokeh's)."""
    header = cls.create_header()
    if not events:
        raise ValueError("PATCH-DOC message requires at least one event")
    docs = {event.document for event in events}
    if len(docs) != 1:
        raise ValueError("PATCH-DOC message configured with events for more than one document")
    [doc] = docs
    serializer = SyncedSerializer(doc)
    patch_json = PatchJson(events=serializer.encode(events))
    doc.models.flush_synced(lambda model: not serializer.has_ref(model))
    msg = cls(header, metadata, patch_json)
    msg.add_buffers(*serializer.buffers)
    return msg


def apply_json_patch(self: Document, patch_json, *, setter=None) -> None:
    """`Document.apply_json_patch`, its deserializer given the document's own id-to-model map."""
    deserializer = Deserializer(setter=setter)
    deserializer._references = dict(self.models._models)  # what Bokeh builds model by model
    try:
        patch = deserializer.deserialize(patch_json)
    except UnknownReferenceError as error:
        if self.models.seen(error.id):
            logging.getLogger("bokeh.document.document").debug(
                "Dropping a patch because it contains a previously known reference (id=%r).", error.id)
            return
        raise
    events = patch["events"]
    assert isinstance(events, list)
    for event in events:
        DocumentPatchedEvent.handle_event(self, event, setter)
    self.models.flush_synced(lambda model: not deserializer.has_ref(model))


def apply() -> None:
    """Install once (idempotent)."""
    if patch_doc.create.__func__ is not create:
        patch_doc.create = classmethod(create)
    if Document.apply_json_patch is not apply_json_patch:
        Document.apply_json_patch = apply_json_patch
