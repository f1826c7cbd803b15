"""Ingestion: parse an upload (JSONL, CSV or Parquet), validate every row, write atomically.

A batch with any bad row is rejected whole: nothing is written, and the caller gets the
row number (1-based, counting data rows), the field and the reason of each error.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from typing import Any, Literal

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import ValidationError

from crow.datalake import DataLake, WriteMode
from crow.records import get_collection

Format = Literal["jsonl", "csv", "parquet"]
FORMATS: tuple[str, ...] = ("jsonl", "csv", "parquet")
_CONTENT_TYPES: dict[str, Format] = {
    "application/x-ndjson": "jsonl",
    "application/jsonl": "jsonl",
    "application/json": "jsonl",
    "text/csv": "csv",
    "application/vnd.apache.parquet": "parquet",
    "application/x-parquet": "parquet",
}
_SUFFIXES: dict[str, Format] = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".csv": "csv",
    ".parquet": "parquet",
}
_WRITE_BATCH = 100_000


@dataclass(frozen=True)
class RowError:
    row: int
    field: str
    reason: str

    def as_dict(self) -> dict[str, Any]:
        return {"row": self.row, "field": self.field, "reason": self.reason}


class IngestRejected(ValueError):
    """The upload cannot be written; ``errors`` says which rows and why."""

    def __init__(self, message: str, errors: list[RowError] | None = None) -> None:
        super().__init__(message)
        self.errors = errors or []


class UnsupportedFormat(IngestRejected):
    """The upload's format is unknown or was not named."""


def detect_format(
    *, explicit: str | None, content_type: str | None, filename: str | None
) -> Format:
    if explicit:
        if explicit not in FORMATS:
            raise UnsupportedFormat(f"format must be one of {', '.join(FORMATS)}, not {explicit!r}")
        return explicit  # type: ignore[return-value]
    if content_type:
        base = content_type.split(";")[0].strip().lower()
        if base in _CONTENT_TYPES:
            return _CONTENT_TYPES[base]
    if filename:
        for suffix, fmt in _SUFFIXES.items():
            if filename.lower().endswith(suffix):
                return fmt
    raise UnsupportedFormat(
        "cannot tell the upload's format: pass ?format=jsonl|csv|parquet or a Content-Type of "
        "application/x-ndjson, text/csv or application/vnd.apache.parquet"
    )


def parse_rows(data: bytes, fmt: Format) -> list[dict[str, Any]]:
    """Raw rows as dicts; a syntax error rejects the batch with its row number."""
    if fmt == "jsonl":
        return _parse_jsonl(data)
    if fmt == "csv":
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise IngestRejected(f"CSV must be UTF-8: {exc.reason} at byte {exc.start}") from None
        # CSV has no null: an empty cell means "not given", so defaults apply.
        return [
            {k: v for k, v in r.items() if v not in ("", None)}
            for r in csv.DictReader(io.StringIO(text))
        ]
    try:
        rows = pq.read_table(io.BytesIO(data)).to_pylist()
        return [{k: v for k, v in r.items() if v is not None} for r in rows]
    except (pa.ArrowInvalid, OSError) as exc:
        raise IngestRejected(f"not a readable Parquet file: {exc}") from None


def _parse_jsonl(data: bytes) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    errors: list[RowError] = []
    for number, line in enumerate(data.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            errors.append(RowError(number, "", f"invalid JSON: {exc}"))
            continue
        if not isinstance(value, dict):
            errors.append(RowError(number, "", "each line must be a JSON object"))
            continue
        rows.append(value)
    if errors:
        raise IngestRejected(
            f"{len(errors)} lines are not JSON objects; nothing was written", errors
        )
    return rows


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
            continue
        if record["id"] in seen:
            bad_rows += 1
            errors.append(RowError(number, "id", f"duplicate of row {seen[record['id']]}"))
            continue
        seen[record["id"]] = number
        records.append(record)
    if errors:
        raise IngestRejected(
            f"{bad_rows} of {len(rows)} rows are invalid; nothing was written", errors[:max_errors]
        )
    return records


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
) -> int:
    """Parse, validate and write one batch; returns rows written. All or nothing."""
    rows = parse_rows(data, fmt)
    if not rows:
        raise IngestRejected("the upload holds no rows")
    if len(rows) > max_rows:
        raise IngestRejected(f"{len(rows)} rows is more than the {max_rows} allowed in one batch")
    records = validate_rows(collection, rows, max_errors=max_errors)
    if mode == "append":
        clashes = lake.existing_ids(org_id, collection, [r["id"] for r in records])
        if clashes:
            errors = [
                RowError(n, "id", "already exists; send it with mode=upsert to replace it")
                for n, r in enumerate(records, start=1)
                if r["id"] in clashes
            ]
            raise IngestRejected(
                f"{len(errors)} rows have ids that already exist; nothing was written",
                errors[:max_errors],
            )
    batches = (records[i : i + _WRITE_BATCH] for i in range(0, len(records), _WRITE_BATCH))
    return lake.write(org_id, collection, batches, mode=mode)
