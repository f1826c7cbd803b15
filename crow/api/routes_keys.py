"""API keys of the caller's organization (admin role) and what it has used today."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from crow.api.deps import AdminOrg, OrgDep, ServicesDep
from crow.api.errors import ApiError
from crow.auth.keys import Role

router = APIRouter(prefix="/api/v1", tags=["access"])


class KeyIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: Role = Field(
        "reader",
        description="reader: chat, Q&A, search; editor: also ingest "
        "and indexing; admin: also the organization's keys.",
    )
    name: str | None = Field(None, max_length=100, description="Who or what uses the key.")
    expires_in_days: int | None = Field(None, ge=1, le=3650, description="Default: never.")


@router.post("/keys", status_code=201, summary="Create an API key (shown this once)")
async def create_key(body: KeyIn, org_id: AdminOrg, services: ServicesDep) -> dict[str, Any]:
    expires = None
    if body.expires_in_days is not None:
        expires = datetime.now(UTC) + timedelta(days=body.expires_in_days)
    return await services.store.create_api_key(
        org_id, body.role, name=body.name, expires_at=expires
    )


@router.get("/keys", summary="The organization's API keys (never their secrets)")
async def list_keys(org_id: AdminOrg, services: ServicesDep) -> dict[str, Any]:
    return {"keys": await services.store.list_api_keys(org_id)}


@router.delete("/keys/{key_id}", status_code=204, summary="Revoke an API key")
async def revoke_key(key_id: str, org_id: AdminOrg, services: ServicesDep) -> None:
    if not await services.store.revoke_api_key(key_id, org_id=org_id):
        raise ApiError(404, "key_not_found", "no such active key in this organization")


@router.get("/usage", summary="Today's model tokens, the quota and the rate limits")
async def usage(org_id: OrgDep, services: ServicesDep) -> dict[str, Any]:
    quotas = services.settings.quotas
    used = await services.store.usage_today(org_id)
    sessions = 0
    for kind in ("chat", "qna"):
        sessions += (await services.store.list_sessions(org_id, kind=kind, limit=1))[1]
    return {
        "organization_id": org_id,
        "day": datetime.now(UTC).date().isoformat(),
        "tokens_used": used,
        "daily_token_quota": quotas.daily_tokens or None,
        "tokens_left": max(0, quotas.daily_tokens - used) if quotas.daily_tokens else None,
        "sessions": sessions,
        "max_sessions": quotas.max_sessions,
        "rate_limits": {
            "chat": {"per_minute": quotas.chat_per_minute, "burst": quotas.chat_burst},
            "search": {"per_minute": quotas.search_per_minute, "burst": quotas.search_burst},
        },
    }
