"""The settings part of the Store (`store.settings`): the project's defaults (JSON values by
key), never an API key."""

from __future__ import annotations

import json
from typing import Any

from sessions.connection import StoreError
from sessions.database import Database


class Settings:
    """The settings table."""

    def __init__(self, database: Database):
        self._database = database

    def get(self, key: str, default: Any = None) -> Any:
        """The value stored under `key` (JSON read back), or `default`."""
        r = self._database.db.execute("select value from settings where key = ?", [key]).fetchone()
        return default if r is None else json.loads(r[0])

    def set(self, key: str, value: Any) -> None:
        """Store `value` (JSON) under `key`, replacing what was there. Raises StoreError for a key
        that names an API key: keys are never stored."""
        if "key" in key.lower() and "api" in key.lower():
            raise StoreError("API keys are never stored in the database")
        with self._database.transaction():
            self._database.db.table("settings").upsert({"key": key, "value": json.dumps(value)}, pk="key")
