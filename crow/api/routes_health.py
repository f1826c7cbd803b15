"""Liveness, readiness and the organizations the caller can pick from."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Header
from fastapi.responses import JSONResponse

from crow.api.deps import PrincipalDep, ServicesDep, org_for
from crow.api.errors import error_body

router = APIRouter(tags=["health"])


@router.get("/health", summary="Alive")
async def health() -> dict[str, str]:
    return {"status": "ok"}


READY_TIMEOUT_S = 5.0


async def _check(facade: Any) -> str:
    try:
        async with asyncio.timeout(READY_TIMEOUT_S):
            await facade.check_health()
    except AttributeError:
        return "ok"  # an in-process object without a health hook
    except TimeoutError:
        return f"no answer within {READY_TIMEOUT_S:g}s"
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"[:200]
    return "ok"


@router.get("/ready", summary="Every dependency answers")
async def ready(services: ServicesDep) -> JSONResponse:
    deps = {
        name: getattr(services, name)
        for name in ("store", "embedder", "retriever", "analytics", "indexer", "chat")
    }
    present = {name: facade for name, facade in deps.items() if facade is not None}
    results = await asyncio.gather(*(_check(f) for f in present.values()))
    checks = dict(zip(present, results, strict=True))
    failing = {k: v for k, v in checks.items() if v != "ok"}
    if failing:
        message = "not ready - " + ", ".join(f"{k}: {v}" for k, v in failing.items())
        details = [{"dependency": k, "reason": v} for k, v in failing.items()]
        return JSONResponse(error_body("not_ready", message, details), status_code=503)
    return JSONResponse(
        {"status": "ready", "checks": checks, "organizations": len(services.lake.list_orgs())}
    )


@router.get("/api/v1/organizations", tags=["organizations"], summary="The caller's organization")
async def organizations(
    services: ServicesDep,
    principal: PrincipalDep,
    x_organization_id: Annotated[str | None, Header(description="If sent: the key's.")] = None,
) -> dict[str, object]:
    """The key's own organization; the platform operator's token (and local development
    without keys) sees every organization."""
    orgs = services.lake.list_orgs()
    if principal.org_id is not None:
        org_for(services, principal, x_organization_id)  # another org's header: 403
        orgs = [org for org in orgs if org["id"] == principal.org_id]
    return {"organizations": orgs}
