"""Searching an organization's chats by text: the sessions whose messages contain it."""

from __future__ import annotations

import re
from typing import Any

from crow.store import db

SNIPPET_CHARS = 160
_MARKUP = re.compile(r"[*`#|]+|:?-{3,}:?")  # character runs: linear, no backtracking


class ChatSearch(db.Database):
    def search_chats(
        self, org_id: str, text: str, *, limit: int = 20, offset: int = 0
    ) -> tuple[list[dict[str, Any]], int]:
        """The org's chat sessions with a message containing `text` (any case; no pattern
        syntax), most recently active first, each with its latest matching message as a
        snippet, and how many sessions match."""
        needle = text.lower()
        matching = """
            SELECT m.session_id, m.id AS message_id, m.seq, m.role, m.content,
                   row_number() OVER (PARTITION BY m.session_id ORDER BY m.seq DESC) AS r,
                   count(*) OVER (PARTITION BY m.session_id) AS matches
            FROM messages m JOIN sessions s ON s.id = m.session_id
            WHERE m.org_id = ? AND s.org_id = ? AND s.kind = 'chat'
              AND strpos(lower(m.content), ?) > 0
        """
        params = [org_id, org_id, needle]
        rows = self._query(
            f"""
            WITH hits AS ({matching})
            SELECT s.id AS session_id, s.title, s.updated_at, h.message_id, h.seq, h.role,
                   h.content, h.matches
            FROM hits h JOIN sessions s ON s.id = h.session_id
            WHERE h.r = 1
            ORDER BY s.updated_at DESC, s.id DESC LIMIT ? OFFSET ?
            """,
            [*params, limit, offset],
        )
        total = self._query(f"SELECT count(*) AS n FROM ({matching}) WHERE r = 1", params)[0]["n"]
        return [_hit_out(row, needle) for row in rows], total


def snippet(content: str, needle: str, width: int = SNIPPET_CHARS) -> str:
    """About `width` characters of `content` around the first `needle` (lower case), as
    plain text: markdown's bold, code, headings, table pipes and rules left out."""
    at = content.lower().find(needle)
    start = max(0, at - (width - len(needle)) // 2) if at >= 0 else 0
    piece = " ".join(_MARKUP.sub(" ", content[start : start + width]).split())
    return ("…" if start > 0 else "") + piece + ("…" if start + width < len(content) else "")


def _hit_out(row: dict[str, Any], needle: str) -> dict[str, Any]:
    return {
        "session_id": row["session_id"],
        "title": row["title"],
        "updated_at": db.iso(row["updated_at"]),
        "message_id": row["message_id"],
        "seq": row["seq"],
        "role": row["role"],
        "snippet": snippet(row["content"], needle),
        "matches": row["matches"],
    }
