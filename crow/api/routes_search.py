"""Search and summary routes over products, interactions, patterns and the knowledge base."""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query

from crow.api.deps import OrgDep, ServicesDep, require_path_org, search_allowed
from crow.api.errors import ApiError
from crow.data.records import Channel, PatternType
from crow.data.timewords import TimeWordError, resolve_range
from crow.retrieval.sort_order import SortOrder
from crow.services import Services, need
from indexes.filters import SearchFilter
from indexes.store import IndexNotFoundError

router = APIRouter(tags=["search"], dependencies=[Depends(search_allowed)])
PathOrg = Annotated[str, Depends(require_path_org)]
QueryText = Annotated[str, Query(min_length=1, max_length=500, description="What to look for.")]
Limit = Annotated[int, Query(ge=1, le=50)]
Offset = Annotated[int, Query(ge=0, le=450)]
When = Annotated[
    str | None,
    Query(
        max_length=40, description="ISO date/time, or words such as 'last week', 'past 30 days'."
    ),
]


async def time_range(
    services: Services, org_id: str, since: str | None, until: str | None
) -> tuple[datetime | None, datetime | None]:
    """since/until as datetimes; relative words resolve against the data's latest time."""
    if not since and not until:
        return None, None
    _, latest = await need(services.analytics, "analytics").data_time_range(org_id)
    try:
        return resolve_range(since, until, latest or datetime.now().astimezone())
    except TimeWordError as exc:
        raise ApiError(422, "invalid_request", str(exc)) from None


async def embed(services: Services, texts: list[str]) -> Any:
    """The texts' vectors within timeouts.embed_s (504 embed_timeout past it)."""
    limit = services.settings.timeouts.embed_s
    try:
        async with asyncio.timeout(limit):
            return await need(services.embedder, "embedder").embed(texts)
    except TimeoutError:
        raise ApiError(
            504, "embed_timeout", f"embedding took longer than {limit:g} s; try again"
        ) from None


async def run_search(
    services: Services,
    org_id: str,
    collection: str,
    query: str | None,
    *,
    limit: int,
    offset: int = 0,
    flt: SearchFilter | None = None,
    sort: SortOrder = "relevance",
    counted: SearchFilter | None = None,
) -> dict[str, Any]:
    vector = None
    if query:
        vector = (await embed(services, [query]))[0]
    try:
        hits = await need(services.retriever, "retriever").search(
            org_id, collection, vector, k=limit + offset, flt=flt, sort=sort, counted=counted
        )
    except IndexNotFoundError:
        raise ApiError(
            503, "index_not_ready", f"the {collection} index is not built yet; run a reindex"
        ) from None
    page = hits[offset:]
    return {
        "organization_id": org_id,
        "query": query,
        "count": len(page),
        "offset": offset,
        "results": page,
    }


@router.get("/api/v1/products/search", summary="Semantic product search with popularity")
async def search_products(
    org_id: OrgDep,
    services: ServicesDep,
    query: Annotated[str, Query(max_length=500)] = "",
    limit: Limit = 10,
    offset: Offset = 0,
    sort: SortOrder = "relevance",
    category: Annotated[str | None, Query(max_length=100)] = None,
    channel: Channel | None = None,
    since: When = None,
    until: When = None,
) -> dict[str, Any]:
    """``channel``, ``since`` and ``until`` count only those interactions: each product's
    figures, and the ranking with sort=popularity ("most talked about on social")."""
    if not query.strip() and sort == "relevance":
        raise ApiError(
            422,
            "invalid_request",
            "give a query, or sort=popularity (top products), cheapest or priciest",
        )
    start, end = await time_range(services, org_id, since, until)
    return await run_search(
        services,
        org_id,
        "products",
        query.strip() or None,
        limit=limit,
        offset=offset,
        flt=SearchFilter(category=category),
        sort=sort,
        counted=SearchFilter(channel=channel, since=start, until=end),
    )


@router.get("/api/v1/interactions/organization/{org_id}/search", summary="Search interactions")
async def search_interactions(
    org_id: PathOrg,
    services: ServicesDep,
    query: QueryText,
    channel: Channel | None = None,
    since: When = None,
    until: When = None,
    limit: Limit = 10,
    offset: Offset = 0,
) -> dict[str, Any]:
    start, end = await time_range(services, org_id, since, until)
    flt = SearchFilter(channel=channel, since=start, until=end)
    return await run_search(
        services, org_id, "interactions", query, limit=limit, offset=offset, flt=flt
    )


@router.get("/api/v1/interactions/organization/{org_id}/summary", summary="Interaction counts")
async def interaction_summary(
    org_id: PathOrg,
    services: ServicesDep,
    channel: Channel | None = None,
    since: When = None,
    until: When = None,
) -> dict[str, Any]:
    start, end = await time_range(services, org_id, since, until)
    return await need(services.analytics, "analytics").interaction_summary(
        org_id, channel=channel, since=start, until=end
    )


@router.get("/api/v1/patterns/organization/{org_id}/search", summary="Search behavioral patterns")
async def search_patterns(
    org_id: PathOrg,
    services: ServicesDep,
    query: QueryText,
    type: PatternType | None = None,
    since: When = None,
    limit: Limit = 10,
    offset: Offset = 0,
) -> dict[str, Any]:
    start, _ = await time_range(services, org_id, since, None)
    flt = SearchFilter(pattern_type=type, since=start)
    return await run_search(
        services, org_id, "patterns", query, limit=limit, offset=offset, flt=flt
    )
