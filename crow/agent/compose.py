"""Answers written from tool results, for when the model's own text cannot be used.

A small model sometimes echoes a tool's JSON as its answer, or states a count the summary
tool did not return. Then the answer is composed from the results themselves: exact, and
as readable as a template can be.
"""

from __future__ import annotations

import json
import re
from typing import Any

_NUMBER = re.compile(r"\d[\d,]*")
RESULT_KEYS = ("total_interactions", "products", "interactions", "patterns", "documents", "error")
ECHO_STOPS: tuple[str, ...] = tuple(f'{{"{key}"' for key in RESULT_KEYS)
"""Generation stops here: a model writing a tool's result back out is not answering."""


def looks_unusable(text: str) -> bool:
    """Empty, or structured data / a tool call instead of prose."""
    stripped = text.strip().strip("`").removeprefix("json").strip()
    if not stripped or any(stop in text for stop in ECHO_STOPS):
        return True
    if stripped[0] in "{[":
        try:
            json.loads(stripped)
            return True
        except json.JSONDecodeError:
            return stripped.count('":') >= 2
    return False


def count_is_wrong(text: str, summary: dict[str, Any]) -> bool:
    """The answer states numbers, none of which is a figure the summary returned."""
    allowed = {summary.get("total_interactions"), *summary.get("by_channel", {}).values()}
    stated = {
        int(n.replace(",", "")) for n in _NUMBER.findall(text) if len(n.replace(",", "")) >= 2
    }
    stated -= {int(y) for y in re.findall(r"\b(?:19|20)\d\d\b", text)}  # years are not counts
    return bool(stated) and not (stated & allowed)


_NAMED = re.compile(
    r"\*\*([^*\n]{3,80})\*\*|^\s*(?:[-*]|\d+\.)\s+([^:\n—]{3,80}?)\s*(?::|—| - )", re.M
)
_WORD = re.compile(r"[a-z][a-z0-9]{2,}")  # words, not figures (counts are checked apart)


_GENERIC = frozenset(
    [
        "total",
        "interactions",
        "interaction",
        "channel",
        "channels",
        "breakdown",
        "customer",
        "customers",
        "media",
        "online",
        "website",
        "store",
        "stores",
        "camera",
        "cameras",
        "posts",
        "period",
        "count",
    ]
)


def invented_names(
    text: str, outputs: list[tuple[str, dict[str, Any]]], question: str = ""
) -> list[str]:
    """Names the answer puts forward (bold, or heading a list item) with a word neither the
    tools' results nor the question contain: a product, pattern or document made up."""
    found = [c for _, c in outputs if "error" not in c]
    if not found:
        return []
    data = json.dumps(found, ensure_ascii=False).lower().replace("_", " ")
    known = set(_WORD.findall(data)) | set(_WORD.findall(question.lower())) | _GENERIC
    names = [(bold or head).strip("* ") for bold, head in _NAMED.findall(text)]
    return [n for n in names if not set(_WORD.findall(n.lower())) <= known]


def compose(outputs: list[tuple[str, dict[str, Any]]]) -> str:
    """A plain answer from the tools' results, in the order they ran."""
    parts = [_one(name, content) for name, content in outputs if "error" not in content]
    parts = list(dict.fromkeys(p for p in parts if p))  # the same result once
    return "\n\n".join(parts) or "I could not find anything in your data for that question."


def _one(name: str, c: dict[str, Any]) -> str:
    if name == "get_interaction_summary":
        by = c.get("by_channel", {})
        scope = f" on the {c['channel']} channel" if c.get("channel") else ""
        span = f" between {c['from']} and {c['to']}" if c.get("from") else ""
        breakdown = ", ".join(f"{n:,} {ch}" for ch, n in by.items() if n)
        return f"You have **{c['total_interactions']:,}** interactions{scope}{span}" + (
            f" ({breakdown})." if breakdown and not c.get("channel") else "."
        )
    if name == "search_products":
        rows = c.get("products", [])
        return (
            "Products:\n"
            + "\n".join(
                f"- **{p['title']}** ({p['category']}, {p['price']:,.2f}) — {p['interactions']:,} interactions"
                for p in rows
            )
            if rows
            else ""
        )
    if name == "search_interactions":
        rows = c.get("interactions", [])
        return (
            "Interactions:\n"
            + "\n".join(f"- {r['date']} ({r['channel']}): {r['text']}" for r in rows)
            if rows
            else ""
        )
    if name == "search_patterns":
        rows = c.get("patterns", [])
        return (
            "Patterns:\n"
            + "\n".join(f"- **{p['title']}** ({p['type']}): {p['description']}" for p in rows)
            if rows
            else ""
        )
    if name == "search_org_context":
        rows = c.get("documents", [])
        return f"**{rows[0]['title']}**: {rows[0]['text']}" if rows else ""
    return ""
