"""Where the LLM judge keeps its verdicts between runs (by default
``WORKSPACE/llm-verdicts.sqlite``), so that a second run sends only what changed."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Collection
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

__all__ = ["CACHE_FILE", "MemoryVerdictCache", "SqliteVerdictCache", "VerdictCache"]

CACHE_FILE = "llm-verdicts.sqlite"


class VerdictCache(Protocol):
    """Where verdicts are kept between runs: key -> (verdict, rationale)."""

    def get_many(self, keys: Collection[str]) -> dict[str, tuple[str, str]]: ...

    def put(self, key: str, trajectory_id: str, verdict: str, rationale: str,
            model: str) -> None: ...


class MemoryVerdictCache:
    """A cache that lives as long as the object (tests, one-off runs)."""

    def __init__(self) -> None:
        self.entries: dict[str, tuple[str, str]] = {}

    def get_many(self, keys: Collection[str]) -> dict[str, tuple[str, str]]:
        return {k: self.entries[k] for k in keys if k in self.entries}

    def put(self, key: str, trajectory_id: str, verdict: str, rationale: str,
            model: str) -> None:
        self.entries[key] = (verdict, rationale)


class SqliteVerdictCache:
    """Verdicts in a SQLite file (stdlib ``sqlite3``; one connection per operation, so it is
    safe from any thread and from several processes, SQLite serialising the writes)."""

    _CHUNK = 500  # keys per IN (...) query, under SQLite's parameter limit

    def __init__(self, path: Path) -> None:
        self.path = path

    @contextlib.contextmanager
    def _connect(self) -> Any:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, timeout=30)
        try:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS llm_verdicts (key TEXT PRIMARY KEY, "
                "trajectory_id TEXT NOT NULL, verdict TEXT NOT NULL, rationale TEXT NOT NULL, "
                "model TEXT NOT NULL, created_at TEXT NOT NULL)"
            )
            yield conn
            conn.commit()
        finally:
            conn.close()

    def get_many(self, keys: Collection[str]) -> dict[str, tuple[str, str]]:
        wanted = list(keys)
        if not wanted or not self.path.exists():
            return {}
        found: dict[str, tuple[str, str]] = {}
        with self._connect() as conn:
            for i in range(0, len(wanted), self._CHUNK):
                chunk = wanted[i : i + self._CHUNK]
                marks = ",".join("?" * len(chunk))
                for key, verdict, rationale in conn.execute(
                    f"SELECT key, verdict, rationale FROM llm_verdicts WHERE key IN ({marks})",
                    chunk,
                ):
                    found[key] = (verdict, rationale)
        return found

    def put(self, key: str, trajectory_id: str, verdict: str, rationale: str,
            model: str) -> None:
        with self._connect() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO llm_verdicts VALUES (?, ?, ?, ?, ?, ?)",
                (key, trajectory_id, verdict, rationale, model,
                 datetime.now(UTC).isoformat(timespec="seconds")),
            )
