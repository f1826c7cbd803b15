"""POST /api/v1/ingest/{collection}: upload JSONL, CSV or Parquet rows for the caller's org."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from functools import partial
from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel

from crow.api.deps import EditorOrg, ServicesDep
from crow.api.errors import ApiError
from crow.data.ingest import IngestAbandoned, ingest
from crow.data.upload import IngestRejected, UnsupportedFormat, detect_format

router = APIRouter(prefix="/api/v1/ingest", tags=["ingest"])
CollectionName = Literal["products", "interactions", "patterns", "documents"]


class IngestResult(BaseModel):
    organization_id: str
    collection: str
    mode: str
    rows_written: int
    rows_total: int


async def _while_connected(request: Request, work: Callable[..., int]) -> int:
    """`work(wanted=...)` in a thread; `wanted()` turns False once the client has gone, so
    a batch nobody waits for is parsed but not written."""
    gone = threading.Event()

    async def watch() -> None:
        while not await request.is_disconnected():
            await asyncio.sleep(0.25)
        gone.set()

    watcher = asyncio.create_task(watch())
    try:
        return await asyncio.to_thread(work, wanted=lambda: not gone.is_set())
    finally:
        watcher.cancel()


@router.post(
    "/{collection}",
    status_code=201,
    response_model=IngestResult,
    summary="Validate and write a batch of rows (all or nothing)",
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                t: {"schema": {"type": "string", "format": "binary"}}
                for t in ("application/x-ndjson", "text/csv", "application/vnd.apache.parquet")
            },
        }
    },
)
async def ingest_rows(
    collection: CollectionName,
    request: Request,
    org_id: EditorOrg,
    services: ServicesDep,
    format: Annotated[Literal["jsonl", "csv", "parquet"] | None, Query()] = None,
    mode: Annotated[Literal["append", "upsert", "replace"], Query()] = "append",
) -> IngestResult:
    limits = services.settings.limits
    data = await request.body()  # bounded by max_ingest_bytes in crow.api.limits.BodyLimit
    try:
        fmt = detect_format(
            explicit=format, content_type=request.headers.get("content-type"), filename=None
        )
        # Parsing, validation and the write all block: a worker thread, never the loop.
        # Rows are counted while they are read (a Parquet file's from its footer) and the
        # decoded size of a Parquet file is bounded, so a small upload cannot expand into
        # millions of rows.
        written = await _while_connected(
            request,
            partial(
                ingest,
                services.lake,
                org_id,
                collection,
                data,
                fmt,
                mode=mode,
                max_rows=limits.max_ingest_rows,
                max_errors=limits.max_row_errors,
                max_bytes=limits.max_ingest_bytes,
            ),
        )
    except IngestAbandoned as exc:
        raise ApiError(499, "client_closed_request", str(exc)) from None
    except UnsupportedFormat as exc:
        raise ApiError(415, "unsupported_media_type", str(exc)) from None
    except IngestRejected as exc:
        details = [e.as_dict() for e in exc.errors]
        raise ApiError(422, "invalid_rows", str(exc), details) from None
    total = await asyncio.to_thread(services.lake.count, org_id, collection)
    return IngestResult(
        organization_id=org_id,
        collection=collection,
        mode=mode,
        rows_written=written,
        rows_total=total,
    )
