"""Recall@10 and latency of the approximate (IVF) index vs exact search at 1M vectors.

Data: real all-MiniLM-L6-v2 embeddings (the bundled CPU model) of generated retail
sentences, expanded to ``--rows`` vectors: each extra row is a base sentence moved part of
the way towards another one plus a little isotropic noise, renormalized. Queries are
embeddings of held-out sentences built from different templates.

Run: ``python -m benchmarks.recall_1m`` (about 10 minutes on 2 cores, ~5 GB of memory).
Writes ``var/bench/recall_1m.json``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import platform
import random
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import faiss
import numpy as np

from indexes.vector_index import IndexParams, VectorIndex
from models.embedder import BUNDLED_MINILM, SentenceTransformerEmbedder, l2_normalize

PRODUCTS = [
    "trail running shoes",
    "wireless earbuds",
    "denim jacket",
    "espresso machine",
    "yoga mat",
    "kids rain boots",
    "smart watch",
    "leather handbag",
    "gaming headset",
    "winter parka",
    "organic coffee beans",
    "air fryer",
    "sunglasses",
    "backpack",
    "office chair",
    "electric toothbrush",
    "hiking poles",
    "linen shirt",
    "blender",
    "phone case",
    "cashmere scarf",
    "road bike helmet",
    "scented candle",
    "desk lamp",
]
ACTIONS = [
    "asked about the price of",
    "complained about late delivery of",
    "returned",
    "left a five-star review for",
    "compared two models of",
    "abandoned a cart with",
    "spent ten minutes looking at",
    "asked for a discount on",
    "shared a photo of",
    "requested a size exchange for",
    "praised the quality of",
    "reported a defect in",
]
CHANNELS = [
    "on the website",
    "in the downtown store",
    "near the entrance camera",
    "on Instagram",
    "on Twitter",
    "at the checkout",
    "via live chat",
    "in the mobile app",
    "on TikTok",
]
TIMES = [
    "on Monday morning",
    "during the weekend sale",
    "late at night",
    "at lunchtime",
    "before the holidays",
    "after the newsletter went out",
    "on a rainy afternoon",
]
QUERY_TEMPLATES = [
    "Which customers {a} {p}?",
    "Show me feedback about {p} {c}",
    "Find interactions where someone {a} {p}",
    "What do shoppers say about {p} {t}?",
    "Trends for {p} {c} {t}",
]


def base_sentences(n: int, seed: int) -> list[str]:
    combos = list(itertools.product(PRODUCTS, ACTIONS, CHANNELS, TIMES))
    random.Random(seed).shuffle(combos)
    return [f"A customer {a} the {p} {c} {t}." for p, a, c, t in combos[:n]]


def base_vectors(
    cache: Path, embed: Callable[[list[str]], np.ndarray], n: int = 30_000
) -> np.ndarray:
    """MiniLM vectors of ``base_sentences(n, seed=1)`` (at most 18,144 distinct ones), from
    ``cache`` or embedded now and saved there."""
    if cache.exists():
        return np.load(cache)
    base = embed(base_sentences(n, seed=1))
    cache.parent.mkdir(parents=True, exist_ok=True)
    np.save(cache, base)
    return base


def query_sentences(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [
        rng.choice(QUERY_TEMPLATES).format(
            a=rng.choice(ACTIONS),
            p=rng.choice(PRODUCTS),
            c=rng.choice(CHANNELS),
            t=rng.choice(TIMES),
        )
        for _ in range(n)
    ]


def expand(
    base: np.ndarray, rows: int, *, mix: float, noise: float, seed: int, chunk: int = 100_000
) -> np.ndarray:
    """``rows`` unit vectors: the base rows, then ``base[i] + t (base[j] - base[i]) + e``
    with ``t ~ U(0, mix)`` and isotropic noise ``e`` of norm about ``noise``."""
    rng = np.random.default_rng(seed)
    out = np.empty((rows, base.shape[1]), dtype=np.float32)
    out[: len(base)] = base
    for start in range(len(base), rows, chunk):
        m = min(chunk, rows - start)
        i, j = rng.integers(0, len(base), m), rng.integers(0, len(base), m)
        t = rng.uniform(0.0, mix, (m, 1)).astype(np.float32)
        e = rng.normal(0, noise / np.sqrt(base.shape[1]), (m, base.shape[1]))
        out[start : start + m] = l2_normalize(base[i] + t * (base[j] - base[i]) + e)
    return out


def recall(approx: list[list], exact: list[list]) -> float:
    found = sum(
        len({h.position for h in a} & {h.position for h in e})
        for a, e in zip(approx, exact, strict=True)
    )
    return found / max(1, sum(len(e) for e in exact))


def latencies_ms(index: VectorIndex, queries: np.ndarray, allowed: np.ndarray | None) -> dict:
    times = []
    for q in queries:
        started = time.perf_counter()
        index.search(q, 10, allowed=allowed)
        times.append((time.perf_counter() - started) * 1000)
    return {"p50": float(np.percentile(times, 50)), "p99": float(np.percentile(times, 99))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--base", type=int, default=30_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--mix", type=float, default=0.5, help="max pull towards another row")
    parser.add_argument("--noise", type=float, default=0.6, help="norm of the added noise")
    parser.add_argument("--lists-per-sqrt-n", type=float, nargs="+", default=[2.0])
    parser.add_argument("--nprobe", type=int, nargs="+", default=[8, 16, 32, 64])
    parser.add_argument("--out", type=Path, default=Path("var/bench/recall_1m.json"))
    args = parser.parse_args()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    report: dict = {
        "rows": args.rows,
        "base_sentences": args.base,
        "queries": args.queries,
        "mix": args.mix,
        "noise": args.noise,
        "threads": faiss.omp_get_max_threads(),
        "machine": platform.processor(),
    }

    cache = args.out.parent / f"minilm_base_{args.base}.npy"
    embedder = SentenceTransformerEmbedder(BUNDLED_MINILM)
    base = base_vectors(cache, embedder.embed, args.base)
    queries = embedder.embed(query_sentences(args.queries, seed=2))
    data = expand(base, args.rows, mix=args.mix, noise=args.noise, seed=3)
    ids = np.char.add("r", np.arange(args.rows).astype(np.str_))
    print(f"data ready: {data.shape}", flush=True)

    started = time.perf_counter()
    exact = VectorIndex.build(ids, data, params=IndexParams(exact_threshold=args.rows + 1))
    report["exact_build_s"] = time.perf_counter() - started
    truth = exact.search(queries, 10)
    rng = np.random.default_rng(4)
    allowed = np.sort(rng.choice(args.rows, args.rows // 10, replace=False))
    truth_filtered = exact.search(queries, 10, allowed=allowed)
    report["exact_latency_ms"] = latencies_ms(exact, queries, None)
    report["exact_filtered_10pct_latency_ms"] = latencies_ms(exact, queries, allowed)
    del exact
    print(json.dumps(report, indent=1), flush=True)

    report["ivf"] = []
    for lists in args.lists_per_sqrt_n:
        params = IndexParams(lists_per_sqrt_n=lists)
        started = time.perf_counter()
        ivf = VectorIndex.build(ids, data, params=params)
        entry: dict = {
            "params": asdict(params),
            "nlist": ivf.faiss_index.nlist,
            "build_s": time.perf_counter() - started,
            "by_nprobe": [],
        }
        for nprobe in args.nprobe:
            probed = VectorIndex(ivf.faiss_index, ivf.ids, params=IndexParams(nprobe=nprobe))
            entry["by_nprobe"].append(
                {
                    "nprobe": nprobe,
                    "recall_at_10": recall(probed.search(queries, 10), truth),
                    "latency_ms": latencies_ms(probed, queries, None),
                    "filtered_10pct_recall_at_10": recall(
                        probed.search(queries, 10, allowed=allowed), truth_filtered
                    ),
                    "filtered_10pct_latency_ms": latencies_ms(probed, queries, allowed),
                }
            )
            print(json.dumps(entry["by_nprobe"][-1]), flush=True)
        report["ivf"].append(entry)
        del ivf, probed
    args.out.write_text(json.dumps(report, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
