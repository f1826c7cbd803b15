"""Reindex wall time: the Ray Job path vs a single-process encode-and-add loop.

``ray_path`` and ``single_path`` each index the interactions of one seeded data root;
``bench_reindex`` runs both over the same rows (retrieval_bench), ``benchmarks.run_all`` runs
the single process on a smaller sample first and the Ray path over the full row count.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from benchmarks.bench_common import ORG, load, log, seed


class NoopRecorder:
    """Stands in for ``jobs.job_record.JobRecorder``: a progress bar, and the time all rows
    were done."""

    def __init__(self, label: str, *, progress: bool = True) -> None:
        from tqdm import tqdm

        self.label = label
        self.total = 0
        self.done_at: float | None = None
        self.bar = tqdm(desc=f"reindex {label}", unit="rows", disable=not progress)

    def update(self, **kw: Any) -> None:
        if "rows_total" in kw:
            self.total = self.bar.total = kw["rows_total"]
        done = kw.get("rows_done")
        if done is not None and self.total:
            if done >= self.total and self.done_at is None:
                self.done_at = time.perf_counter()
            self.bar.update(done - self.bar.n)
            self.bar.set_postfix(load=load(), refresh=False)

    def record_index(self, collection: str, meta: Any) -> None:
        pass

    def close(self) -> None:
        self.bar.close()


def ray_path(
    work: Path, rows: int, settings_args: dict, *, progress: bool = True
) -> dict[str, Any]:
    """``jobs.reindex.reindex_collection`` (Ray Data + actor pool) in this process's Ray
    instance, over ``rows`` seeded interactions; indexes to ``work/indexes-ray``."""
    from crow.settings import AppSettings
    from jobs.reindex import reindex_collection

    data_root = work / f"data-{rows}"
    seed_s = seed(data_root, rows)
    log(f"reindex: data root {data_root} ready ({rows:,} interactions, seeded in {seed_s:.1f}s)")
    settings = AppSettings.from_args(
        {
            **settings_args,
            "var_dir": str(work / "var-ray"),
            "data_root": str(data_root),
            "index_root": str(work / "indexes-ray"),
        }
    )
    rec = NoopRecorder("ray", progress=progress)
    load_before = load()
    started = time.perf_counter()
    try:
        result = reindex_collection(settings, ORG, "interactions", full=True, recorder=rec)
    finally:
        rec.close()
    wall = time.perf_counter() - started
    out = {
        "wall_s": round(wall, 1),
        "rows_per_s": round(result["rows"] / wall, 1),
        "embed_done_s": round(rec.done_at - started, 1) if rec.done_at else None,
        "rows": result["rows"],
        "pool_size": settings.reindex.pool_size,
        "actor_num_cpus": settings.reindex.num_cpus,
        "batch_size": settings.reindex.batch_size,
        "loadavg_1m": [load_before, load()],
        "index_dir": str(settings.index_dir),
        "data_root": str(data_root),
    }
    log(f"reindex ray: {json.dumps(out)}")
    return out


def single_path(work: Path, rows: int, model: str, *, progress: bool = True) -> dict[str, Any]:
    """The single-process ``crow.retrieval.index_build.build_index`` loop over ``rows`` seeded
    interactions (model load included in wall_s); indexes to ``work/indexes-single``."""
    from crow.data.lake import DataLake
    from crow.retrieval.index_build import build_index
    from indexes.store import IndexStore
    from models.embedder import SentenceTransformerEmbedder

    data_root = work / f"data-{rows}"
    seed(data_root, rows)
    rec = NoopRecorder("single", progress=progress)
    rec.update(rows_total=rows)
    load_before = load()
    started = time.perf_counter()
    try:
        embedder = SentenceTransformerEmbedder(model)
        model_load = time.perf_counter() - started
        meta = build_index(
            DataLake(data_root),
            IndexStore(work / "indexes-single"),
            embedder.embed,
            ORG,
            "interactions",
            model=model,
            on_progress=lambda done, total: rec.update(rows_done=done),
        )
    finally:
        rec.close()
    wall = time.perf_counter() - started
    encode = encode_rate(embedder.embed, DataLake(data_root), min(rows, ENCODE_SAMPLE))
    build_rate = meta.count / (wall - model_load)
    out = {
        "wall_s": round(wall, 1),
        "rows_per_s": round(meta.count / wall, 1),
        "build_rows_per_s": round(build_rate, 1),
        "encode_rows_per_s": round(encode, 1),
        "ratio_build_over_encode": round(build_rate / encode, 3),
        "embed_done_s": round(rec.done_at - started, 1) if rec.done_at else None,
        "model_load_s": round(model_load, 1),
        "rows": meta.count,
        "batch_size": 256,
        "loadavg_1m": [load_before, load()],
        "index_kind": meta.kind,
        "index_dir": str(work / "indexes-single"),
        "data_root": str(data_root),
    }
    log(f"reindex single: {json.dumps(out)}")
    return out


ENCODE_SAMPLE = 5000
"""Rows whose texts the raw encode rate is measured on (the first of the collection)."""


def encode_rate(embed: Callable[[list[str]], np.ndarray], lake: Any, rows: int) -> float:
    """Rows/s of the embedder alone on the interactions' own texts, 256 at a time (the build's
    batch), measured right after the build in the same process: the bound a build can reach."""
    from crow.retrieval.embed_text import texts_for

    table = lake.read_table(ORG, "interactions").slice(0, rows)
    texts = texts_for("interactions", table.to_pydict())
    started = time.perf_counter()
    for start in range(0, len(texts), 256):
        embed(texts[start : start + 256])
    return len(texts) / (time.perf_counter() - started)


def max_vector_diff(
    index_dir: str, data_root: str, embed: Callable[[list[str]], np.ndarray], samples: int = 200
) -> float:
    """Largest difference between an index's vectors and plain in-process encodes of the same
    rows' texts (a sample of ids spread over the index)."""
    import pyarrow.compute as pc

    from crow.data.lake import DataLake
    from crow.retrieval.embed_text import texts_for
    from indexes.store import IndexStore

    index = IndexStore(Path(index_dir)).load(ORG, "interactions")
    ids = [str(i) for i in index.ids[:: max(1, index.count // samples)]]
    table = DataLake(Path(data_root)).read_table(ORG, "interactions")
    table = table.filter(pc.is_in(table["id"], value_set=pa.array(ids)))
    texts = dict(
        zip(table["id"].to_pylist(), texts_for("interactions", table.to_pydict()), strict=True)
    )
    stored = index.vectors(np.array([index.position_of(i) for i in ids]))
    return float(np.abs(stored - embed([texts[i] for i in ids])).max())


def bench_reindex(args, work: Path, rows: int, settings_args: dict) -> dict[str, Any]:
    """Both paths over the same ``rows``: the Ray Job path first, then the single process."""
    from crow.settings import AppSettings

    model = AppSettings.from_args(settings_args).embedder.model
    out: dict[str, Any] = {"rows": rows, "order": "ray job path first, then single process"}
    out["ray_job"] = ray_path(work, rows, settings_args)
    out["single_process"] = single_path(work, rows, model)
    out["ratio_ray_over_single_rows_per_s"] = round(
        out["ray_job"]["rows_per_s"] / out["single_process"]["rows_per_s"], 3
    )
    from models.embedder import SentenceTransformerEmbedder

    embed = SentenceTransformerEmbedder(model).embed
    out["max_abs_diff_vectors_sample"] = max(
        max_vector_diff(x["index_dir"], x["data_root"], embed)
        for x in (out["ray_job"], out["single_process"])
    )
    out["index_kind"] = out["single_process"]["index_kind"]
    return out
