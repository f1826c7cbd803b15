"""Knowledge-base search, single-document indexing and reindex jobs (the Q&A service's index side)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from crow.api.deps import EditorOrg, OrgDep, SearchOrg, ServicesDep
from crow.api.errors import ApiError
from crow.api.routes_search import embed, run_search
from crow.data.ingest import validate_rows
from crow.data.upload import IngestRejected
from crow.retrieval.embed_text import texts_for
from crow.services import need
from indexes.store import IndexCollection

router = APIRouter(prefix="/api/v1/qna", tags=["knowledge base"])


class DocumentIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str | None = Field(None, description="Default: a new id. An existing id is replaced.")
    title: str = Field(min_length=1, max_length=300)
    context_type: str = Field("document", min_length=1, max_length=64)
    body: str = Field(min_length=1, max_length=200_000)


ReindexCollection = IndexCollection


def _org_context_only() -> list[ReindexCollection]:
    return ["org_context"]


class ReindexIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    collections: list[ReindexCollection] = Field(default_factory=_org_context_only, min_length=1)
    mode: Literal["full", "incremental"] = "full"


@router.get("/search", summary="Semantic search of the organization's knowledge base")
async def qna_search(
    org_id: SearchOrg,
    services: ServicesDep,
    query: Annotated[str, Query(min_length=1, max_length=500)],
    top_k: Annotated[int, Query(alias="topK", ge=1, le=50)] = 5,
    organization_id: Annotated[str | None, Query(alias="organizationId")] = None,
) -> dict[str, Any]:
    if organization_id is not None and organization_id != org_id:
        raise ApiError(
            403, "wrong_organization", "organizationId names another organization than the key's"
        )
    return await run_search(services, org_id, "org_context", query, limit=top_k)


@router.post("/index", status_code=201, summary="Index one document now")
async def qna_index(
    doc: DocumentIn, org_id: EditorOrg, services: ServicesDep, request: Request
) -> dict[str, Any]:
    from crow.ids import new_id

    row = {**doc.model_dump(), "id": doc.id or new_id("doc"), "updated_at": datetime.now(UTC)}
    try:
        record = validate_rows("documents", [row])[0]
    except IngestRejected as exc:
        raise ApiError(
            422, "invalid_request", str(exc), [e.as_dict() for e in exc.errors]
        ) from None
    vector = await embed(services, texts_for("org_context", {k: [v] for k, v in record.items()}))
    if await request.is_disconnected():  # the client is gone: don't write what it won't see
        raise ApiError(499, "client_closed_request", "the client closed the connection")
    version = await need(services.indexer, "indexer").index_documents(org_id, [record], vector)
    return {"organization_id": org_id, "id": record["id"], "index_version": version}


@router.post("/reindex", status_code=202, summary="Submit a reindex job")
async def qna_reindex(
    org_id: EditorOrg, services: ServicesDep, body: ReindexIn | None = None
) -> dict[str, Any]:
    body = body or ReindexIn()
    job = await need(services.indexer, "indexer").submit(
        org_id, list(body.collections), body.mode == "full"
    )
    if job.pop("already_running", False):
        raise ApiError(
            409,
            "reindex_running",
            f"reindex job {job['id']} of {', '.join(job['collections'])} is running; "
            "poll it, then submit again",
            [{"job_id": job["id"], "state": job["state"]}],
        )
    return job


@router.get("/reindex/{job_id}", summary="Status and progress of a reindex job")
async def qna_reindex_status(job_id: str, org_id: OrgDep, services: ServicesDep) -> dict[str, Any]:
    job = await need(services.indexer, "indexer").status(org_id, job_id)
    if job is None:
        raise ApiError(404, "job_not_found", "no such job")
    return job


@router.get("/indexing", summary="Whether the organization's data is searchable yet")
async def qna_indexing(org_id: OrgDep, services: ServicesDep) -> dict[str, Any]:
    """Each searchable collection's published version (null: not searchable yet) and the
    organization's latest reindex job, with its rows done of rows total: what the dashboard's
    indexing banner shows while a first indexing runs."""
    versions = await need(services.retriever, "retriever").readiness(org_id)
    job = await services.store.latest_job_run(org_id, "reindex")
    return {
        "organization_id": org_id,
        "searchable": all(versions.values()),
        "collections": versions,
        "job": job,
    }


@router.get("/reindex", summary="Reindex schedule of the organization", include_in_schema=True)
async def qna_reindex_schedule(org_id: OrgDep, services: ServicesDep) -> dict[str, Any]:
    return await need(services.indexer, "indexer").schedule(org_id)
