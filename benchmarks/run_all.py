"""`make bench`: the benchmarks of benchmarks/ in one run -> results.json, PNG plots, REPORT.md.

    python -m benchmarks.run_all [--skip PART ...] [--quick] [--budget-minutes 60]

Parts, in this order (each a ratio or a distribution measured side by side in this run):

  llm        the local LLM: transformers vs llama.cpp on the same 0.5B GGUF at 1 and 2
             threads, the 0.5B vs the 1.5B, decoding on a busy machine, raw tool selection
             with constrained calls (benchmarks/llm_bench.py -> var/bench/llm.json)
  breakdown  one chat answer split into model, tools, embedding, retrieval, store and rest,
             per question type, real local model (benchmarks/bench_breakdown.py)
  peer       Ask CROW's loop vs a pydantic-ai peer on the evaluation questions, same model:
             11 of them by default, every kind at least twice (--peer-questions; 0: all)
             (benchmarks/peer.py, benchmarks/agent_compare.py)
  concurrency  the real local model at 1, 4 and 8 concurrent chats, answers per minute with
             llama.cpp's continuous batching on (llm.slots) and off (one slot), levels
             alternating between the two (benchmarks/bench_concurrency.py)
  firststart the app started over the demo data with no indexes (as on a fresh clone): each
             organization searchable how long after /ready (benchmarks/bench_first_start.py)
  graph      the Serve graph with a scripted model: per-request overhead vs one process, and
             throughput / p50 / p99 at 1, 8, 32, 64 clients (benchmarks/bench_graph.py)
  search     vector search p50 / p99 and recall at 100k and 1M vectors (bench_search.py)
  reindex    interactions reindexed through the Ray Data job (100k rows) vs the single-process
             loop on a smaller sample, rows/s compared (bench_reindex.py)

About an hour on 2 cores at the default sizes. On a slower (or busier) machine
``--budget-minutes`` trims the peer's questions (kinds in turn), the concurrency part's
answers per level and the reindex row counts to what the measured speed fits; the report says so where it happened.
Data and indexes come from ``--var`` (`make data`; missing indexes are built first); the
benchmarks' own chat databases, seeded data and indexes go to ``--work-dir``. A failing part
is recorded and the run goes on; the exit status is 1 if any part failed.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.bench_common import ORG, ROOT, bench_settings, log, machine_info
from benchmarks.parts import RUNNERS

if TYPE_CHECKING:
    from crow.app import LocalApp
    from models.chat import ChatModel
    from models.embedder import Embedder

PARTS = ("llm", "breakdown", "peer", "concurrency", "firststart", "graph", "search", "reindex")
EVAL_FILE = ROOT.parent / "shared" / "evals" / "queries.jsonl"


@dataclass(frozen=True)
class Sizes:
    breakdown_reps: int = 1
    breakdown_per_type: int | None = None  # None: every question of a type
    concurrent_chats: tuple[int, ...] = (1, 4, 8)
    concurrent_min_answers: int = 4
    """A level of the concurrency part asks max(chats, this) questions."""
    overhead_rounds: int = 10
    load_levels: tuple[int, ...] = (1, 8, 32, 64)
    load_duration_s: float = 12.0
    model_latency_ms: float = 200.0
    search_sizes: tuple[int, ...] = (100_000, 1_000_000)
    search_queries: int = 200
    reindex_rows: int = 100_000
    reindex_single_rows: int = 20_000
    peer_limit: int | None = 11
    """Questions the peer comparison asks (kinds in turn; None: every question of the file).
    The peer takes 40-120 s a question with the CPU model, so all 22 of the evaluation file
    need about 20 minutes on their own: `make bench` asks half of them, every kind at least
    twice, and `make eval EVAL_ARGS=--peer` asks them all."""


QUICK = Sizes(
    breakdown_per_type=1,
    concurrent_chats=(1, 2),
    concurrent_min_answers=1,
    overhead_rounds=2,
    load_levels=(1, 4),
    load_duration_s=2.0,
    search_sizes=(5_000,),
    search_queries=20,
    reindex_rows=1_000,
    reindex_single_rows=500,
    peer_limit=2,
)


class Run:
    """One benchmark run: its options, shared components (loaded once, on first use) and
    results, written to results.json after every part."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.sizes = QUICK if args.quick else Sizes()
        if (asked := getattr(args, "peer_questions", None)) is not None:
            self.sizes = replace(self.sizes, peer_limit=asked or None)
        self.started = time.perf_counter()
        self.settings = bench_settings(args.config, args.var, args.work_dir / "chat.duckdb")
        self.results: dict[str, Any] = {
            "benchmark": "benchmarks/run_all.py",
            "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "argv": sys.argv[1:],
            "quick": args.quick,
            "sizes": asdict(self.sizes),
            "machine": machine_info(),
            "parts": {},
        }
        self._embedder: Embedder | None = None
        self._model: ChatModel | None = None
        self._local: LocalApp | None = None

    # -- shared components ------------------------------------------------------------------
    def embedder(self) -> Embedder:
        if self._embedder is None:
            from crow.app import load_embedder

            started = time.perf_counter()
            self._embedder = load_embedder(self.settings)
            self.results["machine"]["embedder_load_s"] = round(time.perf_counter() - started, 1)
        return self._embedder

    def local(self) -> LocalApp:
        """The app in this process (no chat DB), once the demo org's indexes exist (built
        here when missing)."""
        if self._local is None:
            from tqdm import tqdm

            from crow.app import open_local_app

            app = open_local_app(self.settings, self.embedder())
            started = time.perf_counter()
            bars: dict[str, Any] = {}

            def step(collection: str, done: int, total: int) -> None:
                bar = bars.setdefault(collection, tqdm(desc=f"index {ORG}/{collection}"))
                bar.total = total
                bar.update(done - bar.n)

            built = app.build_missing_indexes(ORG, progress=step)
            for bar in bars.values():
                bar.close()
            self.results["indexes_built"] = {
                "collections": built,
                "wall_s": round(time.perf_counter() - started, 1),
            }
            self._local = app
        return self._local

    def model(self) -> ChatModel:
        """The configured model (serve_config.yaml: the real local model), loaded once."""
        if self._model is None:
            from crow.app import chat_model

            log(f"loading the model ({self.settings.llm.backend}: {self.settings.llm.model})")
            started = time.perf_counter()
            self._model = chat_model(self.settings)
            self.results["machine"]["model_load_s"] = round(time.perf_counter() - started, 1)
        return self._model

    def release_model(self) -> None:
        if self._model is not None:
            with contextlib.suppress(Exception):
                getattr(self._model, "close", lambda: None)()
            self._model = None
            gc.collect()

    def app(self, name: str) -> LocalApp:
        """The app in this process with a fresh chat DB of its own, ``<name>.duckdb``."""
        from crow.app import open_local_app

        settings = bench_settings(
            self.args.config, self.args.var, self.args.work_dir / f"{name}.duckdb"
        )
        embedder = self.local().embedder
        return open_local_app(settings, embedder, chat_store=True, fresh_chat_db=True)

    def left_s(self) -> float | None:
        """Seconds left of --budget-minutes, less a minute for the report; None: no budget."""
        if self.args.budget_minutes <= 0:
            return None
        return self.args.budget_minutes * 60 - (time.perf_counter() - self.started) - 60

    # -- bookkeeping --------------------------------------------------------------------------
    def part(self, name: str, fn: Callable[[], dict[str, Any]]) -> None:
        entry: dict[str, Any] = {"status": "running"}
        self.results["parts"][name] = entry
        log(f"== {name} ==")
        started = time.perf_counter()
        try:
            result = fn()
        except Exception as exc:
            traceback.print_exc()
            entry.update(status="failed", error=f"{type(exc).__name__}: {exc}"[:300])
        else:
            if skipped := result.pop("skipped", None):
                entry.update(status="skipped", note=skipped)
            else:
                entry["status"] = "ok"
                self.results[name] = result
        entry["wall_s"] = round(time.perf_counter() - started, 1)
        log(f"== {name}: {entry['status']} in {entry['wall_s']:.0f} s ==")
        self.save()

    def save(self) -> None:
        self.results["total_s"] = round(time.perf_counter() - self.started, 1)
        self.args.out_dir.mkdir(parents=True, exist_ok=True)
        (self.args.out_dir / "results.json").write_text(
            json.dumps(self.results, indent=2, default=str)
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n".join(__doc__.splitlines()[4:]),
    )
    parser.add_argument("--skip", choices=PARTS, action="append", default=[], help="repeatable")
    parser.add_argument("--quick", action="store_true", help="tiny sizes (for tests)")
    parser.add_argument(
        "--budget-minutes",
        type=float,
        default=60.0,
        help="trim the peer questions and the reindex sizes to fit (0: never)",
    )
    parser.add_argument("--var", type=Path, default=ROOT / "var", help="data and indexes")
    parser.add_argument("--work-dir", type=Path, default=ROOT / "var" / "bench-work")
    parser.add_argument("--out-dir", type=Path, default=ROOT / "var" / "bench")
    parser.add_argument("--config", type=Path, default=ROOT / "serve_config.yaml")
    parser.add_argument("--eval-file", type=Path, default=EVAL_FILE, help="peer questions")
    parser.add_argument(
        "--peer-questions",
        type=int,
        default=None,
        help=f"questions for the peer comparison ({Sizes.peer_limit}; 0: all)",
    )
    args = parser.parse_args(argv)
    for name, value in (
        ("HF_HUB_OFFLINE", "1"),
        ("TRANSFORMERS_OFFLINE", "1"),
        ("RAY_USAGE_STATS_ENABLED", "0"),
    ):
        os.environ.setdefault(name, value)
    args.work_dir.mkdir(parents=True, exist_ok=True)
    run = Run(args)
    log(f"machine: {json.dumps(run.results['machine'])}")
    try:
        for name in PARTS:
            if name in args.skip:
                run.results["parts"][name] = {"status": "skipped", "note": "--skip"}
                continue
            run.part(name, lambda name=name: RUNNERS[name](run))
    finally:
        run.release_model()
        run.save()
        from benchmarks.report import write_report

        peer_table = None
        if "peer" in run.results:  # the part ran, so its module imports
            from benchmarks.agent_compare import markdown_table as peer_table
        report = write_report(run.results, args.out_dir, peer_table=peer_table)
        print(f"\nresults: {args.out_dir / 'results.json'}\nreport:  {report}", flush=True)
    failed = [n for n, p in run.results["parts"].items() if p["status"] == "failed"]
    if failed:
        print(f"failed parts: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
