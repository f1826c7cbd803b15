"""Rows of the chat database as the API gives them out: times in ISO 8601, JSON parsed."""

from __future__ import annotations

import json
from typing import Any

from crow.store import db

MESSAGE_COLUMNS = (
    "id, session_id, seq, role, content, sources, tool_steps, timings, created_at, "
    "stopped, regenerated_from"
)


def session_out(row: dict[str, Any]) -> dict[str, Any]:
    return {
        **row,
        "created_at": db.iso(row["created_at"]),
        "updated_at": db.iso(row["updated_at"]),
    }


def message_out(row: dict[str, Any]) -> dict[str, Any]:
    return {
        **row,
        "sources": json.loads(row["sources"]),
        "tool_steps": json.loads(row["tool_steps"]),
        "timings": json.loads(row["timings"]),
        "created_at": db.iso(row["created_at"]),
    }


def rated_message_out(row: dict[str, Any]) -> dict[str, Any]:
    """A message row joined with its feedback's rating, comment and correction."""
    rating = {k: row.pop(k) for k in ("rating", "comment", "correction")}
    out = message_out(row)
    if rating["rating"] is not None:
        out["feedback"] = rating
    return out
