"""Request dependencies: the injected services, and who may do what.

The guard (crow.api.guard) has already resolved the caller's key to a Principal; these turn
it into the organization a route works on (the key's own, never another), check the role a
route needs, and take from the caller's rate limits and the organization's token quota.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Annotated, Literal, cast

from fastapi import Depends, Header, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from crow.api.errors import ApiError
from crow.auth.keys import PLATFORM, Principal, Role
from crow.ids import is_valid_org_id
from crow.services import Services

bearer = HTTPBearer(
    auto_error=False, bearerFormat="API key", description="An API key: `python -m jobs.keys`."
)


def get_services(request: Request) -> Services:
    return cast(Services, request.app.state.services)  # set by crow.api.app.create_app


ServicesDep = Annotated[Services, Depends(get_services)]


def principal_of(request: Request) -> Principal:
    principal = request.scope.get("state", {}).get("principal")
    if not isinstance(principal, Principal):  # the guard lets no such request through
        raise ApiError(401, "unauthorized", "send an API key: 'Authorization: Bearer <key>'")
    return principal


def get_principal(
    request: Request, _: Annotated[HTTPAuthorizationCredentials | None, Security(bearer)]
) -> Principal:
    return principal_of(request)


PrincipalDep = Annotated[Principal, Depends(get_principal)]


def org_for(services: Services, principal: Principal, header_org: str | None) -> str:
    """The organization a request works on: the key's. X-Organization-Id, the spec's header,
    may repeat it and must match it (403 otherwise); without keys (auth.mode 'off') it names it.
    """
    if principal.role == PLATFORM:
        raise ApiError(403, "forbidden", "the operator token reads no organization's data")
    org_id = principal.org_id
    if org_id is None:  # local development without keys
        if not header_org:
            raise ApiError(400, "missing_organization", "send the X-Organization-Id header")
        org_id = header_org
    elif header_org and header_org != org_id:
        raise ApiError(
            403, "wrong_organization", "X-Organization-Id names another organization than the key's"
        )
    if not is_valid_org_id(org_id) or not services.lake.org_exists(org_id):
        raise ApiError(404, "organization_not_found", "no such organization")
    return org_id


def require_org(
    services: ServicesDep,
    principal: PrincipalDep,
    x_organization_id: Annotated[
        str | None, Header(description="The caller's organization (must be the key's).")
    ] = None,
) -> str:
    return org_for(services, principal, x_organization_id)


OrgDep = Annotated[str, Depends(require_org)]


def require_path_org(org_id: str, own_org: OrgDep) -> str:
    """For routes naming the org in the path: it must be the caller's own org."""
    if org_id != own_org:
        raise ApiError(
            403, "wrong_organization", "the path names another organization than the key's"
        )
    return org_id


def _role(role: Role) -> Callable[[Principal, str], str]:
    def check(principal: PrincipalDep, org_id: OrgDep) -> str:
        if not principal.may(role):
            raise ApiError(403, "forbidden", f"this needs a key with the {role} role")
        return org_id

    return check


EditorOrg = Annotated[str, Depends(_role("editor"))]
AdminOrg = Annotated[str, Depends(_role("admin"))]


async def admit(
    services: Services,
    principal: Principal,
    bucket: Literal["chat", "search"],
    org_id: str | None = None,
) -> None:
    """One request from the caller's `bucket` (and, given `org_id`, within the organization's
    daily token quota); 429 with Retry-After otherwise."""
    quotas = services.settings.quotas
    per_minute, burst = (
        (quotas.chat_per_minute, quotas.chat_burst)
        if bucket == "chat"
        else (quotas.search_per_minute, quotas.search_burst)
    )
    refused = await services.store.admit(
        f"{bucket}:{principal.key_id}",
        per_minute=per_minute,
        burst=burst,
        org_id=org_id,
        daily_tokens=quotas.daily_tokens if org_id else 0,
    )
    if refused is None:
        return
    reason, wait = refused
    if reason == "rate":
        seconds = max(1, round(wait + 0.5))
        raise ApiError(
            429,
            "rate_limited",
            f"too many {bucket} requests; retry in {seconds} s",
            headers={"Retry-After": str(seconds)},
        )
    now = datetime.now(UTC)
    midnight = (now + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    raise ApiError(
        429,
        "quota_exceeded",
        f"today's {quotas.daily_tokens:,} model tokens are spent; the quota renews at 00:00 UTC",
        headers={"Retry-After": str(int((midnight - now).total_seconds()) + 1)},
    )


async def chat_allowed(services: ServicesDep, principal: PrincipalDep, org_id: OrgDep) -> str:
    """A message for the model: the caller's chat rate and the org's token quota."""
    await admit(services, principal, "chat", org_id)
    return org_id


async def search_allowed(services: ServicesDep, principal: PrincipalDep, org_id: OrgDep) -> str:
    await admit(services, principal, "search")
    return org_id


ChatOrg = Annotated[str, Depends(chat_allowed)]
SearchOrg = Annotated[str, Depends(search_allowed)]
