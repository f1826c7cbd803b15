"""Answers written from tool results, for when the model's own text cannot be used.

The last resort of crow.chat.agent.loop: when an answer fails a check (crow.chat.agent.checks) twice,
the answer is composed from the results themselves, exact and as readable as a template can
be, and says so (``fallback: "composed"``).
"""

from __future__ import annotations

from typing import Any

from crow.chat.agent.runner import STILL_INDEXING

RESULT_KEYS = (
    "total_interactions",
    "products",
    "interactions",
    "patterns",
    "relevant_sentence",
    "documents",
    "error",
)
ECHO_STOPS: tuple[str, ...] = tuple(f'{{"{key}"' for key in RESULT_KEYS)
"""Generation stops here: a model writing a tool's result back out is not answering."""


def compose(outputs: list[tuple[str, dict[str, Any]]]) -> str:
    """A plain answer from the tools' results, in the order they ran."""
    parts = [_one(name, content) for name, content in outputs if "error" not in content]
    parts = list(dict.fromkeys(p for p in parts if p))  # the same result once
    if not parts and any(STILL_INDEXING in str(c.get("error")) for _, c in outputs):
        return (
            "Search over your data is still being prepared (it is being indexed right now). "
            "Please try again in a minute."
        )
    return "\n\n".join(parts) or "I could not find anything in your data for that question."


def _per_channel(counts: dict[str, int]) -> str:
    return ", ".join(f"{n:,} {ch}" for ch, n in counts.items() if n)


def _one(name: str, c: dict[str, Any]) -> str:
    if name == "get_interaction_summary":
        scope = f" on the {c['channel']} channel" if c.get("channel") else ""
        span = f" from {c['period']}" if c.get("period") else ""
        if c.get("channel"):  # it comes with every channel's count over the same period: the
            # composed answer to "web vs social, how many each?" gives both
            beside = _per_channel(c.get("every_channel_same_period") or {})
            breakdown = f"every channel in the same period: {beside}" if beside else ""
        else:
            breakdown = _per_channel(c.get("by_channel", {}))
        return f"You have **{c['total_interactions']:,}** interactions{scope}{span}" + (
            f" ({breakdown})." if breakdown else "."
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
