"""Request dependencies: the injected services and the organization of the caller."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Header, Request

from crow.api.errors import ApiError
from crow.ids import is_valid_org_id
from crow.services import Services


def get_services(request: Request) -> Services:
    return request.app.state.services


ServicesDep = Annotated[Services, Depends(get_services)]


def require_org(
    services: ServicesDep,
    x_organization_id: Annotated[
        str | None, Header(description="The caller's organization.")
    ] = None,
) -> str:
    """The org of the request from X-Organization-Id: missing 400, unknown 404."""
    if not x_organization_id:
        raise ApiError(400, "missing_organization", "send the X-Organization-Id header")
    if not is_valid_org_id(x_organization_id) or not services.lake.org_exists(x_organization_id):
        raise ApiError(404, "organization_not_found", "no such organization")
    return x_organization_id


OrgDep = Annotated[str, Depends(require_org)]


def require_path_org(org_id: str, header_org: OrgDep) -> str:
    """For routes naming the org in the path: it must be the caller's own org."""
    if org_id != header_org:
        raise ApiError(404, "organization_not_found", "no such organization")
    return org_id
