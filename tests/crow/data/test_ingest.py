"""Ingestion over HTTP: each format, all-or-nothing batches, per-row errors, write modes."""

import csv
import io
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.conftest import ORG_A, ORG_B, assert_error, store_app

PRODUCTS = [
    {
        "id": "p1",
        "title": "Dome Tent 2",
        "category": "Tents",
        "price": 199.0,
        "attributes": {"color": "green"},
    },
    {
        "id": "p2",
        "title": "Trail Runner",
        "category": "Footwear",
        "price": 120.5,
        "description": "Light and fast",
    },
]
INTERACTIONS = [
    {
        "id": "i1",
        "channel": "web",
        "occurred_at": "2026-11-01T10:00:00Z",
        "text": "Viewed tent",
        "product_id": "p1",
        "metadata": {"device": "mobile"},
    },
    {"id": "i2", "channel": "cctv", "occurred_at": "2026-11-02T11:00:00", "text": "Dwelled 40s"},
]


def as_jsonl(rows) -> bytes:
    return "\n".join(json.dumps(r) for r in rows).encode()


def as_csv(rows) -> bytes:
    fields = sorted({k for r in rows for k in r})
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=fields)
    writer.writeheader()
    for r in rows:
        writer.writerow({k: json.dumps(v) if isinstance(v, dict) else v for k, v in r.items()})
    return out.getvalue().encode()


def as_parquet(rows) -> bytes:
    table = pa.Table.from_pylist(
        [{k: json.dumps(v) if isinstance(v, dict) else v for k, v in r.items()} for r in rows]
    )
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


def post(client, collection, body, *, content_type=None, org=ORG_A, **params):
    headers = dict(client.as_org(org))
    if content_type:
        headers["Content-Type"] = content_type
    return client.post(f"/api/v1/ingest/{collection}", content=body, headers=headers, params=params)


@pytest.mark.parametrize(
    ("encode", "content_type"),
    [
        (as_jsonl, "application/x-ndjson"),
        (as_csv, "text/csv"),
        (as_parquet, "application/vnd.apache.parquet"),
    ],
)
@pytest.mark.parametrize(
    ("collection", "rows"), [("products", PRODUCTS), ("interactions", INTERACTIONS)]
)
def test_each_format_is_ingested_and_readable(client, lake, encode, content_type, collection, rows):
    r = post(client, collection, encode(rows), content_type=content_type)
    assert r.status_code == 201, r.text
    assert r.json()["rows_written"] == r.json()["rows_total"] == 2
    table = lake.read_table(ORG_A, collection).to_pylist()
    assert sorted(t["id"] for t in table) == sorted(x["id"] for x in rows)
    first = next(t for t in table if t["id"] == rows[0]["id"])
    nested = "attributes" if collection == "products" else "metadata"
    assert json.loads(first[nested]) == rows[0][nested]
    assert lake.count(ORG_B, collection) == 0  # the other org got nothing


def test_format_from_query_parameter_overrides_content_type(client, lake):
    r = post(
        client, "products", as_csv(PRODUCTS), content_type="application/octet-stream", format="csv"
    )
    assert r.status_code == 201, r.text


def test_unknown_format_is_415(client):
    assert_error(
        post(client, "products", b"x", content_type="text/plain"), 415, "unsupported_media_type"
    )


def test_a_bad_row_rejects_the_whole_batch_and_writes_nothing(client, lake, settings):
    assert (
        post(
            client, "products", as_jsonl(PRODUCTS), content_type="application/x-ndjson"
        ).status_code
        == 201
    )
    before = sorted(p.name for p in settings.data_dir.rglob("*"))
    bad = [
        {"id": "p3", "title": "Ok", "category": "Tents", "price": 10},
        {"id": "p4", "title": "", "category": "Tents", "price": -5},
        {"id": "p5", "title": "No category", "price": 3, "colour": "red"},
    ]
    error = assert_error(
        post(client, "products", as_jsonl(bad), content_type="application/x-ndjson"),
        422,
        "invalid_rows",
    )
    assert "2 of 3 rows are invalid" in error["message"]
    got = {(d["row"], d["field"]) for d in error["details"]}
    assert {(2, "title"), (2, "price"), (3, "category"), (3, "colour")} <= got
    assert all(d["reason"] for d in error["details"])
    assert lake.count(ORG_A, "products") == 2
    assert sorted(p.name for p in settings.data_dir.rglob("*")) == before


def test_malformed_jsonl_and_csv_values_are_row_errors(client, lake):
    error = assert_error(
        post(
            client,
            "interactions",
            b'{"id": "i1"}\nnot json\n[1]',
            content_type="application/x-ndjson",
        ),
        422,
        "invalid_rows",
    )
    assert [d["row"] for d in error["details"]] == [2, 3]
    csv_body = b"id,channel,occurred_at,text,metadata\ni9,web,2026-01-01T00:00:00,hi,{oops\n"
    error = assert_error(
        post(client, "interactions", csv_body, content_type="text/csv"), 422, "invalid_rows"
    )
    assert error["details"][0]["field"] == "metadata" and "JSON" in error["details"][0]["reason"]
    assert lake.count(ORG_A, "interactions") == 0


def test_duplicate_and_existing_ids(client, lake):
    dup = [PRODUCTS[0], PRODUCTS[0]]
    error = assert_error(
        post(client, "products", as_jsonl(dup), content_type="application/x-ndjson"),
        422,
        "invalid_rows",
    )
    assert error["details"] == [{"row": 2, "field": "id", "reason": "duplicate of row 1"}]
    post(client, "products", as_jsonl(PRODUCTS), content_type="application/x-ndjson")
    error = assert_error(
        post(client, "products", as_jsonl(PRODUCTS[:1]), content_type="application/x-ndjson"),
        422,
        "invalid_rows",
    )
    assert "mode=upsert" in error["details"][0]["reason"]
    assert lake.count(ORG_A, "products") == 2


def test_upsert_replaces_by_id_and_replace_swaps_everything(client, lake):
    post(client, "products", as_jsonl(PRODUCTS), content_type="application/x-ndjson")
    changed = [
        {**PRODUCTS[0], "price": 149.0},
        {"id": "p9", "title": "New", "category": "Tents", "price": 1},
    ]
    r = post(
        client, "products", as_jsonl(changed), content_type="application/x-ndjson", mode="upsert"
    )
    assert r.json()["rows_total"] == 3
    prices = {p["id"]: p["price"] for p in lake.read_table(ORG_A, "products").to_pylist()}
    assert prices == {"p1": 149.0, "p2": 120.5, "p9": 1.0}
    r = post(
        client,
        "products",
        as_jsonl(changed[1:]),
        content_type="application/x-ndjson",
        mode="replace",
    )
    assert r.json()["rows_total"] == 1


def test_upload_size_is_bounded(settings, lake, store, client):
    from crow.settings import AppSettings

    small = AppSettings.from_args(
        {"var_dir": str(settings.var_dir), "limits": {"max_ingest_bytes": 100}}
    )
    app = store_app(small, store)
    with type(client)(app) as c:
        c.keys = client.keys
        assert_error(
            post(c, "products", b"x" * 101, content_type="text/csv"), 413, "payload_too_large"
        )
        # no declared length (a chunked upload): counted as it streams
        chunks = (b"x" * 30 for _ in range(4))
        r = c.post(
            "/api/v1/ingest/products",
            content=chunks,
            headers={**c.as_org(ORG_A), "Content-Type": "text/csv"},
        )
        assert "content-length" not in r.request.headers
        assert_error(r, 413, "payload_too_large")
    assert lake.count(ORG_A, "products") == 0


def test_bad_collection_and_mode_are_422(client):
    assert_error(
        post(client, "customers", b"{}", content_type="application/x-ndjson"),
        422,
        "invalid_request",
    )
    assert_error(
        post(client, "products", b"{}", content_type="application/x-ndjson", mode="merge"),
        422,
        "invalid_request",
    )


def test_empty_upload_is_rejected(client):
    assert_error(
        post(client, "products", b"", content_type="application/x-ndjson"), 422, "invalid_rows"
    )


def limited_client(client, settings, lake, store, **limits):
    """A client of an app with other ingest limits, with the fixture's keys."""
    from crow.settings import AppSettings

    small = AppSettings.from_args({"var_dir": str(settings.var_dir), "limits": limits})
    c = type(client)(store_app(small, store))
    c.keys = client.keys
    return c


def repeated_parquet(rows: int, value: str = "Dome Tent") -> bytes:
    """`rows` rows of one repeated value: run-length encoded, a few KB however many rows."""
    buf = io.BytesIO()
    pq.write_table(pa.table({"title": pa.array([value]).take([0] * rows)}), buf)
    return buf.getvalue()


def test_a_small_parquet_of_millions_of_rows_is_refused_before_it_is_decoded(
    client, lake, settings
):
    import tracemalloc

    post(client, "products", as_jsonl(PRODUCTS), content_type="application/x-ndjson")
    before = sorted(p.name for p in settings.data_dir.rglob("*"))
    body = repeated_parquet(10_000_000)
    assert len(body) < 64 * 1024
    tracemalloc.start()
    try:
        r = post(client, "products", body, content_type="application/vnd.apache.parquet")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    error = assert_error(r, 422, "invalid_rows")
    assert error["message"] == "10000000 rows is more than the 500000 allowed in one batch"
    assert peak < 20 * 1024 * 1024  # 10M rows as dicts would take gigabytes
    assert sorted(p.name for p in settings.data_dir.rglob("*")) == before
    assert lake.count(ORG_A, "products") == 2


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (b'{"id": "p1"}\n' * 100_000, "application/x-ndjson"),
        (b"id\n" + b"p1\n" * 100_000, "text/csv"),
    ],
)
def test_jsonl_and_csv_over_the_row_cap_are_refused_as_read(
    client, lake, settings, store, body, content_type
):
    with limited_client(client, settings, lake, store, max_ingest_rows=10) as c:
        error = assert_error(
            post(c, "products", body, content_type=content_type), 422, "invalid_rows"
        )
        assert error["message"] == "more than the 10 rows allowed in one batch"
        rows = "\n".join(json.dumps({**PRODUCTS[0], "id": f"p{i}"}) for i in range(10))
        r = post(c, "products", rows.encode(), content_type="application/x-ndjson")
        assert r.status_code == 201, r.text
    assert lake.count(ORG_A, "products") == 10


def test_a_parquet_upload_is_bounded_by_its_decoded_size(client, lake, settings, store):
    body = repeated_parquet(2000, "x" * 100_000)  # 5 KB stored, 200 MB decoded
    with limited_client(client, settings, lake, store, max_ingest_bytes=64 * 1024) as c:
        error = assert_error(
            post(c, "products", body, content_type="application/vnd.apache.parquet"),
            422,
            "invalid_rows",
        )
        assert "bytes decoded" in error["message"]
        r = post(c, "products", as_parquet(PRODUCTS), content_type="application/vnd.apache.parquet")
        assert r.status_code == 201, r.text
    assert lake.count(ORG_A, "products") == 2


def test_a_batch_nobody_waits_for_is_not_written(lake):
    from crow.data.ingest import IngestAbandoned, ingest

    with pytest.raises(IngestAbandoned):
        ingest(lake, ORG_A, "products", as_jsonl(PRODUCTS), "jsonl", wanted=lambda: False)
    assert lake.count(ORG_A, "products") == 0
    assert ingest(lake, ORG_A, "products", as_jsonl(PRODUCTS), "jsonl", wanted=lambda: True) == 2
