"""Ingestion: validate every row of an upload (crow.data.upload reads it), write atomically.

A batch with any bad row is rejected whole: nothing is written, and the caller gets the
row number (1-based, counting data rows), the field and the reason of each error.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from crow.data.lake import DataLake, IdsAlreadyExist, WriteMode
from crow.data.records import get_collection
from crow.data.upload import Format, IngestRejected, RowError, parse_rows

_WRITE_BATCH = 100_000


def validate_rows(
    collection: str, rows: list[dict[str, Any]], *, max_errors: int = 100
) -> list[dict[str, Any]]:
    """Storage records for every row, or IngestRejected listing the bad ones."""
    model = get_collection(collection).row_model
    records: list[dict[str, Any]] = []
    errors: list[RowError] = []
    bad_rows = 0
    seen: dict[str, int] = {}
    for number, raw in enumerate(rows, start=1):
        try:
            record = model.model_validate(raw).to_record()
        except ValidationError as exc:
            bad_rows += 1
            for err in exc.errors():
                field = ".".join(str(p) for p in err["loc"]) or "(row)"
                errors.append(RowError(number, field, err["msg"]))
            del errors[max_errors:]
            continue
        except RecursionError:  # a JSON text field nested thousands deep
            bad_rows += 1
            errors.append(RowError(number, "(row)", "a value is nested too deeply"))
            del errors[max_errors:]
            continue
        if record["id"] in seen:
            bad_rows += 1
            errors.append(RowError(number, "id", f"duplicate of row {seen[record['id']]}"))
            del errors[max_errors:]
            continue
        seen[record["id"]] = number
        records.append(record)
    if errors:
        raise IngestRejected(
            f"{bad_rows} of {len(rows)} rows are invalid; nothing was written", errors[:max_errors]
        )
    return records


class IngestAbandoned(RuntimeError):
    """Nobody waits for this batch any more: it was not written."""


def ingest(
    lake: DataLake,
    org_id: str,
    collection: str,
    data: bytes,
    fmt: Format,
    *,
    mode: WriteMode = "append",
    max_rows: int = 500_000,
    max_errors: int = 100,
    max_bytes: int | None = None,
    wanted: Callable[[], bool] | None = None,
) -> int:
    """Parse, validate and write one batch; returns rows written. All or nothing.

    Blocking (parsing, validation and the write): call it off the event loop. An append's
    check that its ids are new is made by the write, under the collection's lock.
    `wanted()` False before the write (the client went away): IngestAbandoned, nothing written.
    """
    rows = parse_rows(data, fmt, max_rows=max_rows, max_bytes=max_bytes, max_errors=max_errors)
    if not rows:
        raise IngestRejected("the upload holds no rows")
    records = validate_rows(collection, rows, max_errors=max_errors)
    del rows
    if wanted is not None and not wanted():
        raise IngestAbandoned("the client went away before the write; nothing was written")
    batches = (records[i : i + _WRITE_BATCH] for i in range(0, len(records), _WRITE_BATCH))
    try:
        return lake.write(org_id, collection, batches, mode=mode)
    except IdsAlreadyExist as exc:
        errors = [
            RowError(n, "id", "already exists; send it with mode=upsert to replace it")
            for n, r in enumerate(records, start=1)
            if r["id"] in exc.ids
        ]
        raise IngestRejected(
            f"{len(errors)} rows have ids that already exist; nothing was written",
            errors[:max_errors],
        ) from None
