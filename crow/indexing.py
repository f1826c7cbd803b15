"""What gets embedded for each searchable collection, and a single-process index build.

Index collections are products, interactions, patterns and org_context; org_context is built
from the ``documents`` dataset. The reindex Ray Job does the same work spread over an
embedding actor pool; :func:`build_index` is the plain loop (tests, small collections, and the
baseline that the reindex benchmark compares against).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from crow.datalake import DataLake
from indexes.store import IndexMeta, IndexNotFoundError, IndexStore
from indexes.vector_index import IndexParams, VectorIndex

INDEX_COLLECTIONS: tuple[str, ...] = ("products", "interactions", "patterns", "org_context")
DATASET_OF: dict[str, str] = {
    "products": "products",
    "interactions": "interactions",
    "patterns": "patterns",
    "org_context": "documents",
}
TEXT_COLUMNS: dict[str, tuple[str, ...]] = {
    "products": ("title", "category", "description"),
    "interactions": ("channel", "text"),
    "patterns": ("type", "title", "description"),
    "org_context": ("title", "context_type", "body"),
}
MAX_TEXT_CHARS = 2000  # beyond this the small embedder truncates anyway


def texts_for(collection: str, columns: dict[str, Sequence[Any]]) -> list[str]:
    """One embedding text per row, from a column-oriented batch."""
    parts = [columns[name] for name in TEXT_COLUMNS[collection]]
    return [
        ". ".join(str(v) for v in values if v)[:MAX_TEXT_CHARS]
        for values in zip(*parts, strict=True)
    ]


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
) -> IndexMeta:
    """Embed every row of the collection in one process, then write and publish a version."""
    table = lake.read_table(org_id, DATASET_OF[collection])
    total = table.num_rows
    ids = table["id"].to_pylist()
    chunks = []
    for start in range(0, total, batch_size):
        batch = table.slice(start, batch_size).to_pydict()
        chunks.append(embed(texts_for(collection, batch)))
        if on_progress:
            on_progress(min(start + batch_size, total), total)
    vectors = np.concatenate(chunks) if chunks else None
    dim = None if chunks else int(embed(["dimension probe"]).shape[1])
    return publish_index(
        store, org_id, collection, ids, vectors, model=model, dim=dim, params=params
    )


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
    if vectors is None or len(ids) == 0:
        if dim is None:
            raise ValueError("an empty index needs its dimension")
        index = VectorIndex.empty(dim, params=params)
    else:
        index = VectorIndex.build(ids, vectors, params=params)
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
    """A new version = the current one plus these rows (replacing same ids), minus `remove`."""
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
