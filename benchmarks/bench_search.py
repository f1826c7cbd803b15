"""Search latency and recall: exact vs IVF, with and without filters, at 100k and 1M."""

from __future__ import annotations

import json
import time
from typing import Any

import numpy as np

from benchmarks.bench_common import load, log, pct


def bench_search(args, embedder) -> dict[str, Any]:
    import faiss

    from benchmarks.recall_1m import base_vectors, expand, query_sentences, recall
    from indexes.vector_index import IndexParams, VectorIndex

    base = base_vectors(args.base_cache, embedder.embed)
    queries = embedder.embed(query_sentences(args.queries, seed=2))
    data_note = (
        f"real MiniLM embeddings of {len(base):,} generated sentences ({args.base_cache}), "
        "expanded with benchmarks.recall_1m.expand(mix=0.5, noise=0.6, seed=3); queries are "
        "MiniLM embeddings of held-out query sentences"
    )

    def make(rows: int) -> np.ndarray:
        return expand(base, rows, mix=0.5, noise=0.6, seed=3)

    defaults = IndexParams()
    report: dict[str, Any] = {
        "data": data_note,
        "dim": 384,
        "queries": args.queries,
        "k": 10,
        "filter": "10% of positions allowed, uniformly random (seed 4)",
        "ivf_params": {"lists_per_sqrt_n": defaults.lists_per_sqrt_n, "nprobe": defaults.nprobe},
        "faiss_threads": faiss.omp_get_max_threads(),
        "timing": "one query per search() call; the four variants timed in turn for each query",
        "by_size": [],
    }
    for rows in args.sizes:
        log(f"search: {rows:,} vectors: generating data")
        data = make(rows)
        ids = np.char.add("r", np.arange(rows).astype(np.str_))
        started = time.perf_counter()
        exact = VectorIndex.build(ids, data, params=IndexParams(exact_threshold=rows + 1))
        exact_build = time.perf_counter() - started
        started = time.perf_counter()
        approx = VectorIndex.build(ids, data)
        approx_build = time.perf_counter() - started
        del data
        log(
            f"search: {rows:,}: built exact in {exact_build:.1f}s, {approx.kind} "
            f"(nlist {getattr(approx.faiss_index, 'nlist', '-')}) in {approx_build:.1f}s"
        )
        allowed = np.sort(np.random.default_rng(4).choice(rows, rows // 10, replace=False))
        truth, truth_f = exact.search(queries, 10), exact.search(queries, 10, allowed=allowed)
        rec = recall(approx.search(queries, 10), truth)
        rec_f = recall(approx.search(queries, 10, allowed=allowed), truth_f)
        variants = {
            "exact": (exact, None),
            "approx": (approx, None),
            "exact_filtered": (exact, allowed),
            "approx_filtered": (approx, allowed),
        }
        times: dict[str, list[float]] = {k: [] for k in variants}
        for q in queries[:5]:  # warm-up
            for index, flt in variants.values():
                index.search(q, 10, allowed=flt)
        load_before = load()
        for q in queries:
            for name, (index, flt) in variants.items():
                started = time.perf_counter()
                index.search(q, 10, allowed=flt)
                times[name].append((time.perf_counter() - started) * 1000)
        entry = {
            "rows": rows,
            "approx_kind": approx.kind,
            "nlist": getattr(approx.faiss_index, "nlist", None),
            "build_s": {"exact": round(exact_build, 2), "approx": round(approx_build, 2)},
            "latency_ms": {k: {"p50": pct(v, 50), "p99": pct(v, 99)} for k, v in times.items()},
            "speedup_p50_exact_over_approx": {
                "unfiltered": round(pct(times["exact"], 50) / pct(times["approx"], 50), 1),
                "filtered": round(
                    pct(times["exact_filtered"], 50) / pct(times["approx_filtered"], 50), 1
                ),
            },
            "recall_at_10_approx_vs_exact": {"unfiltered": rec, "filtered": rec_f},
            "loadavg_1m": [load_before, load()],
        }
        report["by_size"].append(entry)
        log(f"search: {rows:,}: " + json.dumps(entry["latency_ms"]) + f" recall {rec}/{rec_f}")
        del exact, approx, variants
    return report


# -- 3. reindex -----------------------------------------------------------------------------
