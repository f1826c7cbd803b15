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
   ``crow.retrieval.index_build.build_index`` loop. With ``--fit-minutes`` (default 20) the row count is
   reduced when the throughput measured in part 1 says the run would not fit; the JSON
   then has ``rows_requested`` and ``rows``.

Run from the repository root: ``python -m benchmarks.retrieval_bench`` (about 20 minutes on
2 cores, ~6 GB of memory at 1M vectors). Smaller: ``--embed-texts 200 --rounds 1 --sizes 20000
--reindex-rows 5000``. Starts its own local Ray instance (no dashboard, no HTTP proxy) and
shuts it down at the end; writes ``var/bench/retrieval.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.bench_common import ROOT, T0, interaction_texts, log, machine_info, seed
from benchmarks.bench_embedding import bench_embedding
from benchmarks.bench_reindex import bench_reindex
from benchmarks.bench_search import bench_search


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="Shrink: --embed-texts 300 --sizes 20000 --queries 50 --reindex-rows 5000",
    )
    parser.add_argument("--out", type=Path, default=ROOT / "var/bench/retrieval.json")
    parser.add_argument(
        "--work-dir",
        type=Path,
        default=ROOT / "var/bench-retrieval",
        help="seeded data and built indexes (reused across runs)",
    )
    parser.add_argument("--config", type=Path, default=ROOT / "serve_config.yaml")
    parser.add_argument(
        "--skip", choices=["embed", "search", "reindex"], action="append", default=[]
    )
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
    g.add_argument(
        "--fit-minutes",
        type=float,
        default=20.0,
        help="reduce --reindex-rows so the whole run fits (0: never reduce)",
    )
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
    embedder = SentenceTransformerEmbedder(
        settings_args.get("embedder", {}).get("model", "all-MiniLM-L6-v2")
    )
    report["machine"]["model_load_s_main_process"] = round(time.perf_counter() - started, 1)

    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=True,
        logging_level="WARNING",
    )
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
