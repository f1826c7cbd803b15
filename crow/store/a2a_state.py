"""A2A state in the chat database: tasks (the protocol's JSON) and conversation ids ->
chat sessions, per organization, so that any Ingress replica reads them."""

from __future__ import annotations

from datetime import timedelta

from crow.store import db


class A2AState(db.Database):
    # --- A2A tasks and conversations ---------------------------------------------------
    def save_a2a_task(
        self,
        org_id: str,
        task_id: str,
        context_id: str,
        state: str,
        final: bool,
        body: str,
        *,
        retention_s: float,
    ) -> None:
        """Store a task's JSON; finished tasks of the org older than `retention_s` go."""
        now = db.now()
        with self._lock:
            self._transaction(
                [
                    (
                        "INSERT OR REPLACE INTO a2a_tasks VALUES (?, ?, ?, ?, ?, ?, ?)",
                        [org_id, task_id, context_id, state, final, body, now],
                    ),
                    (
                        "DELETE FROM a2a_tasks WHERE org_id = ? AND final AND updated_at < ?",
                        [org_id, now - timedelta(seconds=retention_s)],
                    ),
                ]
            )

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
