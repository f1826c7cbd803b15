"""What gets embedded for each searchable collection, and how index versions are published.

Index collections are products, interactions, patterns and org_context; org_context is built
from the ``documents`` dataset. The reindex Ray Job does the same work spread over an
embedding actor pool; :func:`build_index` is the plain loop (tests, small collections, and the
baseline that the reindex benchmark compares against). Both publish through
:func:`publish_full_build`.

Concurrent writers of one (org, collection) never lose each other's rows:

* :func:`add_to_index` (``/qna/index``, incremental reindexes) reads the current version,
  adds, writes and publishes while holding ``IndexStore.lock`` for that collection; the
  IndexControl also holds it across the Parquet upsert, so data and index change in one order.
* A full build embeds a snapshot of the data without the lock (minutes), then catches up:
  rows written since (new ids, or rows whose embedded text changed) are embedded and rows
  deleted since dropped, once without the lock and once more under it, and the version is
  published under the lock (staged under it too: no other writer's prune mistakes the
  staging directory for an abandoned one). So a reindex that finishes after a ``/qna/index`` add keeps that
  document, and an add that comes after the final catch-up waits for the publish and then
  adds to the new version.
* A full org_context build from a knowledge source replaces only the source's documents
  (``origin`` ``source:<kind>``; before the field existed, ``kb-`` ids without an origin):
  documents from ``/qna/index`` (``api``) or ingestion (``ingest``) stay. On a source id
  that clashes with another document, the source's version wins. Under the lock, the new
  index version is written to staging, then the Parquet dataset is switched, then the
  version published. An error before the switch changes nothing; an error in the publish
  puts the previous documents back. A process killed between the two leaves the new
  documents with the old index, whose stale rows search drops (hits are joined to the
  data), until the next reindex.
"""

from __future__ import annotations

import glob as globmod
import hashlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from crow.data.lake import DataLake
from crow.data.records import get_collection
from crow.retrieval.embed_text import TEXT_COLUMNS, EmbedRows, embed_rows_with, texts_for
from crow.settings import SearchSettings
from indexes.store import COLLECTIONS, IndexMeta, IndexNotFoundError, IndexStore, fault_point
from indexes.vector_index import IndexParams, VectorIndex

log = logging.getLogger(__name__)

INDEX_COLLECTIONS: tuple[str, ...] = COLLECTIONS
DATASET_OF: dict[str, str] = {
    "products": "products",
    "interactions": "interactions",
    "patterns": "patterns",
    "org_context": "documents",
}


def index_params(search: SearchSettings) -> IndexParams:
    """The FAISS parameters every index is built and searched with (search.* settings)."""
    return IndexParams(exact_threshold=search.exact_threshold, nprobe=search.nprobe)


SOURCE_ORIGIN_PREFIX = "source:"
LEGACY_SOURCE_ID_PREFIX = "kb-"  # knowledge-source ids written before documents had an origin


@dataclass(frozen=True)
class Snapshot:
    """The rows of a dataset as read at one moment; ``fingerprint`` names exactly the Parquet
    files read (a version directory and its parts), so an unchanged fingerprint means the
    data has not changed since."""

    fingerprint: tuple[str, ...]
    table: pa.Table


def read_snapshot(lake: DataLake, org_id: str, dataset: str) -> Snapshot:
    schema = get_collection(dataset).schema_
    for _ in range(5):
        glob = lake.parquet_glob(org_id, dataset)
        paths = tuple(sorted(globmod.glob(glob))) if glob else ()
        if not paths:
            return Snapshot((), schema.empty_table())
        try:
            return Snapshot(paths, pq.read_table(list(paths), schema=schema))
        except FileNotFoundError:  # a version pruned between the listing and the read
            continue
    return Snapshot((), lake.read_table(org_id, dataset))


def is_source_row(origin: str | None, doc_id: str) -> bool:
    """Whether a documents row belongs to the organization's knowledge source."""
    if origin is None:
        return doc_id.startswith(LEGACY_SOURCE_ID_PREFIX)
    return origin.startswith(SOURCE_ORIGIN_PREFIX)


def merge_source(current: pa.Table, source: pa.Table) -> pa.Table:
    """The documents after a source reindex: every row of `current` that is not the
    source's (and not replaced by a source row of the same id), then the source's rows."""
    ids = cast(list[str], current["id"].to_pylist())  # a required column: no nulls
    origins = cast(list[str | None], current["origin"].to_pylist())
    source_ids = set(source["id"].to_pylist())
    keep = [
        not is_source_row(origin, doc_id) and doc_id not in source_ids
        for doc_id, origin in zip(ids, origins, strict=True)
    ]
    kept = current.filter(pa.array(keep, pa.bool_())) if current.num_rows else current
    return pa.concat_tables([kept, source.cast(current.schema)])


def source_table(records: list[dict[str, Any]]) -> pa.Table:
    """Validated documents records (crow.data.ingest.validate_rows) as a documents table."""
    schema = get_collection("documents").schema_
    return pa.Table.from_pylist(records, schema=schema)


def _digests(collection: str, table: pa.Table) -> list[bytes]:
    columns = table.select(list(TEXT_COLUMNS[collection])).to_pydict()
    return [
        hashlib.blake2b(text.encode(), digest_size=16).digest()
        for text in texts_for(collection, columns)
    ]


@dataclass
class _Built:
    """Rows and their vectors (aligned), and the fingerprint of the data they came from."""

    fingerprint: tuple[str, ...]
    table: pa.Table
    vectors: np.ndarray | None
    digests: list[bytes] | None = None


def _catch_up(collection: str, built: _Built, target: Snapshot, embed_rows: EmbedRows) -> _Built:
    """`target`'s rows with vectors: reused from `built` where the embedded text is the
    same, embedded where the row is new or changed; rows `target` lacks are dropped."""
    if built.digests is None:
        built.digests = _digests(collection, built.table)
    have = {
        i: (d, pos)
        for pos, (i, d) in enumerate(zip(built.table["id"].to_pylist(), built.digests, strict=True))
    }
    digests = _digests(collection, target.table)
    ids = target.table["id"].to_pylist()
    reuse, todo = [], []
    for pos, (doc_id, digest) in enumerate(zip(ids, digests, strict=True)):
        old = have.get(doc_id)
        if old is not None and old[0] == digest:
            reuse.append((pos, old[1]))
        else:
            todo.append(pos)
    if todo:
        log.info("%s: %d rows written during the build are embedded now", collection, len(todo))
    fresh = embed_rows(target.table.take(todo)) if todo else None
    dim = (
        built.vectors.shape[1]
        if built.vectors is not None and len(built.vectors)
        else (fresh.shape[1] if fresh is not None else None)
    )
    if dim is None:
        return _Built(target.fingerprint, target.table, None, digests)
    vectors = np.empty((len(ids), dim), dtype=np.float32)
    if reuse:
        if built.vectors is None:  # reused rows were embedded: `built` has their vectors
            raise TypeError("rows to reuse but the build has no vectors")
        dst, src = zip(*reuse, strict=True)
        vectors[list(dst)] = built.vectors[list(src)]
    if todo:
        vectors[todo] = fresh
    return _Built(target.fingerprint, target.table, vectors, digests)


def _fingerprint(lake: DataLake, org_id: str, dataset: str) -> tuple[str, ...]:
    glob = lake.parquet_glob(org_id, dataset)
    return tuple(sorted(globmod.glob(glob))) if glob else ()


def _target(lake: DataLake, org_id: str, dataset: str, source: pa.Table | None) -> Snapshot:
    """What the index must hold now: the data, or for a source swap the merged documents."""
    now = read_snapshot(lake, org_id, dataset)
    if source is None:
        return now
    return Snapshot(now.fingerprint, merge_source(now.table, source))


def _index_of(
    built: _Built, dim: int | Callable[[], int] | None, params: IndexParams | None
) -> VectorIndex:
    ids = cast(list[str], built.table["id"].to_pylist())  # a required column: no nulls
    if built.vectors is None or not ids:
        size = dim() if callable(dim) else dim
        if size is None:
            raise ValueError("an empty index needs its dimension")
        return VectorIndex.empty(size, params=params)
    return VectorIndex.build(ids, built.vectors, params=params)


def build_index(
    lake: DataLake,
    store: IndexStore,
    embed: Callable[[list[str]], np.ndarray],
    org_id: str,
    collection: str,
    *,
    model: str,
    batch_size: int = 256,
    params: IndexParams | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    source_records: list[dict[str, Any]] | None = None,
    extra: dict[str, Any] | None = None,
) -> IndexMeta:
    """Embed every row of the collection in this process, then publish a version.

    `source_records` (org_context only): the knowledge source's documents, which replace
    the source's documents in the data (see the module docstring)."""
    dataset = DATASET_OF[collection]
    source = source_table(source_records) if source_records is not None else None
    if source is not None and dataset != "documents":
        raise ValueError("a knowledge source only feeds org_context")
    target = _target(lake, org_id, dataset, source)
    rows = embed_rows_with(embed, collection, batch_size=batch_size, on_progress=on_progress)
    vectors = rows(target.table) if target.table.num_rows else None
    return publish_full_build(
        lake,
        store,
        org_id,
        collection,
        target.fingerprint,
        target.table,
        vectors,
        embed_rows_with(embed, collection, batch_size=batch_size),
        model=model,
        dim=lambda: int(embed(["dimension probe"]).shape[1]),
        params=params,
        source=source,
        extra=extra,
    )


def publish_full_build(
    lake: DataLake,
    store: IndexStore,
    org_id: str,
    collection: str,
    fingerprint: tuple[str, ...],
    table: pa.Table,
    vectors: np.ndarray | None,
    embed_rows: EmbedRows,
    *,
    model: str,
    dim: int | Callable[[], int] | None = None,
    params: IndexParams | None = None,
    source: pa.Table | None = None,
    extra: dict[str, Any] | None = None,
) -> IndexMeta:
    """Publish a full build: `table` (read from the data files named by `fingerprint`, or
    merged with `source`) and its `vectors`, brought up to date with rows written since.

    `embed_rows` embeds rows that changed meanwhile (the last, usually empty, batch of them
    under the collection's lock). With `source` (org_context), the documents dataset is
    switched to the merged rows under the same lock, right before the publish."""
    dataset = DATASET_OF[collection]
    built = _Built(fingerprint, table, vectors)
    for _ in range(3):  # written while we embedded: catch up without the lock
        if _fingerprint(lake, org_id, dataset) == built.fingerprint:
            break
        built = _catch_up(collection, built, _target(lake, org_id, dataset, source), embed_rows)

    index = _index_of(built, dim, params)  # the slow part (IVF training) without the lock
    with store.lock(org_id, collection):
        if _fingerprint(lake, org_id, dataset) != built.fingerprint:  # the last few rows
            built = _catch_up(collection, built, _target(lake, org_id, dataset, source), embed_rows)
            index = _index_of(built, dim, params)
        # Staged under the lock: no other writer's prune takes it for an abandoned one.
        staging = store.new_version(org_id, collection)
        meta = store.write(
            staging, index, model=model, source_rows=built.table.num_rows, extra=extra
        )
        if source is None:
            store.publish(org_id, collection, meta.version)
            return meta
        previous = lake.read_table(org_id, dataset)
        lake.write(org_id, dataset, [built.table.to_pylist()], mode="replace")
        fault_point("build:data-switched")
        try:
            store.publish(org_id, collection, meta.version)
        except BaseException:
            log.exception("publish failed after the documents switched: putting them back")
            lake.write(org_id, dataset, [previous.to_pylist()], mode="replace")
            raise
        return meta


def publish_index(
    store: IndexStore,
    org_id: str,
    collection: str,
    ids: list[str],
    vectors: np.ndarray | None,
    *,
    model: str,
    dim: int | None = None,
    params: IndexParams | None = None,
    extra: dict[str, Any] | None = None,
) -> IndexMeta:
    """Publish exactly these rows as the new version (no catch-up with the data: for
    callers that own the collection, e.g. benchmarks)."""
    if vectors is None or len(ids) == 0:
        if dim is None:
            raise ValueError("an empty index needs its dimension")
        index = VectorIndex.empty(dim, params=params)
    else:
        index = VectorIndex.build(ids, vectors, params=params)
    with store.lock(org_id, collection):
        staging = store.new_version(org_id, collection)
        meta = store.write(staging, index, model=model, source_rows=len(ids), extra=extra)
        store.publish(org_id, collection, meta.version)
    return meta


def add_to_index(
    store: IndexStore,
    org_id: str,
    collection: str,
    ids: list[str],
    vectors: np.ndarray,
    *,
    model: str,
    remove: list[str] | None = None,
    params: IndexParams | None = None,
) -> IndexMeta:
    """A new version = the current one plus these rows (replacing same ids), minus `remove`.

    Holds the collection's lock from reading the current version to publishing the new
    one, so concurrent adds (threads or processes) each build on the other's version."""
    with store.lock(org_id, collection):
        try:
            index = store.load(org_id, collection, params=params)
        except IndexNotFoundError:
            index = VectorIndex.empty(int(vectors.shape[1]), params=params)
        for doc_id in remove or []:
            index.remove(doc_id)
        if len(ids):
            index.add(ids, vectors)
        staging = store.new_version(org_id, collection)
        meta = store.write(staging, index, model=model, source_rows=index.count)
        store.publish(org_id, collection, meta.version)
        return meta
