"""What a request's small DuckDB queries cost: a database opened per query against a cursor of
the process's shared one (crow.data.duck), side by side in one run.

The queries are the request path's: the interaction summary's GROUP BY, a popularity count
of 10 products and the Retriever's fetch of 10 rows by id, over the demo org's Parquet
files. The two ways alternate query by query.

    python -m benchmarks.bench_duck [--var var] [--rounds 40] [--out var/bench/duck.json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from benchmarks.bench_common import ORG, ROOT
from crow.data import duck
from crow.data.lake import DataLake

Opener = Callable[[], contextlib.AbstractContextManager[duckdb.DuckDBPyConnection]]


def _queries(lake: DataLake) -> dict[str, Callable[[duckdb.DuckDBPyConnection], object]]:
    interactions = lake.parquet_glob(ORG, "interactions")
    if interactions is None:
        raise SystemExit(f"no demo data under {lake.root}: run `make data` first")
    with duck.cursor() as con:
        sample = con.execute(
            "SELECT id, product_id FROM read_parquet(?) WHERE product_id IS NOT NULL LIMIT 10",
            [interactions],
        ).fetchall()
    ids, products = [row[0] for row in sample], [row[1] for row in sample]

    def summary(con: duckdb.DuckDBPyConnection) -> object:
        return con.execute(
            "SELECT channel, count(*), min(occurred_at), max(occurred_at) "
            "FROM read_parquet(?) WHERE channel = ? GROUP BY channel",
            [interactions, "web"],
        ).fetchall()

    def popularity(con: duckdb.DuckDBPyConnection) -> object:
        con.register("wanted", pa.table({"product_id": products}))
        return con.execute(
            "SELECT i.product_id, i.channel, count(*) FROM read_parquet(?) i "
            "JOIN wanted USING (product_id) GROUP BY 1, 2",
            [interactions],
        ).fetchall()

    def rows(con: duckdb.DuckDBPyConnection) -> object:
        con.register("wanted", pa.table({"id": ids}))
        return con.execute(
            "SELECT p.* FROM read_parquet(?) p JOIN wanted USING (id)", [interactions]
        ).fetchall()

    return {"summary": summary, "popularity": popularity, "rows_by_id": rows}


def bench_duck(var: Path, rounds: int = 40) -> dict[str, Any]:
    lake = DataLake(var / "data")
    ways: dict[str, Opener] = {"connect_per_query": duckdb.connect, "shared_cursor": duck.cursor}
    out: dict[str, Any] = {"org": ORG, "rounds": rounds, "queries": {}}
    for name, query in _queries(lake).items():
        times: dict[str, list[float]] = {way: [] for way in ways}
        for _ in range(rounds):
            for way, opener in ways.items():
                started = time.perf_counter()
                with opener() as con:
                    query(con)
                times[way].append((time.perf_counter() - started) * 1000)
        p50 = {way: round(statistics.median(ms), 2) for way, ms in times.items()}
        out["queries"][name] = {
            "p50_ms": p50,
            "ratio_connect_over_cursor": round(p50["connect_per_query"] / p50["shared_cursor"], 1),
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--var", type=Path, default=ROOT / "var")
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--out", type=Path, default=ROOT / "var" / "bench" / "duck.json")
    args = parser.parse_args()
    result = bench_duck(args.var, args.rounds)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
