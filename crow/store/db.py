"""The chat-state database: one DuckDB file, one connection, one re-entrant lock.

The stores of crow.store (ChatStore and the parts it is made of) share it: every query goes
through ``_query`` / ``_transaction`` under the lock. Times are naive UTC (``now``), given
out as ISO 8601 with a Z (``iso``); tests move ``now`` to test what depends on the day.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

from crow.store.migrations import migrate


def now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def iso(value: datetime | None) -> str | None:
    return None if value is None else value.replace(tzinfo=UTC).isoformat().replace("+00:00", "Z")


class Database:
    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        if str(path) != ":memory:":
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._con = duckdb.connect(str(path))
        self._lock = threading.RLock()  # re-entrant: a check-then-write holds it throughout
        self.applied_migrations = migrate(self._con)

    def file(self) -> str:
        """The database file, resolved (jobs check they reach the app that writes theirs)."""
        return str(self.path.resolve())

    def close(self) -> None:
        with self._lock:
            self._con.close()

    def _query(self, sql: str, params: list[Any] | None = None) -> list[dict[str, Any]]:
        with self._lock:
            cur = self._con.execute(sql, params or [])
            cols = [d[0] for d in cur.description] if cur.description else []
            return [dict(zip(cols, row, strict=True)) for row in cur.fetchall()]

    def _transaction(self, statements: list[tuple[str, list[Any]]]) -> None:
        with self._lock:
            self._con.execute("BEGIN TRANSACTION")
            try:
                for sql, params in statements:
                    self._con.execute(sql, params)
                self._con.execute("COMMIT")
            except BaseException:
                self._con.execute("ROLLBACK")
                raise

    def check_health(self) -> None:
        """Raises unless the database answers and accepts a write."""
        self._transaction([("CREATE OR REPLACE TEMP TABLE _health AS SELECT 1 AS ok", [])])

    # --- organizations ---------------------------------------------------------------
    def ensure_org(self, org_id: str, name: str | None = None) -> None:
        self._query(
            "INSERT INTO organizations VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
            [org_id, name or org_id, now()],
        )

    def list_orgs(self) -> list[dict[str, Any]]:
        return self._query("SELECT id, name FROM organizations ORDER BY id")
