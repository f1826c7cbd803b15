"""One in-memory DuckDB per process for reading the lake's Parquet files, a cursor per query.

Opening a DuckDB database is the expensive part of a small query: on 2 cores
``duckdb.connect()`` and ``close()`` take tens of milliseconds, while a cursor of an open
database and the same query over a 20,000-row Parquet file take about 3 ms
(``benchmarks/bench_duck.py`` measures both). A search, a summary or a popularity count
is one or two such queries, so they share this database instead of opening their own.

A cursor is a connection of its own to the shared database (DuckDB's rule for threads:
one cursor per thread), with its own registered Arrow tables and settings, and is closed
after the query. The database is made on first use and anew in a forked child; it runs
with ``TimeZone = UTC``, so timestamps come back as UTC whatever the machine's zone is.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import duckdb

_lock = threading.Lock()
_shared: tuple[int, duckdb.DuckDBPyConnection] | None = None


def _database() -> duckdb.DuckDBPyConnection:
    global _shared
    with _lock:
        if _shared is None or _shared[0] != os.getpid():
            con = duckdb.connect()
            con.execute("SET GLOBAL TimeZone = 'UTC'")
            _shared = (os.getpid(), con)
        return _shared[1]


@contextmanager
def cursor() -> Iterator[duckdb.DuckDBPyConnection]:
    """A cursor of the process's shared in-memory database, closed on exit."""
    cur = _database().cursor()
    try:
        yield cur
    finally:
        cur.close()
