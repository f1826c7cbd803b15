"""The chat-state store: organizations, chat and Q&A sessions, messages, index versions, jobs.

One DuckDB file with exactly one writer process (the ChatStore deployment, or a job run
while the app is down). Every query that touches org data takes the org id: a session of
another org is indistinguishable from a missing one.
"""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

import duckdb

from crow.auth.keys import Principal, new_key, secret_matches, split_key
from crow.auth.limiter import TokenBuckets
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
        self._lock = threading.RLock()  # re-entrant: a check-then-write holds it throughout
        self.applied_migrations = migrate(self._con)
        self.buckets = TokenBuckets()  # rate limits: this store is the one place that holds them

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
        self, org_id: str, *, kind: SessionKind = "chat", title: str | None = None,
        max_sessions: int | None = None,
    ) -> dict[str, Any] | None:  # fmt: skip
        """The new session; None when the org already has `max_sessions` sessions."""
        self.ensure_org(org_id)
        sid, now = new_id("ses"), _now()
        insert = "INSERT INTO sessions SELECT ?, ?, ?, ?, ?, ?"
        params: list[Any] = [sid, kind, org_id, title, now, now]
        if max_sessions is not None:  # counted and inserted in one statement: no race past it
            insert += " WHERE (SELECT count(*) FROM sessions WHERE org_id = ?) < ?"
            params += [org_id, max_sessions]
        self._query(insert, params)
        return self.get_session(org_id, sid, kind=kind)

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
        with self._lock:
            if self.get_session(org_id, session_id, kind=kind) is None:
                return False
            self._transaction(
                [
                    (
                        "DELETE FROM messages WHERE session_id = ? AND org_id = ?",
                        [session_id, org_id],
                    ),
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
        """Append a message; None when the session is not this org's. Idempotent on
        message_id, also under concurrency: of concurrent calls exactly one stores it."""
        with self._lock:  # the check and the insert are one step
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
                title = session_title(content)
                statements.append(
                    ("UPDATE sessions SET title = ? WHERE id = ?", [title, session_id])
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
        self, org_id: str, kind: str, *, job_id: str | None = None,
        collections: list[str] | None = None,
    ) -> dict[str, Any]:  # fmt: skip
        """A new pending job, or, when a pending or running job of the org already covers one
        of `collections`, that job with ``already_running: True`` (nothing is created)."""
        jid, now = job_id or new_id("job"), _now()
        with self._lock:
            if collections:
                for row in self._con.execute(
                    "SELECT id, collections FROM job_runs WHERE org_id = ? AND kind = ? "
                    "AND state IN ('pending', 'running') ORDER BY created_at", [org_id, kind],
                ).fetchall():  # fmt: skip
                    if set(json.loads(row[1] or "[]")) & set(collections):
                        running = row[0]
                        break
                else:
                    running = None
                if running is not None:
                    return {**self._job_run(org_id, running), "already_running": True}  # type: ignore[dict-item]
            self._con.execute(
                "INSERT INTO job_runs VALUES (?, ?, ?, 'pending', 0, NULL, NULL, ?, ?, ?)",
                [jid, org_id, kind, now, now, json.dumps(collections or [])],
            )
            return self._job_run(org_id, jid)  # type: ignore[return-value]

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
        with self._lock:
            return self._job_run(org_id, job_id)

    def _job_run(self, org_id: str, job_id: str) -> dict[str, Any] | None:
        cur = self._con.execute(
            "SELECT * FROM job_runs WHERE id = ? AND org_id = ?", [job_id, org_id]
        )
        cols = [d[0] for d in cur.description]
        row = cur.fetchone()
        if row is None:
            return None
        r = dict(zip(cols, row, strict=True))
        return {**r, "collections": json.loads(r["collections"] or "[]"),
                "created_at": _iso(r["created_at"]), "updated_at": _iso(r["updated_at"])}  # fmt: skip

    # --- answers in progress -------------------------------------------------------------
    def claim_answer(self, org_id: str, answer_id: str, *, stale_after_s: float) -> bool:
        """Take the job of answering `answer_id`: False while another request holds a claim
        younger than `stale_after_s` (a crashed one's claim goes stale)."""
        now = _now()
        with self._lock:
            rows = self._query("SELECT claimed_at FROM answer_claims WHERE id = ?", [answer_id])
            if rows and rows[0]["claimed_at"] > now - timedelta(seconds=stale_after_s):
                return False
            self._query("INSERT OR REPLACE INTO answer_claims VALUES (?, ?, ?)",
                        [answer_id, org_id, now])  # fmt: skip
            return True

    def renew_claim(self, org_id: str, answer_id: str) -> None:
        """The claim's request is still answering."""
        self._query("UPDATE answer_claims SET claimed_at = ? WHERE id = ? AND org_id = ?",
                    [_now(), answer_id, org_id])  # fmt: skip

    def release_answer(self, org_id: str, answer_id: str) -> None:
        """The claim's request ended (answered, or failed: a retry may answer now)."""
        self._query("DELETE FROM answer_claims WHERE id = ? AND org_id = ?", [answer_id, org_id])

    # --- A2A tasks and conversations ---------------------------------------------------
    def save_a2a_task(
        self, org_id: str, task_id: str, context_id: str, state: str, final: bool, body: str,
        *, retention_s: float,
    ) -> None:  # fmt: skip
        """Store a task's JSON; finished tasks of the org older than `retention_s` go."""
        now = _now()
        with self._lock:
            self._transaction([
                ("INSERT OR REPLACE INTO a2a_tasks VALUES (?, ?, ?, ?, ?, ?, ?)",
                 [org_id, task_id, context_id, state, final, body, now]),
                ("DELETE FROM a2a_tasks WHERE org_id = ? AND final AND updated_at < ?",
                 [org_id, now - timedelta(seconds=retention_s)]),
            ])  # fmt: skip

    def get_a2a_task(self, org_id: str, task_id: str) -> str | None:
        rows = self._query(
            "SELECT body FROM a2a_tasks WHERE org_id = ? AND id = ?", [org_id, task_id]
        )
        return rows[0]["body"] if rows else None

    def list_a2a_tasks(self, org_id: str, context_id: str | None = None) -> list[str]:
        where, params = "org_id = ?", [org_id]
        if context_id:
            where, params = where + " AND context_id = ?", [*params, context_id]
        return [r["body"] for r in self._query(f"SELECT body FROM a2a_tasks WHERE {where}", params)]

    def delete_a2a_task(self, org_id: str, task_id: str) -> None:
        self._query("DELETE FROM a2a_tasks WHERE org_id = ? AND id = ?", [org_id, task_id])

    def a2a_session(self, org_id: str, external_id: str) -> str | None:
        """The chat session an A2A context (or legacy sessionId) continues, if any."""
        rows = self._query(
            "SELECT session_id FROM a2a_contexts WHERE org_id = ? AND external_id = ?",
            [org_id, external_id],
        )
        return rows[0]["session_id"] if rows else None

    def map_a2a_session(self, org_id: str, external_id: str, session_id: str) -> None:
        self._query(
            "INSERT OR REPLACE INTO a2a_contexts VALUES (?, ?, ?)",
            [org_id, external_id, session_id],
        )

    # --- API keys ----------------------------------------------------------------------
    def create_api_key(
        self, org_id: str, role: str, *, name: str | None = None,
        expires_at: datetime | None = None,
    ) -> dict[str, Any]:  # fmt: skip
        """A new key: the record with the key itself under "key" (shown this once only)."""
        self.ensure_org(org_id)
        key_id, secret_hash, key = new_key()
        expires = None if expires_at is None else expires_at.astimezone(UTC).replace(tzinfo=None)
        self._query(
            "INSERT INTO api_keys VALUES (?, ?, ?, ?, ?, ?, ?, NULL)",
            [key_id, org_id, role, name, secret_hash, _now(), expires],
        )
        return {**self._api_keys("id = ?", [key_id])[0], "key": key}

    def list_api_keys(self, org_id: str | None = None) -> list[dict[str, Any]]:
        """The keys of `org_id` (None: of every org), without their secrets."""
        if org_id is None:
            return self._api_keys("true", [])
        return self._api_keys("org_id = ?", [org_id])

    def revoke_api_key(self, key_id: str, *, org_id: str | None = None) -> bool:
        """Revoke a key (of `org_id` when given); False when there is no such live key."""
        where, params = "id = ? AND revoked_at IS NULL", [key_id]
        if org_id is not None:
            where, params = where + " AND org_id = ?", [*params, org_id]
        found = self._query(f"SELECT id FROM api_keys WHERE {where}", params)
        if found:
            self._query("UPDATE api_keys SET revoked_at = ? WHERE id = ?", [_now(), key_id])
        return bool(found)

    def authenticate(self, key: str) -> dict[str, Any] | None:
        """The principal of a live key (crow.auth.keys.Principal as a dict), else None."""
        parts = split_key(key)
        if parts is None:
            return None
        rows = self._query(
            "SELECT id, org_id, role, secret_hash FROM api_keys WHERE id = ? "
            "AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?)",
            [parts[0], _now()],
        )
        if not rows or not secret_matches(parts[1], rows[0]["secret_hash"]):
            return None
        return Principal(rows[0]["id"], rows[0]["org_id"], rows[0]["role"]).as_dict()

    def _api_keys(self, where: str, params: list[Any]) -> list[dict[str, Any]]:
        rows = self._query(
            "SELECT id, org_id, role, name, created_at, expires_at, revoked_at FROM api_keys "
            f"WHERE {where} ORDER BY org_id, created_at",
            params,
        )
        return [{**r, **{k: _iso(r[k]) for k in ("created_at", "expires_at", "revoked_at")},
                 "active": r["revoked_at"] is None
                 and (r["expires_at"] is None or r["expires_at"] > _now())} for r in rows]  # fmt: skip

    # --- limits and usage --------------------------------------------------------------
    def admit(
        self, bucket: str, *, per_minute: float, burst: int, org_id: str | None = None,
        daily_tokens: int = 0,
    ) -> tuple[str, float] | None:  # fmt: skip
        """One request against a rate bucket and, with `daily_tokens`, the org's token quota
        (one round trip for both): None when it may go ahead, else ("quota", 0.0) or ("rate",
        seconds to wait). A request refused by the quota takes no token."""
        if org_id is not None and daily_tokens and self.usage_today(org_id) >= daily_tokens:
            return "quota", 0.0
        wait = self.buckets.take(bucket, per_minute=per_minute, burst=burst)
        return ("rate", wait) if wait > 0 else None

    def add_usage(self, org_id: str, tokens: int) -> None:
        """Count model tokens spent by `org_id` today (UTC)."""
        if tokens > 0:
            self._query(
                "INSERT INTO token_usage VALUES (?, ?, ?) "
                "ON CONFLICT DO UPDATE SET tokens = token_usage.tokens + excluded.tokens",
                [org_id, _now().date(), tokens],
            )

    def usage_today(self, org_id: str) -> int:
        rows = self._query(
            "SELECT tokens FROM token_usage WHERE org_id = ? AND day = ?", [org_id, _now().date()]
        )
        return rows[0]["tokens"] if rows else 0


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
