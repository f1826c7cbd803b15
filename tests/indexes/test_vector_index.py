from __future__ import annotations

import time

import numpy as np
import pytest

from indexes.vector_index import IndexParams, VectorIndex, as_matrix
from models.embedder import l2_normalize


def clustered(
    n: int, dim: int, *, n_centers: int, noise: float, seed: int, latent: int = 16
) -> np.ndarray:
    """Unit vectors around ``n_centers`` centres on a ``latent``-dim subspace of R^dim (like
    sentence embeddings, whose intrinsic dimension is far below their width)."""
    rng = np.random.default_rng(seed)
    basis = np.random.default_rng(0).standard_normal((latent, dim)) / np.sqrt(latent)
    centers = rng.standard_normal((n_centers, latent))
    points = centers[rng.integers(0, n_centers, n)] + rng.normal(0, noise, (n, latent))
    return l2_normalize((points @ basis + rng.normal(0, 0.02, (n, dim))).astype(np.float32))


def ids_for(n: int, prefix: str = "doc") -> list[str]:
    return [f"{prefix}-{i}" for i in range(n)]


def exact_topk(data: np.ndarray, queries: np.ndarray, k: int) -> np.ndarray:
    scores = queries @ data.T
    return np.argsort(-scores, axis=1, kind="stable")[:, :k]


@pytest.fixture(scope="module")
def small() -> tuple[VectorIndex, np.ndarray]:
    data = clustered(3000, 32, n_centers=30, noise=0.3, seed=1)
    return VectorIndex.build(ids_for(len(data)), data), data


def test_exact_search_matches_numpy(small: tuple[VectorIndex, np.ndarray]) -> None:
    index, data = small
    assert index.kind == "flat"
    queries = clustered(20, 32, n_centers=30, noise=0.3, seed=2)
    hits = index.search(queries, 10)
    expected = exact_topk(data, queries, 10)
    for query, row, want in zip(queries, hits, expected, strict=True):
        assert [h.position for h in row] == list(want)
        np.testing.assert_allclose([h.score for h in row], data[want] @ query, rtol=1e-5)
        assert [h.id for h in row] == [f"doc-{p}" for p in want]
        scores = [h.score for h in row]
        assert scores == sorted(scores, reverse=True)


def test_search_returns_fewer_hits_only_when_fewer_rows() -> None:
    index = VectorIndex.build(ids_for(3), clustered(3, 8, n_centers=2, noise=0.1, seed=3))
    assert [len(r) for r in index.search(np.ones(8, dtype=np.float32), 10)] == [3]
    assert VectorIndex.empty(8).search(np.ones((2, 8), dtype=np.float32), 5) == [[], []]


@pytest.mark.parametrize("n_allowed", [25, 6000])  # numpy path and in-FAISS selector path
def test_filtered_search_returns_k_matching_hits(n_allowed: int) -> None:
    data = clustered(20_000, 32, n_centers=50, noise=0.3, seed=4)
    index = VectorIndex.build(
        ids_for(len(data)), data, params=IndexParams(exact_threshold=10_000, nprobe=4)
    )
    assert index.kind == "ivf"
    rng = np.random.default_rng(5)
    allowed = np.sort(rng.choice(len(data), n_allowed, replace=False))
    queries = clustered(10, 32, n_centers=50, noise=0.3, seed=6)
    hits = index.search(queries, 10, allowed=allowed)
    allowed_set = set(allowed.tolist())
    for row in hits:
        assert len(row) == 10
        assert {h.position for h in row} <= allowed_set
    if n_allowed <= index.params.small_filter_rows:  # exact path: identical to numpy
        expected = allowed[exact_topk(data[allowed], queries, 10)]
        assert [[h.position for h in row] for row in hits] == expected.tolist()


def test_filtered_search_when_matches_sit_in_unprobed_lists() -> None:
    data = clustered(20_000, 32, n_centers=40, noise=0.1, seed=7)
    index = VectorIndex.build(
        ids_for(len(data)),
        data,
        params=IndexParams(exact_threshold=10_000, nprobe=1, small_filter_rows=0),
    )
    query = data[0]
    far = np.argsort(data @ query)[:5000]  # rows least similar to the query
    hits = index.search(query, 10, allowed=np.sort(far))[0]
    assert len(hits) == 10 and {h.position for h in hits} <= set(far.tolist())
    assert index.search(query, 10, allowed=np.array([], dtype=np.int64)) == [[]]


def test_allowed_out_of_range_is_rejected(small: tuple[VectorIndex, np.ndarray]) -> None:
    with pytest.raises(ValueError, match="out of range"):
        small[0].search(np.ones(32, dtype=np.float32), 3, allowed=np.array([10**6]))


def test_recall_at_10_of_ivf_vs_exact() -> None:
    dim, n = 128, 100_000
    data = clustered(n, dim, n_centers=2000, noise=0.5, seed=8)
    started = time.perf_counter()
    index = VectorIndex.build(ids_for(n), data)  # default params: IVF above 50k rows
    build_s = time.perf_counter() - started
    assert index.kind == "ivf"
    queries = clustered(200, dim, n_centers=2000, noise=0.5, seed=9)
    expected = exact_topk(data, queries, 10)
    hits = index.search(queries, 10)
    found = sum(
        len({h.position for h in row} & set(want.tolist()))
        for row, want in zip(hits, expected, strict=True)
    )
    recall = found / expected.size
    assert recall >= 0.95, f"recall@10={recall:.3f} (build {build_s:.1f}s)"


def test_incremental_add_makes_new_doc_searchable() -> None:
    data = clustered(500, 16, n_centers=5, noise=0.2, seed=10)
    index = VectorIndex.build(ids_for(500), data)
    new_vec = l2_normalize(np.arange(16, dtype=np.float32)[None, :] - 7.5)
    assert index.search(new_vec, 1)[0][0].id != "new"
    index.add(["new"], new_vec)
    top = index.search(new_vec, 1)[0][0]
    assert (top.id, top.position) == ("new", 500)
    assert index.count == 501


def test_add_replaces_existing_id_and_remove_hides_it() -> None:
    data = clustered(200, 16, n_centers=5, noise=0.2, seed=11)
    index = VectorIndex.build(ids_for(200), data)
    index.add(["doc-3"], data[100])  # doc-3 now has doc-100's vector
    hits = index.search(data[3], 200)[0]
    assert [h.id for h in hits].count("doc-3") == 1
    assert index.position_of("doc-3") == 200 and index.ids[3] == ""
    assert index.count == 200 and index.size == 201
    assert index.remove("doc-100") and not index.remove("doc-100")
    ids = [h.id for h in index.search(data[100], 300)[0]]
    assert "doc-100" not in ids and "" not in ids and len(ids) == 199


def test_ivf_add_and_save_load_roundtrip(tmp_path) -> None:
    data = clustered(12_000, 16, n_centers=20, noise=0.3, seed=12)
    params = IndexParams(exact_threshold=10_000)
    index = VectorIndex.build(ids_for(len(data)), data, params=params)
    extra = l2_normalize(np.ones((1, 16), dtype=np.float32))
    index.add(["extra"], extra)
    index.save(tmp_path)
    loaded = VectorIndex.load(tmp_path, params=params)
    assert loaded.kind == "ivf" and loaded.count == 12_001
    assert loaded.search(extra, 1)[0][0].id == "extra"
    np.testing.assert_allclose(loaded.vectors(np.array([5])), data[5:6], rtol=1e-6)


def test_bad_inputs_are_rejected() -> None:
    vecs = clustered(2, 8, n_centers=1, noise=0.1, seed=13)
    with pytest.raises(ValueError, match="unique"):
        VectorIndex.build(["a", "a"], vecs)
    with pytest.raises(ValueError, match="non-empty"):
        VectorIndex.build(["a", ""], vecs)
    with pytest.raises(ValueError, match="shape"):
        as_matrix(np.ones((2, 3)), dim=8)
