"""The parts of `make bench` (benchmarks/run_all.py), each ``run_<part>(run) -> dict``,
and the budget rules that trim the peer's questions and the reindex sizes to the time left.
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from benchmarks.bench_common import ORG, log

if TYPE_CHECKING:
    from benchmarks.run_all import Run

# After the concurrency part, measured on 2 cores: first start ~3-5 min, graph ~4, search
# ~2, reindex ~7 at full size (trimmed to fit); a margin.
AFTER_CONCURRENCY_S = 20 * 60
# After the peer: the concurrency part at full size took ~18 min on the faster machine
# (it is trimmed to what is left, down to one answer per chat), and the parts after it.
RESERVE_S = 18 * 60 + AFTER_CONCURRENCY_S
MIN_PEER_QUESTIONS = 5  # one per kind of the evaluation file


def run_breakdown(run: Run) -> dict[str, Any]:
    from benchmarks.bench_breakdown import bench_breakdown

    app = run.app("breakdown")
    try:
        llm = run.settings.llm
        return bench_breakdown(
            app,
            run.model(),
            ORG,
            reps=run.sizes.breakdown_reps,
            per_type=run.sizes.breakdown_per_type,
            label=f"{llm.model} ({llm.backend})",
        )
    finally:
        app.close()


def run_concurrency(run: Run) -> dict[str, Any]:
    from benchmarks.bench_concurrency import bench_concurrency

    run.release_model()  # the part loads its two variants of it
    app = run.app("concurrency")
    try:
        sizes = run.sizes
        least = sizes.concurrent_min_answers
        left = run.left_s()
        return bench_concurrency(
            app,
            ORG,
            levels=sizes.concurrent_chats,
            answers=lambda c: max(c, least),
            allotted_s=None if left is None else max(left - AFTER_CONCURRENCY_S, 0.0),
        )
    finally:
        app.close()


def run_firststart(run: Run) -> dict[str, Any]:
    from benchmarks.bench_first_start import bench_first_start

    run.release_model()
    data = run.settings.data_dir
    orgs = tuple(sorted(p.name for p in data.iterdir() if (p / "org.json").is_file()))
    return bench_first_start(run.args.work_dir, data, orgs)


def run_llm(run: Run) -> dict[str, Any]:
    """benchmarks/llm_bench.py in this process: runtimes, models, threads, tool selection."""
    import json

    from benchmarks import llm_bench

    out = run.args.out_dir / "llm.json"
    argv = ["--out", str(out), "--eval-file", str(run.args.eval_file)]
    if run.args.quick:
        argv += ["--skip-transformers", "--skip-tools", "--max-tokens", "16"]
    llm_bench.main(argv)
    return json.loads(out.read_text())


def run_peer(run: Run) -> dict[str, Any]:
    """``compare`` one question at a time (kinds in turn), while the time allotted lasts:
    what is left of the budget less RESERVE_S for the later parts, at least
    MIN_PEER_QUESTIONS questions; the per-question results are merged."""
    from tqdm import tqdm

    from benchmarks.agent_compare import compare

    if not run.args.eval_file.is_file():
        return {"skipped": f"no evaluation file at {run.args.eval_file}"}
    from jobs.grading import load_questions

    every = load_questions(run.args.eval_file)
    questions = kinds_in_turn(every)[: run.sizes.peer_limit]
    sample = None
    if len(questions) < len(every):
        sample = (
            f"{len(questions)} of the file's {len(every)} questions, kinds in turn "
            f"(--peer-questions; `make eval EVAL_ARGS=--peer` asks them all)"
        )
    left = run.left_s()
    allotted = None if left is None else left - RESERVE_S
    results: list[dict[str, Any]] = []
    failed: list[str] = []
    started = time.perf_counter()
    try:
        with tqdm(total=len(questions), desc="peer comparison", unit="question") as bar:
            for n, question in enumerate(questions):
                spent = time.perf_counter() - started
                if (
                    allotted is not None
                    and n >= MIN_PEER_QUESTIONS
                    and spent * (n + 1) / n > allotted
                ):
                    break
                try:
                    result = asyncio.run(
                        compare(
                            run.model(),
                            [question],
                            run.local(),
                            ORG,
                            progress=False,
                        )
                    )
                except Exception as exc:  # one question's failure does not end the comparison
                    failed.append(f"{question.get('id', n)}: {type(exc).__name__}: {exc}"[:200])
                    log(f"peer: compare() failed on {failed[-1]}")
                    bar.update()
                    continue
                results.append(result)
                bar.set_postfix_str(
                    " / ".join(
                        f"{a} {result[a]['rows'][0]['latency_s']:.0f}s"
                        for a in result.get("agents", ("askcrow", "peer"))
                    )
                )
                bar.update()
    finally:
        run.release_model()
    if not results:
        raise RuntimeError(f"compare() failed on every question asked: {failed[:1]}")
    notes = []
    if (asked := len(results) + len(failed)) < len(questions):
        notes.append(
            f"{asked} of the {len(questions)} questions (kinds in turn) fitted the "
            f"{allotted / 60:.1f} min left for them of --budget-minutes "
            f"{run.args.budget_minutes:g}"
        )
    if failed:
        notes.append(f"{len(failed)} left out, compare() raised on them: " + "; ".join(failed))
    note = "; ".join(notes) or None
    if note:
        log(f"peer: {note}")
    return {
        **merge_comparisons(results),
        "eval_file": str(run.args.eval_file),
        "sample": sample,
        "reduced": note,
        "failed_questions": failed,
    }


def kinds_in_turn(questions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The questions reordered one kind after another, so any prefix covers every kind."""
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for q in questions:
        by_kind.setdefault(q["kind"], []).append(q)
    return [q for group in itertools.zip_longest(*by_kind.values()) for q in group if q]


def merge_comparisons(results: list[dict[str, Any]]) -> dict[str, Any]:
    """One comparison from several ``compare`` results: rows joined, summaries recomputed
    with jobs.grading.summarize (what ``compare`` summarizes with)."""
    from jobs.grading import summarize

    agents = results[0].get("agents") or ["askcrow", "peer"]
    merged = {k: v for k, v in results[0].items() if k not in agents}
    for name in agents:
        rows = [row for r in results for row in r[name]["rows"]]
        merged[name] = {"rows": rows, "summary": summarize(rows)}
    return merged


def run_graph(run: Run) -> dict[str, Any]:
    from benchmarks.bench_graph import bench_graph

    run.release_model()  # the graph runs a scripted model: free the real one's memory
    s = run.sizes
    direct = run.app("direct")
    try:
        return bench_graph(
            direct,
            run.args.work_dir / "graph",
            ORG,
            rounds=s.overhead_rounds,
            levels=s.load_levels,
            duration_s=s.load_duration_s,
            model_latency_ms=s.model_latency_ms,
        )
    finally:
        direct.close()


def run_search(run: Run) -> dict[str, Any]:
    from tqdm import tqdm

    from benchmarks.bench_search import bench_search

    out: dict[str, Any] = {}
    for size in tqdm(run.sizes.search_sizes, desc="search sizes", unit="size"):
        ns = SimpleNamespace(
            sizes=[size],
            queries=run.sizes.search_queries,
            base_cache=run.args.out_dir / "minilm_base_30000.npy",
        )
        result = bench_search(ns, run.embedder())
        out = {**result, "by_size": [*out.get("by_size", []), *result["by_size"]]}
        gc.collect()
    return out


def run_reindex(run: Run) -> dict[str, Any]:
    import ray

    from benchmarks.bench_reindex import max_vector_diff, ray_path, single_path
    from crow.settings import serve_config_args

    work = run.args.work_dir / "reindex"
    for scratch in ("indexes-ray", "indexes-single", "var-ray"):
        shutil.rmtree(work / scratch, ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)
    settings_args = serve_config_args(run.args.config) if run.args.config.is_file() else {}
    rows, single_rows = run.sizes.reindex_rows, run.sizes.reindex_single_rows
    out: dict[str, Any] = {
        "rows_requested": rows,
        "single_rows_requested": single_rows,
        "reduced": None,
    }
    notes = []
    if (left := run.left_s()) is not None:  # single sample: a quarter of the time left
        rate = probe_rate(run.embedder(), run.settings.data_dir) * 0.6  # sustained < burst
        fit = max(1_000, int(0.25 * left * rate) // 1_000 * 1_000)
        if fit < single_rows:
            notes.append(
                f"single process {single_rows:,} -> {fit:,} rows (probe: {rate / 0.6:.0f} "
                f"texts/s, {left / 60:.1f} min left)"
            )
            single_rows = fit
    single_rows = min(single_rows, rows)
    out["single_process"] = single_path(work, single_rows, run.settings.embedder.model)
    if (left := run.left_s()) is not None:  # Ray rows: what the measured rate fits
        rate = out["single_process"]["rows_per_s"] * 0.9  # the Ray path ran at 0.9-1.7x here
        fit = max(10_000, int((left - 60) * rate) // 10_000 * 10_000)  # 60 s: Ray start, seeding
        if fit < rows:
            notes.append(
                f"Ray Data job {rows:,} -> {fit:,} rows (single process ran at "
                f"{rate / 0.9:.0f} rows/s, {left / 60:.1f} min left)"
            )
            rows = fit
    if notes:
        out["reduced"] = (
            f"reduced to fit --budget-minutes {run.args.budget_minutes:g}: " + "; ".join(notes)
        )
        log(f"reindex: {out['reduced']}")
    os.environ.pop("RAY_ADDRESS", None)
    ray.init(
        address="local",
        num_cpus=os.cpu_count(),
        include_dashboard=False,
        log_to_driver=False,
        logging_level="WARNING",
    )
    try:
        import ray.data

        ray.data.DataContext.get_current().enable_progress_bars = False
        out["ray_job"] = ray_path(work, rows, settings_args)
    finally:
        ray.shutdown()
    ray_rate, one_rate = out["ray_job"]["rows_per_s"], out["single_process"]["rows_per_s"]
    out["ratio_ray_over_single_rows_per_s"] = round(ray_rate / one_rate, 3)
    out["max_abs_diff_vectors_sample"] = max_vector_diff(
        out["ray_job"]["index_dir"], out["ray_job"]["data_root"], run.embedder().embed
    )
    out["note"] = (
        f"The single-process loop (crow.retrieval.index_build.build_index) ran first, on "
        f"{single_rows:,} seeded interactions of their own, then the Ray Data job (jobs.reindex) on "
        f"{out['ray_job']['rows']:,}: rows/s are compared, not wall times."
        + (f" Sizes {out['reduced']}." if out["reduced"] else "")
        + " Vector check: the Ray job's vectors vs plain encodes in this process."
    )
    return out


def probe_rate(embedder: Any, data_root: Path, n: int = 512) -> float:
    """Texts per second of the main-process embedder on ``n`` demo interaction texts."""
    from benchmarks.bench_common import interaction_texts

    texts = interaction_texts(data_root, n)
    started = time.perf_counter()
    embedder.embed(texts)
    return len(texts) / (time.perf_counter() - started)


RUNNERS: dict[str, Callable[[Run], dict[str, Any]]] = {
    "llm": run_llm,
    "breakdown": run_breakdown,
    "peer": run_peer,
    "concurrency": run_concurrency,
    "firststart": run_firststart,
    "graph": run_graph,
    "search": run_search,
    "reindex": run_reindex,
}
