"""Reindex Ray Job: Parquet -> Ray Data embedding actor pool -> FAISS -> new version -> switch.

    ray job submit --working-dir . -- python -m jobs.reindex --org acme-outdoor \
        [--collection products] [--full | --incremental]

Full mode embeds every row (for org_context, first re-reads the org's configured knowledge
source); incremental mode embeds only rows the current index lacks and drops rows that left
the data. A version becomes current only once complete: a failed or killed job leaves the
previous version serving. Progress: Ray Data's progress bars, and the job-run record
(rows done / total, state) in the chat store, also at GET /api/v1/qna/reindex/{jobId}.
"""

from __future__ import annotations

import argparse
import glob as globmod
import logging
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from crow import kb_source
from crow.datalake import DataLake
from crow.indexing import DATASET_OF, INDEX_COLLECTIONS, add_to_index, publish_index, texts_for
from crow.ingest import validate_rows
from crow.settings import AppSettings, EmbedderSettings
from indexes.store import IndexNotFoundError, IndexStore
from indexes.vector_index import IndexParams
from jobs.job_record import JobRecorder

log = logging.getLogger("jobs.reindex")


class EmbedBatch:
    """Ray Data actor: loads the embedder once, embeds each batch of rows."""

    def __init__(self, embedder: dict[str, Any], collection: str) -> None:
        from models.embedder import SentenceTransformerEmbedder

        self.collection = collection
        self.embedder = SentenceTransformerEmbedder.from_settings(EmbedderSettings(**embedder))

    def __call__(self, batch: pa.Table) -> dict[str, np.ndarray]:
        texts = texts_for(self.collection, batch.to_pydict())
        return {"id": np.asarray(batch["id"].to_pylist()), "vector": self.embedder.embed(texts)}


def embed_with_ray(
    settings: AppSettings, parquet: list[str], collection: str, rows: int, on_rows
) -> tuple[list[str], np.ndarray | None]:
    import ray.data

    cfg = settings.reindex
    # Blocks of a few batches: the actor pool shares the work and progress moves per block.
    blocks = max(1, min(1000, rows // (cfg.batch_size * 4)))
    # Reading is I/O: a small CPU reservation keeps it schedulable next to the Serve replicas.
    ds = ray.data.read_parquet(parquet, num_cpus=0.1).repartition(blocks).map_batches(
        EmbedBatch,
        fn_constructor_kwargs={
            "embedder": settings.embedder.model_dump(), "collection": collection,
        },
        batch_size=cfg.batch_size,
        batch_format="pyarrow",
        compute=ray.data.ActorPoolStrategy(size=cfg.pool_size),
        num_cpus=cfg.num_cpus,
        num_gpus=cfg.num_gpus,
    )  # fmt: skip
    ids: list[str] = []
    vectors: list[np.ndarray] = []
    for batch in ds.iter_batches(batch_size=None, batch_format="numpy"):
        ids.extend(str(i) for i in batch["id"])
        vectors.append(np.asarray(batch["vector"], dtype=np.float32))
        on_rows(len(ids))
    return ids, (np.concatenate(vectors) if vectors else None)


def reindex_collection(
    settings: AppSettings, org_id: str, collection: str, *, full: bool, recorder: JobRecorder
) -> dict[str, Any]:
    lake, store = DataLake(settings.data_dir), IndexStore(settings.index_dir)
    params = IndexParams(
        exact_threshold=settings.search.exact_threshold, nprobe=settings.search.nprobe
    )
    detail: dict[str, Any] = {"collection": collection, "mode": "full" if full else "incremental"}
    source = settings.orgs.get(org_id)
    if full and collection == "org_context" and source and source.knowledge_source:
        ks = source.knowledge_source
        loaded = kb_source.load(ks.kind, ks.location, ref=ks.ref)
        lake.write(
            org_id, "documents", [validate_rows("documents", loaded.documents)], mode="replace"
        )
        detail["source_revision"] = loaded.revision
    dataset = DATASET_OF[collection]
    table = lake.read_table(org_id, dataset)
    data_ids = table["id"].to_pylist()
    if full:
        todo, remove = data_ids, []
    else:
        try:
            indexed = set(str(i) for i in store.load(org_id, collection).ids if i)
        except IndexNotFoundError:
            indexed = set()
        todo = [i for i in data_ids if i not in indexed]
        remove = sorted(indexed - set(data_ids))
    recorder.update(state="running", rows_total=len(todo), rows_done=0,
                    detail=f"{collection}: embedding {len(todo)} rows")  # fmt: skip
    started = time.perf_counter()
    if todo:
        if full:
            source_paths = sorted(globmod.glob(lake.parquet_glob(org_id, dataset) or ""))
        else:
            source_paths = _subset_parquet(table, todo, settings.var_dir / "tmp")
        ids, vectors = embed_with_ray(
            settings, source_paths, collection, len(todo), lambda n: recorder.update(rows_done=n)
        )
    else:
        ids, vectors = [], None
    model = settings.embedder.model
    if full:
        dim = None if vectors is not None else _embedder_dim(settings)
        meta = publish_index(store, org_id, collection, ids, vectors, model=model, dim=dim,
                             params=params, extra=detail)  # fmt: skip
    elif vectors is not None or remove:
        vecs = (
            vectors
            if vectors is not None
            else np.zeros((0, store.meta(org_id, collection).dim), np.float32)
        )
        meta = add_to_index(
            store, org_id, collection, ids, vecs, model=model, remove=remove, params=params
        )
    else:
        meta = None
    if meta is not None:
        recorder.record_index(collection, meta)
    seconds = time.perf_counter() - started
    _record_metrics(collection, len(ids), seconds)
    return {**detail, "rows": len(ids), "removed": len(remove), "seconds": round(seconds, 2),
            "version": meta.version if meta else None}  # fmt: skip


def _record_metrics(collection: str, rows: int, seconds: float) -> None:
    try:
        from deployments.metrics import RayMetrics

        metrics = RayMetrics()
        metrics.inc("crow_reindex_rows_total", rows, collection=collection)
        metrics.observe("crow_reindex_seconds", seconds, collection=collection)
    except Exception as exc:  # metrics must never fail a reindex
        log.info("reindex metrics not recorded: %s", exc)


def _subset_parquet(table: pa.Table, ids: list[str], tmp_root: Path) -> list[str]:
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    tmp_root.mkdir(parents=True, exist_ok=True)
    path = tmp_root / f"reindex-{uuid.uuid4().hex}.parquet"
    pq.write_table(table.filter(pc.is_in(table["id"], value_set=pa.array(ids))), path)
    return [str(path)]


def _embedder_dim(settings: AppSettings) -> int:
    from models.embedder import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder.from_settings(settings.embedder).dim


def notify_retrievers(app: str = "crow") -> None:
    try:
        from ray import serve

        serve.get_deployment_handle("Retriever", app_name=app).refresh.remote().result(timeout_s=60)
    except Exception as exc:  # the app may not be running; retrievers poll CURRENT anyway
        log.info("retrievers not notified (%s); they pick up the new version on next search", exc)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--org", required=True)
    parser.add_argument("--collection", choices=INDEX_COLLECTIONS, action="append",
                        help="default: all four")  # fmt: skip
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--full", action="store_true", default=True)
    mode.add_argument("--incremental", action="store_true")
    parser.add_argument("--config", type=Path, default=Path("serve_config.yaml"))
    parser.add_argument(
        "--job-id", default=os.environ.get("CROW_JOB_ID") or f"job_{uuid.uuid4().hex[:20]}"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")

    import ray

    # "--config none": settings come from CROW_* variables only (how ReindexControl submits).
    settings = (
        AppSettings.from_serve_config(args.config) if args.config.is_file() else AppSettings()
    )
    if not DataLake(settings.data_dir).org_exists(args.org):
        print(f"unknown organization {args.org!r}", file=sys.stderr)
        return 2
    ray.init(address=os.environ.get("RAY_ADDRESS"), ignore_reinit_error=True, log_to_driver=True)
    recorder = JobRecorder(settings, args.org, args.job_id)
    done = 0
    try:
        for collection in args.collection or INDEX_COLLECTIONS:
            result = reindex_collection(settings, args.org, collection, full=not args.incremental,
                                        recorder=recorder)  # fmt: skip
            done += result["rows"]
            print(f"{args.org}/{collection}: {result}", flush=True)
        notify_retrievers()
        recorder.update(state="succeeded", rows_done=done, detail="done")
        return 0
    except BaseException as exc:
        recorder.update(state="failed" if isinstance(exc, Exception) else "stopped",
                        detail=f"{type(exc).__name__}: {exc}"[:1000])  # fmt: skip
        raise
    finally:
        recorder.close()


if __name__ == "__main__":
    sys.exit(main())
