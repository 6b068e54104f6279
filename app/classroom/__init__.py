"""The classroom: learner identity, the durable event store and the outbox for when it is down.

See ``store`` for the rules the store keeps and ``identity`` for the signed learner cookie.
"""

from blocktrace.app.classroom.identity import (
    COOKIE_NAME,
    clean_display_name,
    load_or_create_secret,
    new_learner_id,
    sign,
    valid_class_code,
    valid_learner_id,
    verify,
)
from blocktrace.app.classroom.outbox import Outbox
from blocktrace.app.classroom.schema import SCHEMA_VERSION, SchemaTooNew
from blocktrace.app.classroom.store import (
    MISCONCEPTIONS,
    EventStore,
    Misconception,
    StoredPrediction,
    StoreUnavailable,
    Summary,
    default_url,
    new_event_id,
)

__all__ = [
    "COOKIE_NAME", "MISCONCEPTIONS", "SCHEMA_VERSION", "EventStore", "Misconception", "Outbox", "SchemaTooNew",
    "StoreUnavailable", "StoredPrediction", "Summary", "clean_display_name", "default_url", "load_or_create_secret",
    "new_event_id", "new_learner_id", "sign", "valid_class_code", "valid_learner_id", "verify",
]
