"""A chat session as a file: Markdown for people, JSON for programs, each with its sources."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any, Literal

ExportFormat = Literal["markdown", "json"]
SPEAKERS = {"user": "You", "assistant": "Ask CROW", "system": "System"}
MEDIA = {"markdown": ("text/markdown; charset=utf-8", "md"), "json": ("application/json", "json")}


def export_chat(
    session: dict[str, Any], messages: list[dict[str, Any]], fmt: ExportFormat
) -> tuple[str, str, str]:
    """(body, media type, file name) of `session` with its `messages`, oldest first."""
    media, ext = MEDIA[fmt]
    body = _json(session, messages) if fmt == "json" else _markdown(session, messages)
    return body, media, f"{file_stem(session)}.{ext}"


def file_stem(session: dict[str, Any]) -> str:
    """ask-crow-<title in lower-case words, at most 40 characters>-<session id>."""
    words = re.sub(r"[^a-z0-9]+", "-", (session.get("title") or "chat").lower()).strip("-")
    safe_id = re.sub(r"[^A-Za-z0-9_-]", "", session["id"])
    return f"ask-crow-{words[:40].rstrip('-') or 'chat'}-{safe_id}"


def _exported_at() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _json(session: dict[str, Any], messages: list[dict[str, Any]]) -> str:
    return json.dumps(
        {"session": session, "exported_at": _exported_at(), "messages": messages},
        indent=2,
        ensure_ascii=False,
    )


def _markdown(session: dict[str, Any], messages: list[dict[str, Any]]) -> str:
    title = " ".join((session.get("title") or "Chat").split())
    lines = [
        f"# {title}",
        "",
        f"Ask CROW chat `{session['id']}` of {session['org_id']}, exported {_exported_at()}.",
        "",
    ]
    for m in messages:
        speaker = SPEAKERS.get(m["role"], m["role"])
        if m.get("regenerated_from"):
            speaker += " (regenerated)"
        lines += [f"## {speaker} · {m['created_at']}", "", m["content"]]
        if m.get("stopped"):
            lines += ["", "*(stopped: the answer is incomplete)*"]
        if sources := m.get("sources"):
            listed = ", ".join(f"{s.get('type')} `{s.get('id')}`" for s in sources)
            lines += ["", f"Sources: {listed}"]
        lines.append("")
    return "\n".join(lines)
