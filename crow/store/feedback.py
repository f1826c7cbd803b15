"""Feedback on answers in the chat database: a rating (up or down) of an assistant message of
a chat session, with an optional comment and correction; exported with the question and the
tool steps it rated, as evaluation questions (see ``feedback_rows``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from crow.store import db
from crow.store.rows import message_out

Rating = Literal["up", "down"]
HISTORY = 5  # earlier questions of the chat an exported item carries (follow-ups)


class Feedback(db.Database):
    def set_feedback(
        self,
        org_id: str,
        session_id: str,
        message_id: str,
        rating: Rating,
        *,
        comment: str | None = None,
        correction: str | None = None,
    ) -> dict[str, Any] | None:
        """Rate an assistant message of the org's chat session (again: the rating replaces
        the last one); None when there is no such message."""
        with self._lock:
            if not self._rateable(org_id, session_id, message_id):
                return None
            now = db.now()
            self._query(
                """
                INSERT INTO feedback VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (message_id) DO UPDATE SET rating = excluded.rating,
                    comment = excluded.comment, correction = excluded.correction,
                    updated_at = excluded.updated_at
                """,
                [message_id, org_id, session_id, rating, comment, correction, now, now],
            )
            return self.get_feedback(org_id, message_id)

    def get_feedback(self, org_id: str, message_id: str) -> dict[str, Any] | None:
        rows = self._query(
            "SELECT * FROM feedback WHERE message_id = ? AND org_id = ?", [message_id, org_id]
        )
        return _feedback_out(rows[0]) if rows else None

    def delete_feedback(self, org_id: str, session_id: str, message_id: str) -> bool:
        with self._lock:
            found = self._query(
                "SELECT 1 FROM feedback WHERE message_id = ? AND org_id = ? AND session_id = ?",
                [message_id, org_id, session_id],
            )
            if found:
                self._query("DELETE FROM feedback WHERE message_id = ?", [message_id])
            return bool(found)

    def feedback_rows(
        self,
        org_id: str,
        *,
        since: datetime | None = None,
        rating: Rating | None = None,
        limit: int = 1000,
    ) -> list[dict[str, Any]]:
        """The org's feedback updated at or after `since`, oldest first: each with the rated
        answer, the question it answered and the chat's earlier questions."""
        where: list[str] = ["f.org_id = ?"]
        params: list[Any] = [org_id]
        if since is not None:
            where.append("f.updated_at >= ?")
            params.append(since)
        if rating is not None:
            where.append("f.rating = ?")
            params.append(rating)
        # One query for the whole export (the store has one writer: no query per row).
        rows = self._query(
            f"""
            WITH rated AS (
                SELECT f.*, m.seq, m.content, m.sources, m.tool_steps, m.timings,
                       m.created_at AS answered_at
                FROM feedback f JOIN messages m ON m.id = f.message_id
                WHERE {" AND ".join(where)}
                ORDER BY f.updated_at, f.message_id LIMIT ?
            ),
            asked AS (
                SELECT r.message_id, q.content, q.seq,
                       row_number() OVER (PARTITION BY r.message_id ORDER BY q.seq DESC) AS back
                FROM rated r JOIN messages q
                  ON q.session_id = r.session_id AND q.role = 'user' AND q.seq < r.seq
            ),
            questions AS (
                SELECT message_id, list(content ORDER BY seq) AS questions
                FROM asked WHERE back <= ? GROUP BY message_id
            )
            SELECT rated.*, questions.questions
            FROM rated LEFT JOIN questions ON questions.message_id = rated.message_id
            ORDER BY rated.updated_at, rated.message_id
            """,
            [*params, limit, HISTORY + 1],
        )
        return [_export_row(row) for row in rows]

    def _rateable(self, org_id: str, session_id: str, message_id: str) -> bool:
        return bool(
            self._query(
                """
                SELECT 1 FROM messages m JOIN sessions s ON s.id = m.session_id
                WHERE m.id = ? AND m.org_id = ? AND m.session_id = ? AND s.org_id = ?
                  AND m.role = 'assistant' AND s.kind = 'chat'
                """,
                [message_id, org_id, session_id, org_id],
            )
        )


def _export_row(row: dict[str, Any]) -> dict[str, Any]:
    questions = list(row["questions"] or [])
    answer = message_out(
        {
            "id": row["message_id"],
            "session_id": row["session_id"],
            "seq": row["seq"],
            "role": "assistant",
            "content": row["content"],
            "sources": row["sources"],
            "tool_steps": row["tool_steps"],
            "timings": row["timings"],
            "created_at": row["answered_at"],
        }
    )
    return {
        "feedback": _feedback_out(row),
        "question": questions[-1] if questions else "",
        "history": questions[:-1],
        "answer": answer,
    }


_FEEDBACK_FIELDS = ("message_id", "session_id", "rating", "comment", "correction")


def _feedback_out(row: dict[str, Any]) -> dict[str, Any]:
    return {
        **{k: row[k] for k in _FEEDBACK_FIELDS},
        "created_at": db.iso(row["created_at"]),
        "updated_at": db.iso(row["updated_at"]),
    }
