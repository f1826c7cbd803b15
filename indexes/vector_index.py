"""``VectorIndex``: FAISS inner-product search over normalized vectors with string ids.

Row ``i`` of the index (its *position*, the FAISS int64 label) has id ``ids[i]``. Rows are
never moved: re-adding an existing id tombstones the old row (its id becomes ``""``) and
appends the new one, so positions stay valid for metadata filters built earlier.

Small collections use exact search (``IndexFlatIP``); from ``exact_threshold`` rows up
the index is IVF-flat (``nlist`` ~ ``lists_per_sqrt_n * sqrt(N)``, searched with
``nprobe`` lists). Metadata filters arrive as allowed positions and are applied inside the
search (an ``IDSelectorBitmap``), so a filtered search returns ``k`` hits whenever ``k``
rows match; small allowed sets are scored exactly with numpy instead.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import faiss
import numpy as np

IndexKind = Literal["flat", "ivf"]
INDEX_FILE = "index.faiss"
IDS_FILE = "ids.npy"


@dataclass(frozen=True)
class IndexParams:
    """How an index is built and searched (defaults measured in benchmarks/recall_1m.py)."""

    exact_threshold: int = 50_000
    """Collections with fewer rows than this get an exact ``IndexFlatIP``."""
    lists_per_sqrt_n: float = 2.0
    """IVF ``nlist = lists_per_sqrt_n * sqrt(N)``."""
    nprobe: int = 32
    """IVF lists scanned per unfiltered query."""
    train_points_per_list: int = 50
    """IVF k-means trains on at most ``nlist * train_points_per_list`` sampled rows."""
    small_filter_rows: int = 4096
    """Filtered searches allowing at most this many rows are scored exactly with numpy."""
    seed: int = 1234


@dataclass(frozen=True)
class Hit:
    id: str
    score: float
    position: int


def as_matrix(vectors: np.ndarray, dim: int | None = None) -> np.ndarray:
    """Return ``vectors`` as a C-contiguous float32 ``(n, dim)`` matrix (1-D -> one row)."""
    out = np.ascontiguousarray(vectors, dtype=np.float32)
    if out.ndim == 1:
        out = out[None, :]
    if out.ndim != 2 or (dim is not None and out.shape[1] != dim):
        want = f"(n, {dim})" if dim is not None else "(n, dim)"
        raise ValueError(f"expected vectors of shape {want}, got {out.shape}")
    return out


def _ids_array(ids: Sequence[str] | np.ndarray) -> np.ndarray:
    arr = np.asarray(ids, dtype=np.str_)
    if arr.ndim != 1:
        raise ValueError("ids must be one-dimensional")
    if (arr == "").any():
        raise ValueError("ids must be non-empty strings")
    if len(np.unique(arr)) != len(arr):
        raise ValueError("ids must be unique")
    return arr


def _build_faiss(vectors: np.ndarray, params: IndexParams) -> faiss.Index:
    n, dim = vectors.shape
    if n < params.exact_threshold:
        flat = faiss.IndexFlatIP(dim)
        flat.add(vectors)
        return flat
    nlist = max(1, round(params.lists_per_sqrt_n * math.sqrt(n)))
    quantizer = faiss.IndexFlatIP(dim)
    index = faiss.IndexIVFFlat(quantizer, dim, nlist, faiss.METRIC_INNER_PRODUCT)
    index.cp.seed = params.seed
    index.cp.max_points_per_centroid = params.train_points_per_list
    n_train = min(n, nlist * params.train_points_per_list)
    sample = np.random.default_rng(params.seed).choice(n, size=n_train, replace=False)
    index.train(vectors[np.sort(sample)])
    index.add(vectors)
    index.make_direct_map()
    return index


class VectorIndex:
    """A FAISS index plus the string id of every row. Thread-safe (one lock)."""

    def __init__(
        self, index: faiss.Index, ids: np.ndarray, *, params: IndexParams | None = None
    ) -> None:
        if index.ntotal != len(ids):
            raise ValueError(f"index has {index.ntotal} rows but {len(ids)} ids")
        # faiss's stubs lack DirectMap (swigfaiss has it).
        no_map = faiss.DirectMap.NoMap  # type: ignore[attr-defined]
        if isinstance(index, faiss.IndexIVF) and index.direct_map.type == no_map:
            index.make_direct_map()
        self._index = index
        self._ids = np.asarray(ids, dtype=np.str_)
        self._params = params or IndexParams()
        self._lock = threading.RLock()
        self._positions = {str(i): p for p, i in enumerate(self._ids) if i}
        self._live_bitmap: np.ndarray | None = None

    # -- construction -------------------------------------------------------------------
    @classmethod
    def build(
        cls,
        ids: Sequence[str] | np.ndarray,
        vectors: np.ndarray,
        *,
        params: IndexParams | None = None,
    ) -> VectorIndex:
        """Build an exact or IVF index (by row count) over normalized ``vectors``."""
        params = params or IndexParams()
        id_arr = _ids_array(ids)
        mat = as_matrix(vectors)
        if len(id_arr) != len(mat):
            raise ValueError(f"{len(id_arr)} ids for {len(mat)} vectors")
        return cls(_build_faiss(mat, params), id_arr, params=params)

    @classmethod
    def empty(cls, dim: int, *, params: IndexParams | None = None) -> VectorIndex:
        return cls(faiss.IndexFlatIP(dim), np.zeros(0, dtype=np.str_), params=params)

    # -- properties ---------------------------------------------------------------------
    @property
    def dim(self) -> int:
        return int(self._index.d)

    @property
    def kind(self) -> IndexKind:
        return "ivf" if isinstance(self._index, faiss.IndexIVF) else "flat"

    @property
    def ids(self) -> np.ndarray:
        """Id of each position (``""`` for tombstoned rows). Do not mutate."""
        return self._ids

    @property
    def size(self) -> int:
        """Number of positions, tombstones included."""
        return len(self._ids)

    @property
    def count(self) -> int:
        """Number of live (searchable) rows."""
        return len(self._positions)

    @property
    def params(self) -> IndexParams:
        return self._params

    @property
    def faiss_index(self) -> faiss.Index:
        return self._index

    def position_of(self, doc_id: str) -> int | None:
        return self._positions.get(doc_id)

    def vectors(self, positions: np.ndarray) -> np.ndarray:
        """The stored vectors at ``positions``."""
        keys = np.ascontiguousarray(positions, dtype=np.int64)
        if len(keys) == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            return self._index.reconstruct_batch(keys)

    # -- updates --------------------------------------------------------------------------
    def add(self, ids: Sequence[str] | np.ndarray, vectors: np.ndarray) -> None:
        """Append rows; an id already present is replaced (its old row is tombstoned)."""
        id_arr = _ids_array(ids)
        mat = as_matrix(vectors, self.dim)
        if len(id_arr) != len(mat):
            raise ValueError(f"{len(id_arr)} ids for {len(mat)} vectors")
        with self._lock:
            for doc_id in id_arr:
                old = self._positions.get(str(doc_id))
                if old is not None:
                    self._tombstone(old)
            start = len(self._ids)
            self._index.add(mat)
            width = max(self._ids.dtype.itemsize // 4, id_arr.dtype.itemsize // 4, 1)
            self._ids = np.concatenate([self._ids.astype(f"<U{width}"), id_arr])
            for offset, doc_id in enumerate(id_arr):
                self._positions[str(doc_id)] = start + offset
            self._live_bitmap = None

    def remove(self, doc_id: str) -> bool:
        """Tombstone ``doc_id``; returns whether it was present."""
        with self._lock:
            position = self._positions.get(doc_id)
            if position is None:
                return False
            self._tombstone(position)
            self._live_bitmap = None
            return True

    def _tombstone(self, position: int) -> None:
        del self._positions[str(self._ids[position])]
        if not self._ids.flags.writeable:
            self._ids = self._ids.copy()
        self._ids[position] = ""

    # -- search ---------------------------------------------------------------------------
    def search(
        self, query_vecs: np.ndarray, k: int, allowed: np.ndarray | None = None
    ) -> list[list[Hit]]:
        """Top-``k`` hits per query row, best first.

        ``allowed`` (int64 positions, e.g. from ``indexes.filters``) restricts the search to
        those rows; ``None`` means every live row. Each query gets ``min(k, matching rows)``
        hits.
        """
        queries = as_matrix(query_vecs, self.dim)
        if k <= 0:
            raise ValueError("k must be positive")
        with self._lock:
            if self.count == 0:
                return [[] for _ in queries]
            if allowed is None and self.count == self.size:
                scores, labels = self._index.search(queries, k, params=self._search_params())
                return self._hits(scores, labels)
            mask = self._live_mask() if allowed is None else self._allowed_mask(allowed)
            n_allowed = int(mask.sum())
            if n_allowed == 0:
                return [[] for _ in queries]
            if n_allowed <= self._params.small_filter_rows:
                return self._exact_subset(queries, k, np.flatnonzero(mask))
            return self._selector_search(queries, min(k, n_allowed), mask, n_allowed)

    def _search_params(
        self, selector: faiss.IDSelector | None = None, nprobe: int | None = None
    ) -> faiss.SearchParameters:
        if isinstance(self._index, faiss.IndexIVF):
            probes = min(self._index.nlist, nprobe or self._params.nprobe)
            # Set after construction, as faiss's stubs type it (no keyword arguments); the
            # same setattr calls its kwargs constructor makes.
            ivf = faiss.SearchParametersIVF()
            ivf.sel = selector
            ivf.nprobe = probes
            return ivf
        flat = faiss.SearchParameters()
        flat.sel = selector
        return flat

    def _selector_search(
        self, queries: np.ndarray, k: int, mask: np.ndarray, n_allowed: int
    ) -> list[list[Hit]]:
        bitmap = np.packbits(mask, bitorder="little")
        selector = faiss.IDSelectorBitmap(len(bitmap), faiss.swig_ptr(bitmap))
        # Scan proportionally more IVF lists when only a fraction of rows may match.
        fraction = n_allowed / self.size
        nprobe = math.ceil(self._params.nprobe / fraction)
        scores, labels = self._index.search(
            queries, k, params=self._search_params(selector, nprobe)
        )
        short = np.flatnonzero((labels < 0).any(axis=1))
        if len(short) and isinstance(self._index, faiss.IndexIVF):
            # Matches concentrated in unscanned lists: scan them all (exact over allowed).
            s2, l2 = self._index.search(
                queries[short], k, params=self._search_params(selector, self._index.nlist)
            )
            scores[short], labels[short] = s2, l2
        del selector  # the selector points into ``bitmap``; keep it alive until here
        return self._hits(scores, labels)

    def _exact_subset(self, queries: np.ndarray, k: int, positions: np.ndarray) -> list[list[Hit]]:
        vecs = self._index.reconstruct_batch(np.ascontiguousarray(positions, dtype=np.int64))
        scores = queries @ vecs.T
        k = min(k, len(positions))
        top = np.argpartition(-scores, k - 1, axis=1)[:, :k]
        top_scores = np.take_along_axis(scores, top, axis=1)
        order = np.argsort(-top_scores, axis=1, kind="stable")
        top = np.take_along_axis(top, order, axis=1)
        return self._hits(np.take_along_axis(top_scores, order, axis=1), positions[top])

    def _allowed_mask(self, allowed: np.ndarray) -> np.ndarray:
        positions = np.asarray(allowed, dtype=np.int64)
        if positions.size and (positions.min() < 0 or positions.max() >= self.size):
            raise ValueError("allowed positions out of range for this index")
        mask = np.zeros(self.size, dtype=bool)
        mask[positions] = True
        if self.count != self.size:
            mask &= self._ids != ""
        return mask

    def _live_mask(self) -> np.ndarray:
        if self._live_bitmap is None:
            self._live_bitmap = self._ids != ""
        return self._live_bitmap

    def _hits(self, scores: np.ndarray, labels: np.ndarray) -> list[list[Hit]]:
        ids = self._ids
        return [
            [
                Hit(id=str(ids[p]), score=float(s), position=int(p))
                for s, p in zip(row_s, row_l, strict=True)
                if p >= 0
            ]
            for row_s, row_l in zip(scores, labels, strict=True)
        ]

    # -- persistence ----------------------------------------------------------------------
    def save(self, directory: Path) -> None:
        """Write ``index.faiss`` and ``ids.npy`` into ``directory`` (which must exist)."""
        with self._lock:
            faiss.write_index(self._index, str(directory / INDEX_FILE))
            np.save(directory / IDS_FILE, self._ids, allow_pickle=False)

    @classmethod
    def load(cls, directory: Path, *, params: IndexParams | None = None) -> VectorIndex:
        index = faiss.read_index(str(directory / INDEX_FILE))
        ids = np.load(directory / IDS_FILE, allow_pickle=False)
        return cls(index, ids, params=params)
