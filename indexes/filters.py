"""Metadata filters -> allowed index positions, computed with DuckDB over Parquet.

The index only knows ids; the Parquet rows of a collection know channel, type, category
and timestamps. ``allowed_positions`` selects the matching ids in DuckDB, joins them with
the index's id array (registered as an Arrow table of ``(id, pos)``) and returns the sorted
int64 positions that ``VectorIndex.search(..., allowed=...)`` takes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from datetime import UTC, datetime

import duckdb
import numpy as np
import pyarrow as pa


@dataclass(frozen=True)
class SearchFilter:
    """Optional metadata constraints; ``None`` fields do not constrain."""

    channel: str | None = None
    """interactions: ``web``, ``cctv`` or ``social``."""
    since: datetime | None = None
    """Inclusive lower bound on the collection's timestamp column."""
    until: datetime | None = None
    """Exclusive upper bound on the collection's timestamp column."""
    pattern_type: str | None = None
    """patterns: the pattern ``type`` (e.g. ``trend``)."""
    category: str | None = None
    """products: ``category``."""
    context_type: str | None = None
    """org_context documents: ``context_type`` (e.g. ``profile``)."""
    title_words: tuple[str, ...] | None = None
    """products and patterns: words the title has, each as a whole word, case aside, in the
    singular or plural (``("oat", "milk")``: "Oat Milk Value Size"; title_pattern)."""

    def is_empty(self) -> bool:
        return all(getattr(self, f.name) is None for f in fields(self))


@dataclass(frozen=True)
class _Columns:
    timestamp: str
    equality: dict[str, str]  # SearchFilter field -> column


COLLECTION_COLUMNS: dict[str, _Columns] = {
    "interactions": _Columns("occurred_at", {"channel": "channel"}),
    "patterns": _Columns("detected_at", {"pattern_type": "type"}),
    "products": _Columns("", {"category": "category"}),
    "org_context": _Columns("updated_at", {"context_type": "context_type"}),
}


def title_pattern(word: str) -> str:
    """A regular expression (RE2, over a lowercase title) for ``word`` as a whole word, in the
    singular or plural, also as a plural's stem ("berrie" for "berries"): "milk" matches
    "milk" and "milks"; "berry" and "berrie" match "berry" and "berries"; "veggie" matches
    "veggie" and "veggies"; "boxe" matches "box" and "boxes"; "toy" matches "toys"."""
    word = word.lower()
    if len(word) > 3 and word.endswith("ie"):  # berrie, veggie, cookie
        root, ends = word[:-2], "y|ie|ies"
    elif len(word) > 2 and word.endswith("y") and word[-2] not in "aeiou":  # berry
        root, ends = word[:-1], "y|ies"
    elif len(word) > 3 and word.endswith("e"):  # boxe (boxes), cake
        root, ends = word[:-1], "e|es|s|"
    else:
        root, ends = word, "s|es|"
    return rf"\b{re.escape(root)}({ends})\b"


def _utc_naive(value: datetime) -> datetime:
    return value.astimezone(UTC).replace(tzinfo=None) if value.tzinfo else value


def build_where(collection: str, flt: SearchFilter) -> tuple[str, list[object]]:
    """SQL predicate over alias ``p`` and its parameters; ``ValueError`` on a filter the
    collection does not have."""
    try:
        cols = COLLECTION_COLUMNS[collection]
    except KeyError:
        raise ValueError(f"no filters for collection {collection!r}") from None
    clauses: list[str] = []
    params: list[object] = []
    for field_name in ("channel", "pattern_type", "category", "context_type"):
        value = getattr(flt, field_name)
        if value is None:
            continue
        column = cols.equality.get(field_name)
        if column is None:
            raise ValueError(f"filter {field_name!r} does not apply to {collection}")
        clauses.append(f'p."{column}" = ?')
        params.append(value)
    if flt.title_words:
        if collection not in ("products", "patterns"):
            raise ValueError(f"filter 'title_words' does not apply to {collection}")
        clauses.extend('regexp_matches(lower(p."title"), ?)' for _ in flt.title_words)
        params.extend(title_pattern(w) for w in flt.title_words)
    for bound, op in (("since", ">="), ("until", "<")):
        value = getattr(flt, bound)
        if value is None:
            continue
        if not cols.timestamp:
            raise ValueError(f"filter {bound!r} does not apply to {collection}")
        # Compare in UTC: TIMESTAMPTZ columns are cast with TimeZone=UTC (set below).
        clauses.append(f'CAST(p."{cols.timestamp}" AS TIMESTAMP) {op} ?')
        params.append(_utc_naive(value))
    return " AND ".join(clauses) or "TRUE", params


def ids_table(ids: np.ndarray) -> pa.Table:
    """The ``(id, pos)`` Arrow table for an index's id array (cache it per index)."""
    return pa.table({"id": pa.array(np.asarray(ids, dtype=np.str_)), "pos": np.arange(len(ids))})


def allowed_positions(
    parquet_glob: str,
    ids: np.ndarray | pa.Table,
    collection: str,
    flt: SearchFilter,
    *,
    con: duckdb.DuckDBPyConnection | None = None,
) -> np.ndarray | None:
    """Sorted int64 positions of index rows whose Parquet row matches ``flt``.

    ``ids`` is ``VectorIndex.ids`` (or ``ids_table`` of it). Returns ``None`` for an empty
    filter (no restriction); ids missing from the Parquet data never match.
    """
    if flt.is_empty():
        return None
    where, params = build_where(collection, flt)
    table = ids if isinstance(ids, pa.Table) else ids_table(ids)
    own = con is None
    conn = duckdb.connect() if con is None else con
    try:
        conn.execute("SET TimeZone = 'UTC'")
        conn.register("crow_index_ids", table)
        sql = (
            "SELECT DISTINCT i.pos FROM crow_index_ids i "
            "JOIN read_parquet(?) p ON CAST(p.id AS VARCHAR) = i.id "
            f"WHERE {where} ORDER BY i.pos"
        )
        positions = conn.execute(sql, [parquet_glob, *params]).fetchnumpy()["pos"]
        conn.unregister("crow_index_ids")
    finally:
        if own:
            conn.close()
    return np.asarray(positions, dtype=np.int64)
