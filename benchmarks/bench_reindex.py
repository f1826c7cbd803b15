"""Reindex wall time: the Ray Job path vs a single-process encode-and-add loop."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.bench_common import ORG, load, log, seed


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
