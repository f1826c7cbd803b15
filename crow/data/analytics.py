"""DuckDB queries over an organization's Parquet data: counts, breakdowns, popularity.

Read-only and stateless: any process can run them while ingestion writes (a query sees the
dataset version that was current when it started).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime, timedelta
from typing import Any, Literal

import pyarrow as pa

from crow.data import duck
from crow.data.lake import DataLake
from crow.data.records import CHANNELS
from indexes.filters import title_pattern

DAILY_UP_TO_DAYS = 62  # a longer span is counted per week (a line of ≤ 62 points either way)
Unit = Literal["day", "week"]


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat().replace("+00:00", "Z")


def _where(
    channel: str | None,
    since: datetime | None,
    until: datetime | None,
    *,
    alias: str = "",
    also: tuple[str, ...] = (),
) -> tuple[str, list[Any]]:
    """A WHERE clause on interactions (columns of ``alias``, if given) and its parameters;
    ``also``: clauses to put first (their parameters, if any, go before the returned ones)."""
    col = f"{alias}." if alias else ""
    clauses: list[str] = list(also)
    params: list[Any] = []
    if channel:
        clauses.append(f"{col}channel = ?")
        params.append(channel)
    if since:
        clauses.append(f"{col}occurred_at >= ?")
        params.append(since)
    if until:
        clauses.append(f"{col}occurred_at < ?")
        params.append(until)
    return (" WHERE " + " AND ".join(clauses) if clauses else ""), params


def _filled(counts: dict[date, int], unit: Unit) -> list[list[Any]]:
    """[[ISO date, count], ...] from the first to the last day (or week) with a count, the
    days (or weeks) between without one as 0: a line over time has no holes."""
    step = timedelta(days=1 if unit == "day" else 7)
    day, end = min(counts), max(counts)
    points: list[list[Any]] = []
    while day <= end:
        points.append([day.isoformat(), counts.get(day, 0)])
        day += step
    return points


class Analytics:
    def __init__(self, lake: DataLake) -> None:
        self.lake = lake

    def interaction_summary(
        self,
        org_id: str,
        *,
        channel: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> dict[str, Any]:
        """Total, per-channel counts, the time span covered and the counts over that span
        (per day, or per week from Monday for a span over DAILY_UP_TO_DAYS; days and weeks
        without interactions count 0), under optional filters. Days are UTC days."""
        by_channel = dict.fromkeys(CHANNELS, 0)
        first = last = None
        series: dict[str, Any] = {"unit": "day", "points": []}
        glob = self.lake.parquet_glob(org_id, "interactions")
        if glob is not None:
            where, params = _where(channel, since, until)
            with duck.cursor() as con:
                con.execute("SET TimeZone = 'UTC'")
                rows = con.execute(
                    f"SELECT channel, count(*), min(occurred_at), max(occurred_at) "
                    f"FROM read_parquet(?){where} GROUP BY channel",
                    [glob, *params],
                ).fetchall()
                for ch, n, lo, hi in rows:
                    by_channel[ch] = n
                    first = lo if first is None or lo < first else first
                    last = hi if last is None or hi > last else last
                if first is not None and last is not None:
                    unit: Unit = "day" if last - first <= timedelta(DAILY_UP_TO_DAYS) else "week"
                    counts = con.execute(
                        f"SELECT date_trunc('{unit}', occurred_at)::DATE, count(*) "
                        f"FROM read_parquet(?){where} GROUP BY 1",
                        [glob, *params],
                    ).fetchall()
                    series = {"unit": unit, "points": _filled(dict(counts), unit)}
        return {
            "organization_id": org_id,
            "total": sum(by_channel.values()),
            "by_channel": by_channel,
            "first_at": _iso(first),
            "last_at": _iso(last),
            "series": series,
            "filters": {"channel": channel, "since": _iso(since), "until": _iso(until)},
        }

    def data_time_range(self, org_id: str) -> tuple[datetime | None, datetime | None]:
        """First and last interaction time: the clock that relative time words resolve against."""
        glob = self.lake.parquet_glob(org_id, "interactions")
        if glob is None:
            return None, None
        with duck.cursor() as con:
            row = con.execute(
                "SELECT min(occurred_at), max(occurred_at) FROM read_parquet(?)", [glob]
            ).fetchone()  # an aggregate: always one row
        lo, hi = row if row is not None else (None, None)
        return lo, hi

    def interaction_counts(
        self,
        org_id: str,
        product_ids: list[str],
        *,
        channel: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> dict[str, dict[str, int]]:
        """Per product: interactions in total and per channel, of one ``channel`` and in
        [``since``, ``until``) if given."""
        glob = self.lake.parquet_glob(org_id, "interactions")
        out = {pid: {"total": 0, **dict.fromkeys(CHANNELS, 0)} for pid in product_ids}
        if glob is None or not product_ids:
            return out
        where, params = _where(channel, since, until, alias="i")
        with duck.cursor() as con:
            con.register("wanted", pa.table({"product_id": product_ids}))
            rows = con.execute(
                "SELECT i.product_id, i.channel, count(*) FROM read_parquet(?) i "
                f"JOIN wanted USING (product_id){where} GROUP BY 1, 2",
                [glob, *params],
            ).fetchall()
        for pid, ch, n in rows:
            out[pid][ch] = n
            out[pid]["total"] += n
        return out

    def top_products(
        self,
        org_id: str,
        *,
        limit: int = 10,
        category: str | None = None,
        title_words: Sequence[str] = (),
        channel: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> list[tuple[str, int]]:
        """(product id, interactions) of the most interacted-with products, of one catalog
        ``category`` (case-insensitive) and with each of ``title_words`` in the title
        (indexes.filters.title_pattern) if given, counting the interactions of one
        ``channel`` and in [``since``, ``until``) if given."""
        glob = self.lake.parquet_glob(org_id, "interactions")
        if glob is None:
            return []
        if category is None and not title_words:
            where, params = _where(
                channel, since, until, alias="i", also=("i.product_id IS NOT NULL",)
            )
            sql = f"SELECT i.product_id, count(*) AS n FROM read_parquet(?) i{where} "
            params = [glob, *params]
        else:
            products = self.lake.parquet_glob(org_id, "products")
            if products is None:
                return []
            of_product = (
                [("lower(p.category) = lower(?)", category)] if category is not None else []
            )
            of_product += [
                ("regexp_matches(lower(p.title), ?)", title_pattern(w)) for w in title_words
            ]
            where, params = _where(
                channel, since, until, alias="i", also=tuple(c for c, _ in of_product)
            )
            sql = (
                "SELECT i.product_id, count(*) AS n FROM read_parquet(?) i "
                f"JOIN read_parquet(?) p ON p.id = i.product_id{where} "
            )
            params = [glob, products, *(v for _, v in of_product), *params]
        with duck.cursor() as con:
            return con.execute(
                f"{sql}GROUP BY 1 ORDER BY n DESC, i.product_id LIMIT ?", [*params, limit]
            ).fetchall()
