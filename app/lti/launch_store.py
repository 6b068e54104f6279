"""PyLTI1p3's launch data storage, kept in the class database: every app process sees what another kept.

A launch's nonce is made by the process that answers the login and checked by whichever answers the launch;
`take` removes it in the same statement that finds it, so a replayed id_token finds it gone.
There is no session cookie (get_session_cookie_name is None): in an LMS's frame the browser may keep none.
"""

from __future__ import annotations

import json
from typing import Any

from pylti1p3.launch_data_storage.base import LaunchDataStorage

from blocktrace.app.classroom.store import EventStore

__all__ = ["DEFAULT_SECONDS", "StoreLaunchData"]

DEFAULT_SECONDS = 600  # a login must reach its launch within ten minutes


class StoreLaunchData(LaunchDataStorage[Any]):
    def __init__(self, store: EventStore) -> None:
        super().__init__()
        self.store = store

    def get_session_cookie_name(self) -> str | None:
        return None

    def can_set_keys_expiration(self) -> bool:
        return True

    def get_value(self, key: str) -> Any:
        value = self.store.lti_get(self._prepare_key(key))
        return None if value is None else json.loads(value)

    def set_value(self, key: str, value: Any, exp: int | None = None) -> None:
        self.store.lti_put(self._prepare_key(key), json.dumps(value), exp or DEFAULT_SECONDS)

    def check_value(self, key: str) -> bool:
        return self.store.lti_get(self._prepare_key(key)) is not None

    def take(self, key: str) -> bool:
        """Remove the value under `key`; True only for the one call that found it unexpired."""
        return self.store.lti_take(self._prepare_key(key))
