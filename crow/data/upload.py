"""Rows out of an upload (JSONL, CSV or Parquet), bounded while they are read.

Parsing is bounded before it builds rows: a Parquet file's row count is read from its
footer before any page is decoded (a few KB of run-length encoding can hold millions of
rows), and JSONL and CSV are read row by row and stop at the first row past ``max_rows``.
One JSONL line or CSV field may hold at most ``MAX_ROW_BYTES``; a longer one is a row error,
found without decoding it. A syntax error rejects the batch with its row number (1-based,
counting data rows).
"""

from __future__ import annotations

import codecs
import csv
import io
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal, TypeGuard

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

Format = Literal["jsonl", "csv", "parquet"]
FORMATS: tuple[Format, ...] = ("jsonl", "csv", "parquet")


def _is_format(value: str) -> TypeGuard[Format]:
    return value in FORMATS


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
# The largest row: a document's body is at most 200,000 characters, up to 6 bytes each once
# JSON-escaped; 4 MiB leaves room for the other fields. A longer JSONL line or CSV field is
# a row error.
MAX_ROW_BYTES = 4 * 1024 * 1024
# Parquet is compressed: its decoded values may take this many times the upload bound.
PARQUET_EXPANSION = 4
_PARQUET_BATCH = 65_536
_NEWLINE = re.compile(rb"\r\n|\r|\n")  # the line breaks of bytes.splitlines


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
        if not _is_format(explicit):
            raise UnsupportedFormat(f"format must be one of {', '.join(FORMATS)}, not {explicit!r}")
        return explicit
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


def _too_many_rows(max_rows: int, rows: int | None = None) -> IngestRejected:
    """The batch has more rows than allowed; `rows` when known (a streamed read stops early)."""
    if rows is None:
        return IngestRejected(f"more than the {max_rows} rows allowed in one batch")
    return IngestRejected(f"{rows} rows is more than the {max_rows} allowed in one batch")


def parse_rows(
    data: bytes,
    fmt: Format,
    *,
    max_rows: int | None = None,
    max_bytes: int | None = None,
    max_errors: int = 100,
) -> list[dict[str, Any]]:
    """Raw rows as dicts; a syntax error rejects the batch with its row number.

    More than `max_rows` rows is rejected as soon as the row past it is seen (before a
    Parquet file's pages are decoded). `max_bytes` bounds a Parquet file's decoded values
    (``PARQUET_EXPANSION`` times it); None: no bound.
    """
    if fmt == "jsonl":
        return _parse_jsonl(data, max_rows, max_errors)
    if fmt == "csv":
        return _parse_csv(data, max_rows)
    return _parse_parquet(
        data, max_rows, None if max_bytes is None else max_bytes * PARQUET_EXPANSION
    )


def _lines(data: bytes, pos: int = 0) -> Iterator[tuple[int, int, int, int]]:
    """(line number, start, end, end with the line break) of each line from `pos`, split as
    bytes.splitlines splits; no copies."""
    start, number = pos, 0
    for number, brk in enumerate(_NEWLINE.finditer(data, pos), start=1):
        yield number, start, brk.start(), brk.end()
        start = brk.end()
    if start < len(data):
        yield number + 1, start, len(data), len(data)


def _parse_jsonl(data: bytes, max_rows: int | None, max_errors: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    errors: list[RowError] = []
    bad = seen = 0
    for number, start, end, _ in _lines(data):
        if end - start > MAX_ROW_BYTES:
            seen += 1
            bad += 1
            errors.append(
                RowError(number, "", f"the line is {end - start} bytes; at most {MAX_ROW_BYTES}")
            )
        else:
            line = data[start:end]
            if not line.strip():
                continue
            seen += 1
            try:
                value = json.loads(line)
            except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, too many digits
                bad += 1
                errors.append(RowError(number, "", f"invalid JSON: {exc}"))
            except RecursionError:
                bad += 1
                errors.append(RowError(number, "", "invalid JSON: nested too deeply"))
            else:
                if isinstance(value, dict):
                    rows.append(value)
                else:
                    bad += 1
                    errors.append(RowError(number, "", "each line must be a JSON object"))
        if max_rows is not None and seen > max_rows:
            raise _too_many_rows(max_rows)
        del errors[max_errors:]
    if errors:
        raise IngestRejected(f"{bad} lines are not JSON objects; nothing was written", errors)
    return rows


def _parse_csv(data: bytes, max_rows: int | None) -> list[dict[str, Any]]:
    # The csv module's default field bound (131,072 characters) is below a document body's
    # 200,000; the bound is process-wide, so it is only ever raised, here, when CSV is read.
    csv.field_size_limit(max(csv.field_size_limit(), MAX_ROW_BYTES))
    rows: list[dict[str, Any]] = []

    def lines() -> Iterator[str]:
        # Decoded line by line (a UTF-8 character has no CR or LF byte): memory for one
        # line, and one over the bound is refused before it is decoded.
        for _, start, end, after in _lines(data, 3 if data.startswith(codecs.BOM_UTF8) else 0):
            if end - start > MAX_ROW_BYTES:
                row = len(rows) + 1
                reason = f"the line is {end - start} bytes; at most {MAX_ROW_BYTES}"
                raise IngestRejected(
                    f"row {row}: {reason}; nothing was written", [RowError(row, "", reason)]
                )
            try:
                yield data[start:after].decode("utf-8")
            except UnicodeDecodeError as exc:
                raise IngestRejected(
                    f"CSV must be UTF-8: {exc.reason} at byte {start + exc.start}"
                ) from None

    reader = csv.DictReader(lines())
    try:
        for raw in reader:
            if max_rows is not None and len(rows) >= max_rows:
                raise _too_many_rows(max_rows)
            # CSV has no null: an empty cell means "not given", so defaults apply.
            rows.append({k: v for k, v in raw.items() if v not in ("", None)})
    except csv.Error as exc:
        row = len(rows) + 1
        raise IngestRejected(
            f"not readable as CSV at row {row} (line {reader.line_num}): {exc}; "
            "nothing was written",
            [RowError(row, "", f"not readable as CSV: {exc}")],
        ) from None
    return rows


def _parse_parquet(
    data: bytes, max_rows: int | None, max_decoded: int | None
) -> list[dict[str, Any]]:
    try:
        meta = pq.ParquetFile(io.BytesIO(data)).metadata  # the footer only
        if max_rows is not None and meta.num_rows > max_rows:
            raise _too_many_rows(max_rows, meta.num_rows)
        if max_decoded is not None:
            declared = sum(
                meta.row_group(g).column(c).total_uncompressed_size
                for g in range(meta.num_row_groups)
                for c in range(meta.num_columns)
            )
            if declared > max_decoded:
                raise IngestRejected(
                    f"the Parquet file's pages take {declared} bytes uncompressed; "
                    f"at most {max_decoded}"
                )
        # Strings stay dictionary-encoded until their decoded size has been counted: one
        # long value repeated in every row is small on disk and huge as Python objects.
        schema = meta.schema
        strings = [
            schema.column(i).path
            for i in range(len(schema))
            if schema.column(i).physical_type == "BYTE_ARRAY"
            and schema.column(i).logical_type.type != "DECIMAL"
        ]
        reader = pq.ParquetFile(io.BytesIO(data), read_dictionary=strings)
        rows: list[dict[str, Any]] = []
        decoded = 0
        for batch in reader.iter_batches(batch_size=_PARQUET_BATCH):
            decoded += sum(_decoded_nbytes(column) for column in batch.columns)
            if max_decoded is not None and decoded > max_decoded:
                raise IngestRejected(
                    f"the Parquet file's values take more than {max_decoded} bytes decoded"
                )
            if max_rows is not None and len(rows) + batch.num_rows > max_rows:
                raise _too_many_rows(max_rows)  # the footer undercounted
            columns = [_decode_dictionaries(column) for column in batch.columns]
            batch = pa.RecordBatch.from_arrays(columns, names=batch.schema.names)
            rows.extend({k: v for k, v in r.items() if v is not None} for r in batch.to_pylist())
        return rows
    except IngestRejected:
        raise
    except (pa.ArrowException, OSError, ValueError, OverflowError) as exc:
        raise IngestRejected(f"not a readable Parquet file: {exc}") from None


_BINARY_ARRAYS = (pa.StringArray, pa.BinaryArray, pa.LargeStringArray, pa.LargeBinaryArray)


def _has_dictionary(t: pa.DataType) -> bool:
    if pa.types.is_dictionary(t):
        return True
    return any(_has_dictionary(t.field(i).type) for i in range(t.num_fields))


def _plain_type(t: pa.DataType) -> pa.DataType:
    """`t` with each dictionary type replaced by its value type."""
    if pa.types.is_dictionary(t):
        return _plain_type(t.value_type)
    if pa.types.is_list(t):
        return pa.list_(t.value_field.with_type(_plain_type(t.value_type)))
    if pa.types.is_large_list(t):
        return pa.large_list(t.value_field.with_type(_plain_type(t.value_type)))
    if pa.types.is_struct(t):
        return pa.struct(
            [t.field(i).with_type(_plain_type(t.field(i).type)) for i in range(t.num_fields)]
        )
    return t


def _decode_dictionaries(arr: pa.Array[Any]) -> pa.Array[Any]:
    """`arr` without dictionary encoding: to_pylist is several times faster on plain arrays.
    Call it once the decoded size has been counted."""
    if not _has_dictionary(arr.type):
        return arr
    try:
        return arr.cast(_plain_type(arr.type))
    except pa.ArrowException:  # a cast Arrow lacks: to_pylist decodes it, only slower
        return arr


def _decoded_nbytes(arr: pa.Array[Any]) -> int:
    """Bytes of `arr`'s values once its dictionaries are decoded (cheap: no decoding).
    An array's class follows its type (a dictionary type's is DictionaryArray, ...)."""
    if not _has_dictionary(arr.type):
        return arr.nbytes
    if isinstance(arr, pa.DictionaryArray):
        values = arr.dictionary
        if len(values) == 0 or len(arr) == 0:
            return arr.indices.nbytes
        if not isinstance(values, _BINARY_ARRAYS):
            each = -(-_decoded_nbytes(values) // len(values))  # fixed width: the mean
            return arr.indices.nbytes + each * len(arr)
        sizes = pc.binary_length(values)
        return arr.indices.nbytes + int(pc.sum(pc.take(sizes, arr.indices)).as_py() or 0)
    if isinstance(arr, pa.MapArray):
        return 8 * len(arr) + _decoded_nbytes(arr.keys) + _decoded_nbytes(arr.items)
    if isinstance(arr, pa.StructArray):
        return len(arr) + sum(_decoded_nbytes(child) for child in arr.flatten())
    if isinstance(arr, pa.ListArray | pa.LargeListArray | pa.FixedSizeListArray):
        return 8 * len(arr) + _decoded_nbytes(arr.flatten())
    return arr.nbytes  # a nested type not listed above: its stored size
