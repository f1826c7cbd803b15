"""The chat-state store: chat and Q&A sessions, messages, index versions, jobs (and, from its
parts, organizations, access and A2A state).

One DuckDB file with exactly one writer process (the ChatStore deployment, or a job run
while the app is down). Every query that touches org data takes the org id: a session of
another org is indistinguishable from a missing one.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any, Literal

from crow.ids import new_id
from crow.store import db
from crow.store.a2a_state import A2AState
from crow.store.access import Access
from crow.store.chat_search import ChatSearch
from crow.store.feedback import Feedback
from crow.store.jobs import JobRuns
from crow.store.rows import MESSAGE_COLUMNS, message_out, rated_message_out, session_out

SessionKind = Literal["chat", "qna"]
Role = Literal["user", "assistant", "system"]
TITLE_WORDS, TITLE_CHARS = 6, 40


def session_title(first_message: str) -> str:
    """First 6 words of the first user message, at most 40 characters."""
    title = " ".join(first_message.split()[:TITLE_WORDS])
    return title if len(title) <= TITLE_CHARS else title[: TITLE_CHARS - 1].rstrip() + "…"


class ChatStore(Access, A2AState, JobRuns, Feedback, ChatSearch):
    """Sessions, messages and answers in progress; with its parts (access, A2A state, jobs,
    feedback and chat search: the modules of crow.store), the whole chat state."""

    # --- sessions --------------------------------------------------------------------
    def create_session(
        self,
        org_id: str,
        *,
        kind: SessionKind = "chat",
        title: str | None = None,
        max_sessions: int | None = None,
    ) -> dict[str, Any] | None:
        """The new session; None when the org already has `max_sessions` sessions."""
        self.ensure_org(org_id)
        sid, now = new_id("ses"), db.now()
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
        return session_out(rows[0]) if rows else None

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
        return [session_out(r) for r in rows], total

    def delete_session(self, org_id: str, session_id: str, *, kind: SessionKind = "chat") -> bool:
        with self._lock:
            if self.get_session(org_id, session_id, kind=kind) is None:
                return False
            self._transaction(
                [
                    (
                        "DELETE FROM feedback WHERE session_id = ? AND org_id = ?",
                        [session_id, org_id],
                    ),
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
        timings: dict[str, Any] | None = None,
        message_id: str | None = None,
    ) -> dict[str, Any] | None:
        """Append a message; None when the session is not this org's. Idempotent on
        message_id, also under concurrency: of concurrent calls exactly one stores it."""
        fields = {"sources": sources, "tool_steps": tool_steps, "timings": timings}
        return self._append(org_id, session_id, role, content, kind, message_id, fields, [])

    def _append(
        self,
        org_id: str,
        session_id: str,
        role: Role,
        content: str,
        kind: SessionKind,
        message_id: str | None,
        fields: dict[str, Any],
        also: list[tuple[str, list[Any]]],
    ) -> dict[str, Any] | None:
        """add_message, with `also` written in the same transaction (one commit)."""
        with self._lock:  # the check and the insert are one step
            found = self._query(
                "SELECT title FROM sessions WHERE id = ? AND org_id = ? AND kind = ?",
                [session_id, org_id, kind],
            )
            if not found:
                return None
            if message_id is not None and (existing := self.get_message(org_id, message_id)):
                return existing
            mid = message_id or new_id("msg")
            now = db.now()
            seq = self._query(
                "SELECT coalesce(max(seq), 0) + 1 AS seq FROM messages WHERE session_id = ?",
                [session_id],
            )[0]["seq"]
            stored = {
                "sources": json.dumps(fields["sources"] or []),
                "tool_steps": json.dumps(fields["tool_steps"] or []),
                "timings": json.dumps(fields["timings"] or {}),
            }
            state = {
                "stopped": bool(fields.get("stopped")),
                "regenerated_from": fields.get("regenerated_from"),
            }
            title = found[0]["title"]
            if role == "user" and not title:
                title = session_title(content)
            self._transaction(
                [
                    (
                        "INSERT INTO messages (id, session_id, org_id, seq, role, content, "
                        "sources, tool_steps, timings, created_at, stopped, regenerated_from) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        [
                            mid,
                            session_id,
                            org_id,
                            seq,
                            role,
                            content,
                            *stored.values(),
                            now,
                            *state.values(),
                        ],
                    ),
                    (
                        "UPDATE sessions SET updated_at = ?, title = ? WHERE id = ?",
                        [now, title, session_id],
                    ),
                    *also,
                ]
            )
            return message_out(
                {
                    "id": mid,
                    "session_id": session_id,
                    "seq": seq,
                    "role": role,
                    "content": content,
                    **stored,
                    "created_at": now,
                    **state,
                }
            )

    def get_message(self, org_id: str, message_id: str) -> dict[str, Any] | None:
        rows = self._query(
            f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE id = ? AND org_id = ?",
            [message_id, org_id],
        )
        return message_out(rows[0]) if rows else None

    def list_messages(
        self,
        org_id: str,
        session_id: str,
        *,
        limit: int = 50,
        before: int | None = None,
    ) -> list[dict[str, Any]]:
        """The `limit` latest messages older than seq `before`, oldest first; a rated answer
        with its ``feedback`` (rating, comment, correction)."""
        rows = self._query(
            f"""
            SELECT m.*, f.rating, f.comment, f.correction FROM (
                SELECT {MESSAGE_COLUMNS} FROM messages
                WHERE session_id = ? AND org_id = ? AND seq < ?
                ORDER BY seq DESC LIMIT ?
            ) m LEFT JOIN feedback f ON f.message_id = m.id
            ORDER BY m.seq
            """,
            [session_id, org_id, before if before is not None else 2**62, limit],
        )
        return [rated_message_out(r) for r in rows]

    # --- a chat turn's writes, one call each end (a deployed store: one round trip) -----
    def start_turn(
        self,
        org_id: str,
        session_id: str,
        content: str,
        *,
        kind: SessionKind = "chat",
        message_id: str | None = None,
        history: int = 50,
    ) -> tuple[list[dict[str, Any]], dict[str, Any]] | None:
        """The `history` latest messages, then the question stored (``add_message``); None
        when the session is not this org's."""
        with self._lock:
            earlier = self.list_messages(org_id, session_id, limit=history)
            user = self.add_message(
                org_id, session_id, "user", content, kind=kind, message_id=message_id
            )
            return None if user is None else (earlier, user)

    def finish_turn(
        self,
        org_id: str,
        session_id: str,
        content: str,
        *,
        tokens: int,
        kind: SessionKind = "chat",
        message_id: str | None = None,
        sources: list[dict[str, Any]] | None = None,
        tool_steps: list[dict[str, Any]] | None = None,
        timings: dict[str, Any] | None = None,
        stopped: bool = False,
        regenerated_from: str | None = None,
    ) -> dict[str, Any] | None:
        """The answer stored with its tokens counted (``add_usage``), in one commit; None
        (and the tokens counted alone) when the session was deleted meanwhile. `stopped`: the
        user stopped it (the text is what was written until then); `regenerated_from`: the
        answer to the same question that this one answers again."""
        fields = {
            "sources": sources,
            "tool_steps": tool_steps,
            "timings": timings,
            "stopped": stopped,
            "regenerated_from": regenerated_from,
        }
        usage = self.usage_statements(org_id, tokens)
        with self._lock:
            message = self._append(
                org_id, session_id, "assistant", content, kind, message_id, fields, usage
            )
            if message is None:
                self.add_usage(org_id, tokens)
            return message

    # --- answers in progress -------------------------------------------------------------
    def claim_answer(self, org_id: str, answer_id: str, *, stale_after_s: float) -> bool:
        """Take the job of answering `answer_id`: False while another request holds a claim
        younger than `stale_after_s` (a crashed one's claim goes stale)."""
        now = db.now()
        with self._lock:
            rows = self._query("SELECT claimed_at FROM answer_claims WHERE id = ?", [answer_id])
            if rows and rows[0]["claimed_at"] > now - timedelta(seconds=stale_after_s):
                return False
            self._query(
                "INSERT OR REPLACE INTO answer_claims VALUES (?, ?, ?)", [answer_id, org_id, now]
            )
            return True

    def renew_claim(self, org_id: str, answer_id: str) -> None:
        """The claim's request is still answering."""
        self._query(
            "UPDATE answer_claims SET claimed_at = ? WHERE id = ? AND org_id = ?",
            [db.now(), answer_id, org_id],
        )

    def release_answer(self, org_id: str, answer_id: str) -> None:
        """The claim's request ended (answered, or failed: a retry may answer now)."""
        self._query("DELETE FROM answer_claims WHERE id = ? AND org_id = ?", [answer_id, org_id])
