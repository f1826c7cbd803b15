"""Shared helpers of the retrieval benchmarks: logging, seeding, machine facts."""

from __future__ import annotations

import asyncio
import contextlib
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from crow.settings import AppSettings, serve_config_args

ROOT = Path(__file__).resolve().parent.parent
ORG = "acme-outdoor"
SEED_END = "2026-11-29"
T0 = time.perf_counter()


def bench_settings(config: Path, var: Path, chat_db: Path) -> AppSettings:
    """serve_config.yaml's app settings over the data and indexes under ``var``, with a
    chat database of the benchmark's own (never the running app's)."""
    args = serve_config_args(config) if config.is_file() else {}
    return AppSettings.from_args({**args, "var_dir": str(var), "chat_db": str(chat_db)})


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
        [
            sys.executable,
            "-m",
            "jobs.seed_demo",
            "--data-root",
            str(data_root),
            "--org",
            ORG,
            "--interactions",
            str(rows),
            "--end",
            SEED_END,
        ],
        check=True,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
    )
    marker.touch()
    return time.perf_counter() - started


def interaction_texts(data_root: Path, n: int) -> list[str]:
    from crow.data.lake import DataLake
    from crow.retrieval.embed_text import texts_for

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
