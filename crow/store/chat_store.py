"""The chat-state store: organizations, chat and Q&A sessions, messages, index versions, jobs.

One DuckDB file with exactly one writer process (the ChatStore deployment, or a job run
while the app is down). Every query that touches org data takes the org id: a session of
another org is indistinguishable from a missing one.
"""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import duckdb

from crow.ids import new_id
from crow.store.migrations import migrate

SessionKind = Literal["chat", "qna"]
Role = Literal["user", "assistant", "system"]
JobState = Literal["pending", "running", "succeeded", "failed", "stopped"]
TITLE_WORDS, TITLE_CHARS = 6, 40


def session_title(first_message: str) -> str:
    """First 6 words of the first user message, at most 40 characters."""
    title = " ".join(first_message.split()[:TITLE_WORDS])
    return title if len(title) <= TITLE_CHARS else title[: TITLE_CHARS - 1].rstrip() + "…"


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.replace(tzinfo=UTC).isoformat().replace("+00:00", "Z")


class ChatStore:
    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        if str(path) != ":memory:":
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._con = duckdb.connect(str(path))
        self._lock = threading.Lock()
        self.applied_migrations = migrate(self._con)

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
            [org_id, name or org_id, _now()],
        )

    def list_orgs(self) -> list[dict[str, Any]]:
        return self._query("SELECT id, name FROM organizations ORDER BY id")

    # --- sessions --------------------------------------------------------------------
    def create_session(
        self, org_id: str, *, kind: SessionKind = "chat", title: str | None = None
    ) -> dict[str, Any]:
        self.ensure_org(org_id)
        sid, now = new_id("ses"), _now()
        self._query(
            "INSERT INTO sessions VALUES (?, ?, ?, ?, ?, ?)", [sid, kind, org_id, title, now, now]
        )
        return self.get_session(org_id, sid, kind=kind)  # type: ignore[return-value]

    def get_session(
        self, org_id: str, session_id: str, *, kind: SessionKind = "chat"
    ) -> dict[str, Any] | None:
        rows = self._query(
            """
            SELECT s.id, s.org_id, s.title, s.created_at, s.updated_at,
                   (SELECT count(*) FROM messages m WHERE m.session_id = s.id) AS message_count
            FROM sessions s WHERE s.id = ? AND s.org_id = ? AND s.kind = ?
            """,
            [session_id, org_id, kind],
        )
        return _session_out(rows[0]) if rows else None

    def list_sessions(
        self, org_id: str, *, kind: SessionKind = "chat", limit: int = 20, offset: int = 0
    ) -> tuple[list[dict[str, Any]], int]:
        """One page of the org's sessions, most recently active first, and the total."""
        rows = self._query(
            """
            SELECT s.id, s.org_id, s.title, s.created_at, s.updated_at,
                   (SELECT count(*) FROM messages m WHERE m.session_id = s.id) AS message_count
            FROM sessions s WHERE s.org_id = ? AND s.kind = ?
            ORDER BY s.updated_at DESC, s.id DESC LIMIT ? OFFSET ?
            """,
            [org_id, kind, limit, offset],
        )
        total = self._query(
            "SELECT count(*) AS n FROM sessions WHERE org_id = ? AND kind = ?", [org_id, kind]
        )[0]["n"]
        return [_session_out(r) for r in rows], total

    def delete_session(self, org_id: str, session_id: str, *, kind: SessionKind = "chat") -> bool:
        if self.get_session(org_id, session_id, kind=kind) is None:
            return False
        self._transaction(
            [
                ("DELETE FROM messages WHERE session_id = ? AND org_id = ?", [session_id, org_id]),
                ("DELETE FROM sessions WHERE id = ? AND org_id = ?", [session_id, org_id]),
            ]
        )
        return True

    # --- messages --------------------------------------------------------------------
    def add_message(
        self,
        org_id: str,
        session_id: str,
        role: Role,
        content: str,
        *,
        kind: SessionKind = "chat",
        sources: list[dict[str, Any]] | None = None,
        tool_steps: list[dict[str, Any]] | None = None,
        timings: dict[str, float] | None = None,
        message_id: str | None = None,
    ) -> dict[str, Any] | None:
        """Append a message; None when the session is not this org's. Idempotent on message_id."""
        session = self.get_session(org_id, session_id, kind=kind)
        if session is None:
            return None
        mid = message_id or new_id("msg")
        existing = self.get_message(org_id, mid)
        if existing is not None:
            return existing
        now = _now()
        statements = [
            (
                """
                INSERT INTO messages
                SELECT ?, ?, ?, coalesce(max(seq), 0) + 1, ?, ?, ?, ?, ?, ?
                FROM messages WHERE session_id = ?
                """,
                [
                    mid, session_id, org_id, role, content,
                    json.dumps(sources or []), json.dumps(tool_steps or []),
                    json.dumps(timings or {}), now, session_id,
                ],
            ),
            ("UPDATE sessions SET updated_at = ? WHERE id = ?", [now, session_id]),
        ]  # fmt: skip
        if role == "user" and not session["title"]:
            statements.append(
                ("UPDATE sessions SET title = ? WHERE id = ?", [session_title(content), session_id])
            )
        self._transaction(statements)
        return self.get_message(org_id, mid)

    def get_message(self, org_id: str, message_id: str) -> dict[str, Any] | None:
        rows = self._query(
            f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE id = ? AND org_id = ?",
            [message_id, org_id],
        )
        return _message_out(rows[0]) if rows else None

    def list_messages(
        self,
        org_id: str,
        session_id: str,
        *,
        limit: int = 50,
        before: int | None = None,
    ) -> list[dict[str, Any]]:
        """The `limit` latest messages older than seq `before`, oldest first."""
        rows = self._query(
            f"""
            SELECT * FROM (
                SELECT {_MESSAGE_COLUMNS} FROM messages
                WHERE session_id = ? AND org_id = ? AND seq < ?
                ORDER BY seq DESC LIMIT ?
            ) ORDER BY seq
            """,
            [session_id, org_id, before if before is not None else 2**62, limit],
        )
        return [_message_out(r) for r in rows]

    # --- index versions and job runs -------------------------------------------------
    def record_index_version(
        self, org_id: str, collection: str, version: str, *, kind: str, row_count: int, model: str
    ) -> None:
        self._query(
            "INSERT OR REPLACE INTO index_versions VALUES (?, ?, ?, ?, ?, ?, ?)",
            [org_id, collection, version, kind, row_count, model, _now()],
        )

    def list_index_versions(self, org_id: str) -> list[dict[str, Any]]:
        rows = self._query(
            "SELECT * FROM index_versions WHERE org_id = ? ORDER BY collection, created_at",
            [org_id],
        )
        return [{**r, "created_at": _iso(r["created_at"])} for r in rows]

    def create_job_run(
        self, org_id: str, kind: str, *, job_id: str | None = None
    ) -> dict[str, Any]:
        jid, now = job_id or new_id("job"), _now()
        self._query(
            "INSERT INTO job_runs VALUES (?, ?, ?, 'pending', 0, NULL, NULL, ?, ?)",
            [jid, org_id, kind, now, now],
        )
        return self.get_job_run(org_id, jid)  # type: ignore[return-value]

    def update_job_run(
        self,
        org_id: str,
        job_id: str,
        *,
        state: JobState | None = None,
        rows_done: int | None = None,
        rows_total: int | None = None,
        detail: str | None = None,
    ) -> None:
        self._query(
            """
            UPDATE job_runs SET state = coalesce(?, state), rows_done = coalesce(?, rows_done),
                rows_total = coalesce(?, rows_total), detail = coalesce(?, detail), updated_at = ?
            WHERE id = ? AND org_id = ?
            """,
            [state, rows_done, rows_total, detail, _now(), job_id, org_id],
        )

    def get_job_run(self, org_id: str, job_id: str) -> dict[str, Any] | None:
        rows = self._query("SELECT * FROM job_runs WHERE id = ? AND org_id = ?", [job_id, org_id])
        if not rows:
            return None
        r = rows[0]
        return {**r, "created_at": _iso(r["created_at"]), "updated_at": _iso(r["updated_at"])}


_MESSAGE_COLUMNS = "id, session_id, seq, role, content, sources, tool_steps, timings, created_at"


def _session_out(row: dict[str, Any]) -> dict[str, Any]:
    return {
        **row,
        "created_at": _iso(row["created_at"]),
        "updated_at": _iso(row["updated_at"]),
    }


def _message_out(row: dict[str, Any]) -> dict[str, Any]:
    return {
        **row,
        "sources": json.loads(row["sources"]),
        "tool_steps": json.loads(row["tool_steps"]),
        "timings": json.loads(row["timings"]),
        "created_at": _iso(row["created_at"]),
    }
