"""Embedding throughput, search latency and reindex time: Ray paths vs one process, side by side.

Three parts, each comparing two ways of doing the same work in one run (so the ratios hold
even on a machine shared with other work; absolute numbers move with the load):

1. **Embedding throughput**: the ``Embedder`` Ray Serve deployment (real bundled MiniLM,
   ``@serve.batch`` dynamic batching) fed by ``--concurrency`` concurrent single-text
   requests and by one bulk request, vs plain ``SentenceTransformer.encode`` in this
   process, on the same demo interaction texts. Rounds interleave the modes; medians are
   reported. Also plain encode with torch on one thread, here and inside a Ray actor (Ray
   sets ``OMP_NUM_THREADS`` from a worker's CPU reservation: 1 for the ``num_cpus=0``
   replicas), which separates "fewer threads" from "Serve overhead".
2. **Search latency** p50/p99 at ``--sizes`` vectors (dim 384) through
   ``VectorIndex.search``: exact (``IndexFlatIP``) and approximate (the default IVF), with
   and without a 10 % allowed-positions filter, timed query by query interleaved; recall@10
   of approximate vs exact. Data as in ``benchmarks/recall_1m.py`` (its cached MiniLM
   embeddings of generated sentences, expanded), or random clustered vectors when the cache
   is absent.
3. **Reindex** of ``--reindex-rows`` seeded interactions: ``jobs.reindex.reindex_collection``
   (Ray Data + actor pool, settings from ``serve_config.yaml``) vs the single-process
   ``crow.indexing.build_index`` loop. With ``--fit-minutes`` (default 20) the row count is
   reduced when the throughput measured in part 1 says the run would not fit; the JSON
   then has ``rows_requested`` and ``rows``.

Run from the repository root: ``python -m benchmarks.retrieval_bench`` (about 20 minutes on
2 cores, ~6 GB of memory at 1M vectors). Smaller: ``--embed-texts 200 --rounds 1 --sizes 20000
--reindex-rows 5000``. Starts its own local Ray instance (no dashboard, no HTTP proxy) and
shuts it down at the end; writes ``var/bench/retrieval.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # also runnable as ``python benchmarks/retrieval_bench.py``
    sys.path.insert(0, str(ROOT))

ORG = "acme-outdoor"
SEED_END = "2026-11-29"
T0 = time.perf_counter()


def log(msg: str) -> None:
    print(f"[{time.perf_counter() - T0:7.1f}s] {msg}", flush=True)


def load() -> float:
    return round(os.getloadavg()[0], 2)


def pct(values: list[float], q: float) -> float:
    return round(float(np.percentile(values, q)), 3)


# -- data -----------------------------------------------------------------------------------
def seed(data_root: Path, rows: int) -> float:
    """Seed the demo org with ``rows`` interactions (skipped when already there)."""
    marker = data_root / f".seeded-{ORG}-{rows}-{SEED_END}"
    if marker.exists():
        return 0.0
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "jobs.seed_demo", "--data-root", str(data_root), "--org", ORG,
         "--interactions", str(rows), "--end", SEED_END],
        check=True, cwd=ROOT, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    marker.touch()
    return time.perf_counter() - started


def interaction_texts(data_root: Path, n: int) -> list[str]:
    from crow.datalake import DataLake
    from crow.indexing import texts_for

    table = DataLake(data_root).read_table(ORG, "interactions").slice(0, n)
    return texts_for("interactions", table.to_pydict())


# -- 1. embedding throughput ----------------------------------------------------------------
async def _serve_singles(handle, texts: list[str], concurrency: int) -> tuple[float, list[float]]:
    sem = asyncio.Semaphore(concurrency)
    latencies: list[float] = []

    async def one(text: str) -> np.ndarray:
        async with sem:
            started = time.perf_counter()
            out = await handle.embed.remote([text])
            latencies.append((time.perf_counter() - started) * 1000)
            return out

    started = time.perf_counter()
    outs = await asyncio.gather(*(one(t) for t in texts))
    elapsed = time.perf_counter() - started
    assert all(o.shape[0] == 1 for o in outs)
    return elapsed, latencies


def bench_embedding(args, texts: list[str], settings_dict: dict, embedder) -> dict[str, Any]:
    import ray
    import torch
    from ray import serve

    from deployments.embedder import EmbedderDeployment

    @ray.remote(num_cpus=0)
    class PlainActor:
        """Plain encode in a Ray worker (num_cpus=0, like the Serve replicas)."""

        def __init__(self, model: str) -> None:
            from models.embedder import SentenceTransformerEmbedder

            self.e = SentenceTransformerEmbedder(model)

        def threads(self) -> dict[str, Any]:
            import torch

            return {"torch": torch.get_num_threads(), "OMP": os.environ.get("OMP_NUM_THREADS")}

        def embed(self, batch: list[str]) -> float:
            started = time.perf_counter()
            self.e.embed(batch)
            return time.perf_counter() - started

    log("embedding: starting Serve (proxy disabled) and the Embedder deployment")
    serve.start(proxy_location="Disabled")
    started = time.perf_counter()
    handle = serve.run(
        EmbedderDeployment.bind(settings_dict),
        name="bench_embedder",
        route_prefix=None,
        logging_config={"enable_access_log": False, "log_level": "WARNING"},
    )
    deploy_s = time.perf_counter() - started
    actor = PlainActor.remote(settings_dict["embedder"]["model"])
    # Warm-up: first forward passes, thread pools, the handle's router.
    handle.embed.remote(texts[:64]).result(timeout_s=600)
    ray.get(actor.embed.remote(texts[:64]))
    embedder.embed(texts[:64])

    serve_vecs = handle.embed.remote(texts[:200]).result(timeout_s=600)
    max_diff = float(np.abs(serve_vecs - embedder.embed(texts[:200])).max())

    modes: dict[str, list[float]] = {
        "plain_encode": [], "plain_encode_1_thread": [], "serve_concurrent_singles": [],
        "serve_bulk": [], "ray_actor_plain_encode": [],
    }  # fmt: skip
    single_lat: list[float] = []
    n = len(texts)
    for r in range(args.rounds):
        started = time.perf_counter()
        embedder.embed(texts)
        modes["plain_encode"].append(n / (time.perf_counter() - started))
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        started = time.perf_counter()
        embedder.embed(texts)
        modes["plain_encode_1_thread"].append(n / (time.perf_counter() - started))
        torch.set_num_threads(threads)
        elapsed, lat = asyncio.run(_serve_singles(handle, texts, args.concurrency))
        modes["serve_concurrent_singles"].append(n / elapsed)
        single_lat += lat
        started = time.perf_counter()
        out = handle.embed.remote(texts).result(timeout_s=3600)
        modes["serve_bulk"].append(n / (time.perf_counter() - started))
        assert out.shape == (n, embedder.dim)
        modes["ray_actor_plain_encode"].append(n / ray.get(actor.embed.remote(texts)))
        log(f"embedding round {r + 1}/{args.rounds} (load {load()}): "
            + ", ".join(f"{k} {v[-1]:.0f}/s" for k, v in modes.items()))  # fmt: skip
    actor_threads = ray.get(actor.threads.remote())
    ray.kill(actor)
    serve.shutdown()
    med = {k: round(statistics.median(v), 1) for k, v in modes.items()}
    plain = med["plain_encode"]
    return {
        "texts": n,
        "mean_chars": round(sum(map(len, texts)) / n, 1),
        "concurrency": args.concurrency,
        "rounds": args.rounds,
        "serve_max_batch_size": settings_dict["embedder"].get("max_batch_size", 32),
        "serve_deploy_s": round(deploy_s, 1),
        "texts_per_s_median": med,
        "texts_per_s_by_round": {k: [round(x, 1) for x in v] for k, v in modes.items()},
        "ratio_vs_plain": {k: round(v / plain, 3) for k, v in med.items()},
        "serve_single_request_latency_ms": {"p50": pct(single_lat, 50), "p99": pct(single_lat, 99)},
        "ray_worker_threads_num_cpus_0": actor_threads,
        "max_abs_diff_serve_vs_plain": max_diff,
    }


# -- 2. search latency ----------------------------------------------------------------------
def clustered(rows: int, dim: int, seed_: int, clusters: int = 1000) -> np.ndarray:
    from models.embedder import l2_normalize

    rng = np.random.default_rng(seed_)
    centers = l2_normalize(rng.normal(size=(clusters, dim)))
    out = np.empty((rows, dim), dtype=np.float32)
    for start in range(0, rows, 100_000):
        m = min(100_000, rows - start)
        noise = rng.normal(0, 0.8 / np.sqrt(dim), (m, dim))
        out[start : start + m] = l2_normalize(centers[rng.integers(0, clusters, m)] + noise)
    return out


def bench_search(args, embedder) -> dict[str, Any]:
    import faiss

    from benchmarks.recall_1m import expand, query_sentences, recall
    from indexes.vector_index import IndexParams, VectorIndex

    cache = args.base_cache
    if cache.exists():
        base = np.load(cache)
        queries = embedder.embed(query_sentences(args.queries, seed=2))
        data_note = (
            f"real MiniLM embeddings of {len(base):,} generated sentences ({cache}), expanded "
            "with benchmarks.recall_1m.expand(mix=0.5, noise=0.6, seed=3); queries are MiniLM "
            "embeddings of held-out query sentences"
        )

        def make(rows: int) -> np.ndarray:
            return expand(base, rows, mix=0.5, noise=0.6, seed=3)
    else:
        queries = clustered(args.queries, 384, seed_=99)
        data_note = "random clustered unit vectors (1000 gaussian clusters); no cached embeddings"

        def make(rows: int) -> np.ndarray:
            return clustered(rows, 384, seed_=3)

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
        log(f"search: {rows:,}: built exact in {exact_build:.1f}s, {approx.kind} "
            f"(nlist {getattr(approx.faiss_index, 'nlist', '-')}) in {approx_build:.1f}s")  # fmt: skip
        allowed = np.sort(np.random.default_rng(4).choice(rows, rows // 10, replace=False))
        truth, truth_f = exact.search(queries, 10), exact.search(queries, 10, allowed=allowed)
        rec = recall(approx.search(queries, 10), truth)
        rec_f = recall(approx.search(queries, 10, allowed=allowed), truth_f)
        variants = {
            "exact": (exact, None), "approx": (approx, None),
            "exact_filtered": (exact, allowed), "approx_filtered": (approx, allowed),
        }  # fmt: skip
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
class NoopRecorder:
    """Stands in for ``jobs.job_record.JobRecorder``; prints progress, keeps timestamps."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.total = 0
        self.done_at: float | None = None
        self._next = 0.0

    def update(self, **kw: Any) -> None:
        if "rows_total" in kw:
            self.total = kw["rows_total"]
        done = kw.get("rows_done")
        if done is not None and self.total:
            if done >= self.total:
                self.done_at = time.perf_counter()
            if done / self.total >= self._next:
                log(f"reindex {self.label}: {done:,}/{self.total:,} rows (load {load()})")
                self._next += 0.1

    def record_index(self, collection: str, meta: Any) -> None:
        pass

    def close(self) -> None:
        pass


def bench_reindex(args, work: Path, rows: int, settings_args: dict) -> dict[str, Any]:
    from crow.datalake import DataLake
    from crow.indexing import build_index
    from crow.settings import AppSettings
    from indexes.store import IndexStore
    from jobs.reindex import reindex_collection
    from models.embedder import SentenceTransformerEmbedder

    data_root = work / f"data-{rows}"
    seed_s = seed(data_root, rows)
    log(f"reindex: data root {data_root} ready ({rows:,} interactions, seeded in {seed_s:.1f}s)")
    settings = AppSettings.from_args(
        {**settings_args, "var_dir": str(work / "var-ray"), "data_root": str(data_root),
         "index_root": str(work / "indexes-ray")}
    )  # fmt: skip
    out: dict[str, Any] = {"rows": rows, "order": "ray job path first, then single process"}

    # (a) the Ray Job path, in this process's Ray instance.
    rec = NoopRecorder("ray")
    load_before = load()
    started = time.perf_counter()
    result = reindex_collection(settings, ORG, "interactions", full=True, recorder=rec)
    wall = time.perf_counter() - started
    out["ray_job"] = {
        "wall_s": round(wall, 1),
        "rows_per_s": round(result["rows"] / wall, 1),
        "embed_done_s": round(rec.done_at - started, 1) if rec.done_at else None,
        "rows": result["rows"],
        "pool_size": settings.reindex.pool_size,
        "actor_num_cpus": settings.reindex.num_cpus,
        "batch_size": settings.reindex.batch_size,
        "loadavg_1m": [load_before, load()],
    }
    log(f"reindex ray: {json.dumps(out['ray_job'])}")

    # (b) the single-process loop (model load included in wall_s).
    rec = NoopRecorder("single")
    rec.update(rows_total=rows)
    load_before = load()
    started = time.perf_counter()
    embedder = SentenceTransformerEmbedder(settings.embedder.model)
    model_load = time.perf_counter() - started
    meta = build_index(
        DataLake(data_root), IndexStore(work / "indexes-single"), embedder.embed, ORG,
        "interactions", model=settings.embedder.model,
        on_progress=lambda done, total: rec.update(rows_done=done),
    )  # fmt: skip
    wall = time.perf_counter() - started
    out["single_process"] = {
        "wall_s": round(wall, 1),
        "rows_per_s": round(meta.count / wall, 1),
        "embed_done_s": round(rec.done_at - started, 1) if rec.done_at else None,
        "model_load_s": round(model_load, 1),
        "rows": meta.count,
        "batch_size": 256,
        "loadavg_1m": [load_before, load()],
    }
    log(f"reindex single: {json.dumps(out['single_process'])}")
    out["ratio_ray_over_single_rows_per_s"] = round(
        out["ray_job"]["rows_per_s"] / out["single_process"]["rows_per_s"], 3
    )
    # Same vectors either way? Compare a sample.
    ray_idx = IndexStore(settings.index_dir).load(ORG, "interactions")
    one_idx = IndexStore(work / "indexes-single").load(ORG, "interactions")
    sample = [str(i) for i in one_idx.ids[:: max(1, rows // 500)]]
    a = ray_idx.vectors(np.array([ray_idx.position_of(i) for i in sample]))
    b = one_idx.vectors(np.array([one_idx.position_of(i) for i in sample]))
    out["max_abs_diff_vectors_sample"] = float(np.abs(a - b).max())
    out["index_kind"] = meta.kind
    return out


# -- main -----------------------------------------------------------------------------------
def machine_info() -> dict[str, Any]:
    import ray
    import torch

    cpu = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return {
        "nproc": os.cpu_count(),
        "affinity_cpus": len(os.sched_getaffinity(0)),
        "cpu": cpu,
        "torch_threads_main_process": torch.get_num_threads(),
        "torch": torch.__version__,
        "ray": ray.__version__,
        "python": platform.python_version(),
        "loadavg_at_start": list(os.getloadavg()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="Shrink: --embed-texts 300 --sizes 20000 --queries 50 --reindex-rows 5000",
    )
    parser.add_argument("--out", type=Path, default=ROOT / "var/bench/retrieval.json")
    parser.add_argument("--work-dir", type=Path, default=ROOT / "var/bench-retrieval",
                        help="seeded data and built indexes (reused across runs)")  # fmt: skip
    parser.add_argument("--config", type=Path, default=ROOT / "serve_config.yaml")
    parser.add_argument("--skip", choices=["embed", "search", "reindex"], action="append",
                        default=[])  # fmt: skip
    g = parser.add_argument_group("embedding")
    g.add_argument("--embed-texts", type=int, default=1000)
    g.add_argument("--concurrency", type=int, default=32)
    g.add_argument("--rounds", type=int, default=2)
    g = parser.add_argument_group("search")
    g.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    g.add_argument("--queries", type=int, default=200)
    g.add_argument("--base-cache", type=Path, default=ROOT / "var/bench/minilm_base_30000.npy")
    g = parser.add_argument_group("reindex")
    g.add_argument("--reindex-rows", type=int, default=100_000)
    g.add_argument("--fit-minutes", type=float, default=20.0,
                   help="reduce --reindex-rows so the whole run fits (0: never reduce)")  # fmt: skip
    args = parser.parse_args()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.work_dir.mkdir(parents=True, exist_ok=True)
    os.environ.pop("RAY_ADDRESS", None)

    import ray

    from crow.settings import serve_config_args
    from models.embedder import SentenceTransformerEmbedder

    settings_args = serve_config_args(args.config) if args.config.is_file() else {}
    settings_dict = {k: v for k, v in settings_args.items() if k in ("embedder",)}
    report: dict[str, Any] = {
        "benchmark": "benchmarks/retrieval_bench.py",
        "argv": sys.argv[1:],
        "machine": machine_info(),
        "settings_from": str(args.config.relative_to(ROOT) if args.config.is_file() else None),
    }
    log(f"machine: {json.dumps(report['machine'])}")
    started = time.perf_counter()
    embedder = SentenceTransformerEmbedder(settings_args.get("embedder", {}).get(
        "model", "all-MiniLM-L6-v2"))  # fmt: skip
    report["machine"]["model_load_s_main_process"] = round(time.perf_counter() - started, 1)

    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=True,
             logging_level="WARNING")  # fmt: skip
    try:
        import ray.data

        ray.data.DataContext.get_current().enable_progress_bars = False
        if "embed" not in args.skip:
            texts_root = args.work_dir / "data-texts"
            seed(texts_root, max(args.embed_texts, 1000))
            texts = interaction_texts(texts_root, args.embed_texts)
            report["embedding"] = bench_embedding(args, texts, settings_dict, embedder)
            log("embedding: " + json.dumps(report["embedding"]["texts_per_s_median"]))
        if "search" not in args.skip:
            report["search"] = bench_search(args, embedder)
        if "reindex" not in args.skip:
            rows, note = args.reindex_rows, None
            emb = report.get("embedding")
            if args.fit_minutes > 0 and emb:
                left = args.fit_minutes * 60 - (time.perf_counter() - T0) - 60
                tps = emb["texts_per_s_median"]
                per_row = 1 / tps["plain_encode"] + 1 / tps["ray_actor_plain_encode"]
                fit = max(5000, int(left / per_row) // 5000 * 5000)
                if fit < rows:
                    note = (
                        f"reduced from {rows:,}: at the measured throughput both paths over "
                        f"{rows:,} rows would take ~{rows * per_row / 60:.0f} min, "
                        f"{left / 60:.0f} min were left of --fit-minutes {args.fit_minutes:g}"
                    )
                    log(f"reindex: {note}")
                    rows = fit
            report["reindex"] = {"rows_requested": args.reindex_rows, "reduced": note}
            report["reindex"] |= bench_reindex(args, args.work_dir, rows, settings_args)
    finally:
        with contextlib.suppress(Exception):
            from ray import serve

            serve.shutdown()
        ray.shutdown()
    report["total_s"] = round(time.perf_counter() - T0, 1)
    report["note"] = args_note(report)
    args.out.write_text(json.dumps(report, indent=2))
    print_table(report)
    log(f"wrote {args.out}")


def args_note(report: dict[str, Any]) -> str:
    threads = report.get("embedding", {}).get("ray_worker_threads_num_cpus_0")
    return (
        "Ratios are measured side by side in one run on a machine shared with other work: "
        "trust ratios over absolute numbers (loadavg recorded per phase). Ray workers get "
        f"OMP_NUM_THREADS from their CPU reservation ({threads} for num_cpus=0; the reindex "
        "actor's num_cpus is floored, min 1), while the main process uses all cores for torch."
    )


def print_table(r: dict[str, Any]) -> None:
    rows: list[tuple[str, str]] = []
    if e := r.get("embedding"):
        for k, v in e["texts_per_s_median"].items():
            rows.append((f"embed {k}", f"{v:.0f} texts/s (x{e['ratio_vs_plain'][k]:.2f})"))
    if s := r.get("search"):
        for entry in s["by_size"]:
            lat = entry["latency_ms"]
            rec = entry["recall_at_10_approx_vs_exact"]
            for k, v in lat.items():
                rows.append(
                    (
                        f"search {entry['rows']:,} {k}",
                        f"p50 {v['p50']:.2f} ms  p99 {v['p99']:.2f} ms",
                    )
                )
            rows.append(
                (
                    f"search {entry['rows']:,} recall@10",
                    f"{rec['unfiltered']} / filtered {rec['filtered']}",
                )
            )
    if x := r.get("reindex"):
        for k in ("ray_job", "single_process"):
            rows.append(
                (f"reindex {x['rows']:,} {k}", f"{x[k]['wall_s']} s, {x[k]['rows_per_s']} rows/s")
            )
        rows.append(("reindex ray/single rows/s", str(x["ratio_ray_over_single_rows_per_s"])))
    width = max(len(a) for a, _ in rows) if rows else 0
    print()
    for a, b in rows:
        print(f"{a:<{width}}  {b}")


if __name__ == "__main__":
    main()
