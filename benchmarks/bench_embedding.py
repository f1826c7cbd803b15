"""Embedding throughput: the Embedder Serve deployment vs plain encode, side by side."""

from __future__ import annotations

import asyncio
import os
import statistics
import time
from typing import Any

import numpy as np

from benchmarks.bench_common import _serve_singles, load, log, pct


def bench_embedding(args, texts: list[str], settings_dict: dict, embedder) -> dict[str, Any]:
    import ray
    import torch
    from ray import serve

    from crow.settings import AppSettings
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
        EmbedderDeployment.bind(AppSettings.from_args(settings_dict)),
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
        "plain_encode": [],
        "plain_encode_1_thread": [],
        "serve_concurrent_singles": [],
        "serve_bulk": [],
        "ray_actor_plain_encode": [],
    }
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
        log(
            f"embedding round {r + 1}/{args.rounds} (load {load()}): "
            + ", ".join(f"{k} {v[-1]:.0f}/s" for k, v in modes.items())
        )
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
