"""Semantic search over an organization's indexes, with filters and the rows' fields.

Takes query vectors (the caller embeds once per request), keeps the current index version of
each (org, collection) in memory, and switches to a new version when the index store's
CURRENT pointer moves: the new version is loaded in the background while searches keep
using the old one, then swapped in with one assignment.
"""

from __future__ import annotations

import logging
import math
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from crow.data import duck
from crow.data.analytics import Analytics
from crow.data.lake import DataLake
from crow.retrieval.index_build import DATASET_OF
from crow.retrieval.sort_order import PRICE_ORDER, SortOrder
from indexes.filters import (
    COLLECTION_COLUMNS,
    SearchFilter,
    allowed_positions,
    build_where,
    ids_table,
)
from indexes.store import COLLECTIONS, IndexNotFoundError, IndexStore
from indexes.vector_index import IndexParams, VectorIndex

log = logging.getLogger(__name__)
POPULARITY_POOL = 100  # relevance candidates re-ranked by popularity (or price)
RELEVANCE_FLOOR = 0.75  # ... those scoring at least this share of the best match


@dataclass
class _Loaded:
    version: str
    index: VectorIndex
    ids: pa.Table


class SearchService:
    def __init__(
        self,
        lake: DataLake,
        store: IndexStore,
        *,
        params: IndexParams | None = None,
    ) -> None:
        self.lake = lake
        self.store = store
        self.params = params
        self.analytics = Analytics(lake)
        self._loaded: dict[tuple[str, str], _Loaded] = {}
        self._loading: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    # --- index versions ------------------------------------------------------------
    def _load(self, key: tuple[str, str], version: str) -> _Loaded:
        index = self.store.load(*key, version, params=self.params)
        loaded = _Loaded(version, index, ids_table(index.ids))
        with self._lock:
            current = self._loaded.get(key)
            if current is None or current.version != version:
                self._loaded[key] = loaded
            self._loading.discard(key)
        log.info("serving %s/%s index %s (%d rows)", *key, version, index.count)
        return loaded

    def _load_in_background(self, key: tuple[str, str], version: str) -> None:
        def run() -> None:
            try:
                self._load(key, version)
            except Exception:
                log.exception("loading %s/%s %s failed; keeping the old version", *key, version)
                with self._lock:
                    self._loading.discard(key)

        threading.Thread(target=run, name=f"load-{key[0]}-{key[1]}", daemon=True).start()

    def index(self, org_id: str, collection: str) -> _Loaded:
        """The loaded index to search now; starts loading a newer published version."""
        key = (org_id, collection)
        version = self.store.current(org_id, collection)
        with self._lock:
            loaded = self._loaded.get(key)
            stale = loaded is not None and version is not None and loaded.version != version
            if stale and version is not None and key not in self._loading:
                self._loading.add(key)
                self._load_in_background(key, version)
        if loaded is not None:
            return loaded
        if version is None:
            raise IndexNotFoundError(f"{org_id} has no {collection} index yet; run a reindex")
        return self._load(key, version)

    def refresh(self) -> dict[str, str]:
        """Load every newer published version now (a reindex calls this); returns versions."""
        out = {}
        for key in list(self._loaded):
            version = self.store.current(*key)
            if version and self._loaded[key].version != version:
                self._load(key, version)
            out["/".join(key)] = self._loaded[key].version
        return out

    def readiness(self, org_id: str) -> dict[str, str | None]:
        """The published version of each of the org's collections, None where none is yet."""
        return {c: self.store.current(org_id, c) for c in COLLECTIONS}

    def versions(self) -> dict[str, str]:
        return {"/".join(k): v.version for k, v in self._loaded.items()}

    # --- search --------------------------------------------------------------------
    def search(
        self,
        org_id: str,
        collection: str,
        vector: np.ndarray | None,
        *,
        k: int = 10,
        flt: SearchFilter | None = None,
        sort: SortOrder = "relevance",
        counted: SearchFilter | None = None,
    ) -> list[dict[str, Any]]:
        """Hits best first: id, score and the row's fields (products: interaction counts).

        ``vector`` None ranks the whole catalog by popularity or price (products) or lists
        the newest rows (interactions, patterns, documents): "what were people saying on
        social in the past two weeks?" has no topic, and a 1.5B searched it with an empty
        query. ``sort`` other than relevance (products): the most relevant re-ranked by
        interactions ("popularity") or by price ("cheapest", "priciest").
        ``counted`` (products): the interactions a product's counts and popularity count,
        those of one channel and time range ("most talked about on social last month").
        """
        counted = counted or SearchFilter()
        flt = flt or SearchFilter()
        dataset = DATASET_OF[collection]
        glob = self.lake.parquet_glob(org_id, dataset)
        if glob is None:
            return []
        if vector is None:
            if collection != "products":
                column = COLLECTION_COLUMNS[collection].timestamp
                return self._ordered(glob, collection, k, flt, f'p."{column}" DESC')
            if sort in PRICE_ORDER:
                priced = self._ordered(glob, collection, k, flt, _by_price(sort))
                return self._with_popularity(org_id, priced, counted)
            return self._products_by_popularity(org_id, glob, k, flt, counted)
        loaded = self.index(org_id, collection)
        with duck.cursor() as con:
            allowed = allowed_positions(glob, loaded.ids, collection, flt, con=con)
        want = max(k, POPULARITY_POOL) if sort != "relevance" else k
        hits = loaded.index.search(vector, want, allowed=allowed)[0]
        scores = {h.id: h.score for h in hits}
        rows = self._rows(glob, list(scores))
        out = [{**rows[i], "score": round(float(scores[i]), 4)} for i in scores if i in rows]
        if collection == "products":
            out = self._with_popularity(org_id, out, counted)
            if sort != "relevance" and out:
                # Popular (cheap) among the relevant: "top tents" must not surface a jacket.
                floor = out[0]["score"] * RELEVANCE_FLOOR
                out = [r for r in out if r["score"] >= floor]
                out.sort(key=lambda r: (_rank(r, sort), -r["score"]))
        return out[:k]

    def _ordered(
        self, glob: str, collection: str, k: int, flt: SearchFilter, order: str
    ) -> list[dict[str, Any]]:
        """The first `k` rows the filters keep, in `order` (SQL over alias ``p``)."""
        where, params = build_where(collection, flt)
        with duck.cursor() as con:
            cur = con.execute(
                f"SELECT p.* FROM read_parquet(?) p WHERE {where} ORDER BY {order}, p.id LIMIT ?",
                [glob, *params, k],
            )
            rows = _fetched(cur)
        return [{**r, "score": None} for r in rows]

    def _rows(self, glob: str, ids: list[str]) -> dict[str, dict[str, Any]]:
        if not ids:
            return {}
        with duck.cursor() as con:
            con.register("wanted", pa.table({"id": ids}))
            cur = con.execute("SELECT p.* FROM read_parquet(?) p JOIN wanted USING (id)", [glob])
            rows = _fetched(cur)
        return {r["id"]: r for r in rows}

    def _with_popularity(
        self, org_id: str, rows: list[dict[str, Any]], counted: SearchFilter
    ) -> list[dict[str, Any]]:
        counts = self.analytics.interaction_counts(
            org_id, [r["id"] for r in rows], **_scope(counted)
        )
        return [{**r, "interactions": counts[r["id"]]} for r in rows]

    def _products_by_popularity(
        self, org_id: str, glob: str, k: int, flt: SearchFilter, counted: SearchFilter
    ) -> list[dict[str, Any]]:
        top = self.analytics.top_products(
            org_id,
            limit=k,
            category=flt.category,
            title_words=flt.title_words or (),
            **_scope(counted),
        )
        rows = self._rows(glob, [pid for pid, _ in top])
        ranked = [rows[pid] for pid, _ in top if pid in rows]
        return [{**r, "score": None} for r in self._with_popularity(org_id, ranked, counted)]

    def product_categories(self, org_id: str) -> list[str]:
        """The catalog's categories (the products' ``category`` values), sorted."""
        glob = self.lake.parquet_glob(org_id, "products")
        if glob is None:
            return []
        with duck.cursor() as con:
            rows = con.execute(
                "SELECT DISTINCT category FROM read_parquet(?) WHERE category IS NOT NULL "
                "ORDER BY 1",
                [glob],
            ).fetchall()
        return [r[0] for r in rows]


def _by_price(sort: str) -> str:
    return f"p.price {PRICE_ORDER[sort]} NULLS LAST"


def _rank(row: dict[str, Any], sort: SortOrder) -> float:
    """A product's place in a ranking, lowest first."""
    if sort == "popularity":
        return -float(row["interactions"]["total"])
    price = row.get("price")
    if price is None:  # unpriced last, whichever way
        return math.inf
    return float(price) if sort == "cheapest" else -float(price)


def _scope(counted: SearchFilter) -> dict[str, Any]:
    """The analytics' keywords for the interactions ``counted`` keeps."""
    return {"channel": counted.channel, "since": counted.since, "until": counted.until}


def _fetched(cur: Any) -> list[dict[str, Any]]:
    """A cursor's rows as dicts by column name, timestamps as ISO strings (UTC as ``Z``)."""
    names = [d[0] for d in cur.description]
    return [
        {name: _jsonable(value) for name, value in zip(names, row, strict=True)}
        for row in cur.fetchall()
    ]


def _jsonable(value: Any) -> Any:
    if hasattr(value, "isoformat"):
        return value.isoformat().replace("+00:00", "Z")
    return value
