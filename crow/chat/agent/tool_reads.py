"""What every tool's reading of the data shares: the search of one collection, a time range
from the user's words, days as text, a note on an empty filtered result."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from crow.chat.agent.context import ToolContext
from crow.data.timewords import resolve_range
from indexes.filters import SearchFilter

if TYPE_CHECKING:
    from datetime import datetime

    from crow.retrieval.sort_order import SortOrder

SNIPPET = 400
MAX_ROWS = 10  # rows a tool hands the model: more only slows a small model down


async def window(
    ctx: ToolContext, since: str | None, until: str | None
) -> tuple[datetime | None, datetime | None]:
    if not since and not until:
        return None, None
    return resolve_range(since, until, await ctx.anchor() or now())


def now() -> datetime:
    from datetime import UTC, datetime

    return datetime.now(UTC)


def day(value: Any) -> str | None:
    return str(value)[:10] if value else None


async def search(
    ctx: ToolContext,
    collection: str,
    query: str,
    k: int,
    *,
    flt: SearchFilter | None = None,
    sort: SortOrder = "relevance",
    counted: SearchFilter | None = None,
) -> list[dict[str, Any]]:
    vector = await ctx.embed(query) if query.strip() else None
    return await ctx.retriever.search(
        ctx.org_id, collection, vector, k=k, flt=flt, sort=sort, counted=counted
    )


def noted(content: dict[str, Any], **filters: Any) -> dict[str, Any]:
    """An empty result under filters says so, and what to try (a small model otherwise
    reports "none found" for filters it added on its own)."""
    used = {k: v for k, v in filters.items() if v}
    if used and not any(content.values()):
        named = ", ".join(f"{k}={v!r}" for k, v in used.items())
        content["note"] = f"Nothing matched {named}. Call again without them to search everything."
    return content
