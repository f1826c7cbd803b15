"""Ingestion is bounded before it builds rows, and no upload makes it fail another way.

Row caps are enforced while reading (a Parquet file's from its footer), one JSONL line or CSV
field is bounded, a Parquet file's decoded size is bounded; property-based tests feed the
parsers arbitrary bytes and text (rows or IngestRejected, never another exception, in bounded
time) and round-trip valid generated rows through JSONL, CSV and Parquet.
"""

from __future__ import annotations

import csv
import io
import json
import tracemalloc
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crow.data.ingest import ingest, validate_rows
from crow.data.records import COLLECTIONS
from crow.data.upload import (
    MAX_ROW_BYTES,
    IngestRejected,
    UnsupportedFormat,
    detect_format,
    parse_rows,
)
from tests.conftest import ORG_A

MiB = 1024 * 1024


def peak_python_bytes(fn) -> tuple[Any, int]:
    """fn()'s result (or the exception it raised) and the peak of Python allocations in it."""
    tracemalloc.start()
    try:
        try:
            result: Any = fn()
        except Exception as exc:
            result = exc
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def repeated_parquet(rows: int, value: str = "Dome Tent", **write_options) -> bytes:
    """`rows` rows of one repeated value: a few KB however many rows (RLE / dictionary)."""
    table = pa.table({"title": pa.array([value], pa.string()).take([0] * rows)})
    buf = io.BytesIO()
    pq.write_table(table, buf, **write_options)
    return buf.getvalue()


# --- row caps are enforced while reading -------------------------------------------------


def test_parquet_row_count_is_read_from_the_footer_before_any_row_is_decoded(lake):
    data = repeated_parquet(2_000_000)
    assert len(data) < 100_000
    exc, peak = peak_python_bytes(
        lambda: ingest(lake, ORG_A, "products", data, "parquet", max_rows=1000)
    )
    assert isinstance(exc, IngestRejected), exc
    assert str(exc) == "2000000 rows is more than the 1000 allowed in one batch"
    assert peak < 5 * MiB  # decoding 2M rows into dicts takes hundreds of MB
    assert lake.count(ORG_A, "products") == 0


@pytest.mark.parametrize(
    ("fmt", "data"),
    [("jsonl", b"{}\n" * 1_000_000), ("csv", b"id\n" + b"x\n" * 1_000_000)],
)
def test_jsonl_and_csv_stop_reading_at_the_row_past_the_cap(lake, fmt, data):
    exc, peak = peak_python_bytes(lambda: ingest(lake, ORG_A, "products", data, fmt, max_rows=1000))
    assert isinstance(exc, IngestRejected), exc
    assert str(exc) == "more than the 1000 rows allowed in one batch"
    # CSV is decoded to text whole (at most the upload); no row past the cap is built
    assert peak < 2 * len(data) + MiB
    assert lake.count(ORG_A, "products") == 0


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_exactly_the_cap_is_accepted(lake, fmt):
    rows = [{"id": f"p{i}", "title": "T", "category": "C", "price": 1} for i in range(5)]
    if fmt == "jsonl":
        data = "\n\n".join(json.dumps(r) for r in rows).encode()  # blank lines are not rows
    else:
        data = ("id,title,category,price\n" + "".join(f"p{i},T,C,1\n" for i in range(5))).encode()
    assert ingest(lake, ORG_A, "products", data, fmt, max_rows=5) == 5
    with pytest.raises(IngestRejected, match="allowed in one batch"):
        ingest(lake, ORG_A, "patterns", data, fmt, max_rows=4)


# --- one row, one field, a Parquet file's decoded values ------------------------------------


def test_a_60_mb_jsonl_line_is_a_row_error_without_being_decoded(lake):
    data = b'{"id": "p1", "title": "' + b"x" * (60 * MiB) + b'"}\n{"id": "p2"}'
    exc, peak = peak_python_bytes(lambda: ingest(lake, ORG_A, "products", data, "jsonl"))
    assert isinstance(exc, IngestRejected), exc
    assert exc.errors[0].row == 1 and f"at most {MAX_ROW_BYTES}" in exc.errors[0].reason
    assert peak < MiB  # neither the line nor a 60 MB str was built
    assert lake.count(ORG_A, "products") == 0


def test_a_csv_row_over_the_bound_is_a_row_error_without_being_decoded(lake):
    data = b"id,title,category,price\np1,T,C,1\np2," + b"x" * (60 * MiB) + b",C,1\n"
    exc, peak = peak_python_bytes(lambda: ingest(lake, ORG_A, "products", data, "csv"))
    assert isinstance(exc, IngestRejected), exc
    assert exc.errors[0].row == 2 and f"at most {MAX_ROW_BYTES}" in exc.errors[0].reason
    assert peak < MiB
    # a quoted field over the bound, spread over short lines: the csv module's field bound
    field = "\n".join(["y" * 1000] * (MAX_ROW_BYTES // 1000 + 1))
    data = f'id,title,category,price\np1,"{field}",C,1\n'.encode()
    with pytest.raises(IngestRejected) as caught:
        ingest(lake, ORG_A, "products", data, "csv")
    assert caught.value.errors[0].row == 1
    assert "field larger than field limit" in caught.value.errors[0].reason
    assert lake.count(ORG_A, "products") == 0


def test_a_csv_document_body_of_the_longest_allowed_kind_is_ingested(lake):
    """A body may be 200,000 characters: more than the csv module's default field bound."""
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(["id", "title", "context_type", "body", "updated_at"])
    w.writerow(["d1", "Handbook", "policy", "é" * 200_000, "2026-01-01T00:00:00Z"])
    assert ingest(lake, ORG_A, "documents", out.getvalue().encode(), "csv") == 1
    assert len(lake.read_table(ORG_A, "documents")["body"][0].as_py()) == 200_000


def test_parquet_values_are_bounded_decoded_not_as_stored(lake):
    # 2,000 rows of one 100 KB dictionary value: a few KB on disk, 200 MB as Python strings
    data = repeated_parquet(2000, "x" * 100_000)
    assert len(data) < 100_000
    exc, peak = peak_python_bytes(
        lambda: ingest(lake, ORG_A, "products", data, "parquet", max_bytes=MiB)
    )
    assert isinstance(exc, IngestRejected), exc
    assert "bytes decoded" in str(exc)
    assert peak < 5 * MiB
    # one 20 MB value compressed to a few KB: refused from the footer's page sizes
    data = repeated_parquet(1, "x" * (20 * MiB), use_dictionary=False, compression="zstd")
    assert len(data) < MiB
    with pytest.raises(IngestRejected, match="uncompressed"):
        ingest(lake, ORG_A, "products", data, "parquet", max_bytes=MiB)
    # within the bound, the same shape of file is ingested
    rows = [{"id": f"p{i}", "title": "T" * 300, "category": "C", "price": 1.0} for i in range(50)]
    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), buf)
    assert ingest(lake, ORG_A, "products", buf.getvalue(), "parquet", max_bytes=MiB) == 50
    assert lake.count(ORG_A, "products") == 50


def test_nested_parquet_dictionaries_are_counted(lake):
    big = "y" * 100_000
    table = pa.table({"id": ["pat-1"] * 500, "related_ids": [[big, big]] * 500})
    buf = io.BytesIO()
    pq.write_table(table, buf)
    with pytest.raises(IngestRejected, match="bytes decoded"):
        ingest(lake, ORG_A, "patterns", buf.getvalue(), "parquet", max_bytes=MiB)


# --- property-based: arbitrary input is rows or IngestRejected, in bounded time ---------------

# Pieces that reach the parsers' edges: nesting past the recursion limit, integers past
# Python's digit limit, NaN, BOMs, NUL, lone carriage returns, unbalanced quotes, extra cells.
FRAGMENTS = [
    "{",
    "}",
    "[",
    "]",
    '"',
    "'",
    ",",
    ":",
    "\n",
    "\r",
    "\r\n",
    "\x00",
    "\ufeff",
    "\\",
    "NaN",
    "Infinity",
    "-",
    "1e999",
    "9" * 5000,
    "[" * 3000,
    '{"a":' * 3000,
    "null",
    "true",
    '{"id": "p1"}',
    '{"id": "p1", "title": "T", "category": "C", "price": 1}',
    '{"attributes": "' + "[" * 3000 + '"}',
    "id,title,category,price",
    "p1,T,C,1",
    'p1,"T\nU",C,1',
    "a,b,c,d,e,f,g",
    '"unclosed',
    "\u2028",
    "é",
    "\udcff",
]
JSONISH = st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=20), max_size=30).map("".join)
FAST = settings(
    max_examples=150,
    deadline=timedelta(seconds=2),
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def parse_and_validate(data: bytes, fmt: str) -> None:
    """Everything ingest does before the write, for every collection."""
    try:
        rows = parse_rows(data, fmt, max_rows=1000, max_bytes=MiB)
    except IngestRejected:
        return
    assert all(isinstance(r, dict) for r in rows)
    for name in COLLECTIONS:
        try:
            records = validate_rows(name, rows)
        except IngestRejected as exc:
            assert exc.errors and all(e.row >= 1 for e in exc.errors)
            continue
        assert len(records) == len(rows)


@FAST
@given(data=st.binary(max_size=4000), fmt=st.sampled_from(["jsonl", "csv", "parquet"]))
def test_arbitrary_bytes_are_rows_or_rejected(data, fmt):
    parse_and_validate(data, fmt)


@FAST
@given(text=JSONISH, fmt=st.sampled_from(["jsonl", "csv"]))
def test_arbitrary_text_is_rows_or_rejected(text, fmt):
    parse_and_validate(text.encode("utf-8", "surrogatepass"), fmt)


@FAST
@given(
    explicit=st.none() | st.text(max_size=10),
    content_type=st.none() | st.text(max_size=40),
    filename=st.none() | st.text(max_size=20),
)
def test_any_format_hint_is_a_format_or_unsupported(explicit, content_type, filename):
    try:
        fmt = detect_format(explicit=explicit, content_type=content_type, filename=filename)
    except UnsupportedFormat:
        return
    assert fmt in ("jsonl", "csv", "parquet")


def test_a_damaged_parquet_is_rejected(lake):
    data = bytearray(repeated_parquet(10))
    data[len(data) // 2] ^= 0xFF  # a flipped byte in the pages
    for cut in (bytes(data), bytes(data[: len(data) // 2]) + bytes(data[-8:])):
        with pytest.raises(IngestRejected):  # unreadable, or rows without ids
            ingest(lake, ORG_A, "products", cut, "parquet")
    assert lake.count(ORG_A, "products") == 0


# --- property-based: valid rows round-trip --------------------------------------------------

ROW_ID = st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9_.:-]{0,20}\Z")
TEXT = st.text(st.characters(exclude_categories=["Cs"]), min_size=1, max_size=40)
SCALAR = (
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | TEXT
)
PRODUCT = st.fixed_dictionaries(
    {
        "id": ROW_ID,
        "title": TEXT,
        "category": TEXT,
        "price": st.floats(min_value=0, max_value=1e12, allow_nan=False),
    },
    optional={
        "description": TEXT,
        "attributes": st.dictionaries(TEXT, SCALAR, max_size=4),
    },
)
DOCUMENT = st.fixed_dictionaries(
    {
        "id": ROW_ID,
        "title": TEXT,
        "context_type": TEXT,
        "body": st.text(st.characters(exclude_categories=["Cs"]), min_size=1, max_size=400),
        "updated_at": st.datetimes(
            min_value=datetime(1971, 1, 1), max_value=datetime(2200, 1, 1), timezones=st.just(UTC)
        ),
    }
)


def encode(rows: list[dict[str, Any]], fmt: str) -> bytes:
    def flat(v: Any) -> Any:
        if isinstance(v, dict):
            return json.dumps(v)
        return v.isoformat() if isinstance(v, datetime) else v

    if fmt == "jsonl":
        return "\n".join(json.dumps({k: flat(v) for k, v in r.items()}) for r in rows).encode()
    if fmt == "csv":
        out = io.StringIO()
        fields = sorted({k for r in rows for k in r})
        writer = csv.DictWriter(out, fieldnames=fields)
        writer.writeheader()
        writer.writerows({k: flat(v) for k, v in r.items()} for r in rows)
        return out.getvalue().encode()
    keys = sorted({k for r in rows for k in r})  # from_pylist takes the first row's keys
    table = pa.Table.from_pylist([{k: flat(r.get(k)) for k in keys} for r in rows])
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


def valid(collection: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    try:
        return validate_rows(collection, rows)
    except IngestRejected:
        return None


@settings(FAST, max_examples=100)
@given(
    collection_rows=st.sampled_from(["products", "documents"]).flatmap(
        lambda c: st.tuples(
            st.just(c),
            st.lists(
                PRODUCT if c == "products" else DOCUMENT,
                min_size=1,
                max_size=8,
                unique_by=lambda r: r["id"],
            ),
        )
    ),
    fmt=st.sampled_from(["jsonl", "csv", "parquet"]),
)
def test_valid_rows_round_trip(collection_rows, fmt):
    collection, rows = collection_rows
    expected = valid(collection, rows)
    if expected is None:  # e.g. a title of blanks only: not this test's subject
        return
    got = validate_rows(collection, parse_rows(encode(rows, fmt), fmt, max_rows=len(rows)))
    assert got == expected
