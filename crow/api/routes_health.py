"""Liveness, readiness and the organizations the caller can pick from."""

from __future__ import annotations

from fastapi import APIRouter

from crow.api.deps import ServicesDep
from crow.api.errors import ApiError

router = APIRouter(tags=["health"])


@router.get("/health", summary="Alive")
async def health() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/ready", summary="Every dependency answers")
async def ready(services: ServicesDep) -> dict[str, object]:
    try:
        await services.store.check_health()
    except Exception as exc:
        raise ApiError(503, "not_ready", f"chat store not ready: {exc}") from None
    return {"status": "ready", "organizations": len(services.lake.list_orgs())}


@router.get("/api/v1/organizations", tags=["organizations"], summary="Known organizations")
async def organizations(services: ServicesDep) -> dict[str, object]:
    return {"organizations": services.lake.list_orgs()}
