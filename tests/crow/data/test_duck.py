"""The process's shared DuckDB: a cursor per query, each with its own registered tables."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

import pyarrow as pa

from crow.data import duck


def test_concurrent_cursors_keep_their_registered_tables_apart() -> None:
    """Queries of many threads at once register the same name (``wanted``) with their own
    rows; each sees only its own."""
    start = threading.Barrier(8)
    seen: dict[int, list[int]] = {}

    def query(n: int) -> None:
        start.wait()
        for _ in range(20):
            with duck.cursor() as con:
                con.register("wanted", pa.table({"x": list(range(n))}))
                rows = con.execute("SELECT x FROM wanted ORDER BY x").fetchall()
            seen[n] = [r[0] for r in rows]

    threads = [threading.Thread(target=query, args=(n,)) for n in range(1, 9)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert seen == {n: list(range(n)) for n in range(1, 9)}


def test_timestamps_come_back_in_utc() -> None:
    with duck.cursor() as con:
        (value,) = con.execute("SELECT TIMESTAMPTZ '2026-11-30 23:30:00+02'").fetchone() or ()
    assert value == datetime(2026, 11, 30, 21, 30, tzinfo=UTC)
    assert value.utcoffset().total_seconds() == 0
