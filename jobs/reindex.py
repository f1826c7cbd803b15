"""Reindex Ray Job: Parquet -> Ray Data embedding actor pool -> FAISS -> new version -> switch.

    ray job submit --working-dir . -- python -m jobs.reindex --org acme-outdoor \
        [--collection products] [--full | --incremental]

Full mode embeds every row (for org_context, first re-reads the org's configured knowledge
source, whose documents replace only the source's own: crow.retrieval.index_build), then catches up with
rows written while it ran and publishes under the collection's lock; incremental mode
embeds only rows the current index lacks and drops rows that left the data. A version
becomes current only once complete: a failed or killed job leaves the previous version
serving. Progress: Ray Data's progress bars, and the job-run record
(rows done / total, state) in the chat store, also at GET /api/v1/qna/reindex/{jobId}.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from crow.config_source import CONFIG_HELP, ConfigError, settings_from_config_arg
from crow.data.lake import DataLake
from crow.retrieval.embed_text import embed_distinct, texts_for
from crow.retrieval.index_build import (
    DATASET_OF,
    INDEX_COLLECTIONS,
    add_to_index,
    index_params,
    merge_source,
    publish_full_build,
    read_snapshot,
    source_table,
)
from crow.retrieval.index_control import describe_source, load_source_records
from crow.retrieval.stages import Stages
from crow.settings import AppSettings, EmbedderSettings
from crow.settings_env import JOB_ID_ENV
from indexes.store import IndexMeta, IndexNotFoundError, IndexStore
from jobs.job_record import JobRecorder
from models.embedder import EmbeddingDimError, check_index_dim, embedding_dim, same_model

log = logging.getLogger("jobs.reindex")


class EmbedBatch:
    """Ray Data actor: loads the embedder once, embeds each batch of rows."""

    def __init__(self, embedder: dict[str, Any], collection: str) -> None:
        from models.embedder import SentenceTransformerEmbedder

        self.collection = collection
        self.embedder = SentenceTransformerEmbedder.from_settings(EmbedderSettings(**embedder))

    def __call__(self, batch: pa.Table) -> dict[str, np.ndarray]:
        texts = texts_for(self.collection, batch.to_pydict())
        vectors = embed_distinct(self.embedder.embed, texts, batch_size=max(len(texts), 1))
        return {"id": np.asarray(batch["id"].to_pylist()), "vector": vectors}


def embed_with_ray(
    settings: AppSettings,
    parquet: list[str],
    collection: str,
    rows: int,
    on_rows: Callable[[int], None],
) -> tuple[list[str], np.ndarray | None]:
    import ray.data

    cfg = settings.reindex
    # The job record carries the progress: Ray Data's console bars only cost time (about 3%
    # of the rows/s on 2 cores, measured side by side).
    ray.data.DataContext.get_current().enable_progress_bars = False
    # Blocks of a few batches: the actor pool shares the work and progress moves per block.
    blocks = max(1, min(1000, rows // (cfg.batch_size * 4)))
    # Reading is I/O: a small CPU reservation keeps it schedulable next to the Serve replicas.
    ds = (
        ray.data.read_parquet(parquet, num_cpus=0.1)
        .repartition(blocks)
        .map_batches(
            EmbedBatch,
            fn_constructor_kwargs={
                "embedder": settings.embedder.model_dump(),
                "collection": collection,
            },
            batch_size=cfg.batch_size,
            batch_format="pyarrow",
            compute=ray.data.ActorPoolStrategy(size=cfg.pool_size),
            num_cpus=cfg.num_cpus,
            num_gpus=float(cfg.num_gpus),  # a fraction: actors share a GPU (bge-m3 fp16 is ~1.1 GB)
        )
    )
    ids: list[str] = []
    vectors: list[np.ndarray] = []
    for batch in ds.iter_batches(batch_size=None, batch_format="numpy"):
        ids.extend(str(i) for i in batch["id"])
        vectors.append(np.asarray(batch["vector"], dtype=np.float32))
        on_rows(len(ids))
    return ids, (np.concatenate(vectors) if vectors else None)


def reindex_collection(
    settings: AppSettings,
    org_id: str,
    collection: str,
    *,
    full: bool,
    recorder: JobRecorder,
    stages: Stages | None = None,
) -> dict[str, Any]:
    stages = stages or Stages()
    with stages.collection():
        return _reindex_collection(settings, org_id, collection, full, recorder, stages)


def _reindex_collection(
    settings: AppSettings,
    org_id: str,
    collection: str,
    full: bool,
    recorder: JobRecorder,
    stages: Stages,
) -> dict[str, Any]:
    lake, store = DataLake(settings.data_dir), IndexStore(settings.index_dir)
    params = index_params(settings.search)
    detail: dict[str, Any] = {"collection": collection, "mode": "full" if full else "incremental"}
    current = _current_meta(store, org_id, collection)
    indexed = (current.model, current.dim) if current is not None else None
    if note := _check_model(settings.embedder, current, collection, full=full):
        detail["model_change"] = note
    source = None
    if full and collection == "org_context":
        recorder.update(detail="org_context: reading the knowledge source")
        with stages.timed("source_s"):
            loaded = load_source_records(settings, org_id)
        if loaded:
            records, info = loaded
            detail.update(info)
            source = source_table(records)
            recorder.update(detail=describe_source(info))
    dataset = DATASET_OF[collection]
    started = time.perf_counter()

    def rows_done(n: int) -> None:
        stages.first_vectors()
        recorder.update(rows_done=n)

    model = settings.embedder.model
    tmp_root = settings.var_dir / "tmp"
    meta, remove = None, []
    if full:
        # The source's documents replace only the source's own (see crow.retrieval.index_build); other
        # collections embed straight from the dataset's Parquet files.
        now = read_snapshot(lake, org_id, dataset)
        table = merge_source(now.table, source) if source is not None else now.table
        recorder.update(
            state="running",
            rows_total=table.num_rows,
            rows_done=0,
            detail=f"{collection}: embedding {table.num_rows} rows",
        )

        def embed_table(rows: pa.Table, paths: list[str] | None = None) -> np.ndarray:
            with stages.timed("embed_s"):
                return _embed_table(settings, collection, rows, paths, tmp_root, rows_done)

        direct = list(now.fingerprint) if source is None and dataset != "documents" else None
        vectors = embed_table(table, direct) if table.num_rows else None
        meta = publish_full_build(
            lake,
            store,
            org_id,
            collection,
            now.fingerprint,
            table,
            vectors,
            embed_table,
            model=model,
            dim=lambda: embedding_dim(settings.embedder, indexed),
            params=params,
            source=source,
            extra=detail,
        )
        rows = table.num_rows
    else:
        table = lake.read_table(org_id, dataset)
        data_ids = table["id"].to_pylist()
        try:
            indexed_ids = set(str(i) for i in store.load(org_id, collection).ids if i)
        except IndexNotFoundError:
            indexed_ids = set()
        todo = [i for i in data_ids if i not in indexed_ids]
        remove = sorted(indexed_ids - set(data_ids))
        recorder.update(
            state="running",
            rows_total=len(todo),
            rows_done=0,
            detail=f"{collection}: embedding {len(todo)} rows",
        )
        ids: list[str] = []
        vectors = None
        if todo:
            subset = table.filter(pc.is_in(table["id"], value_set=pa.array(todo)))
            with stages.timed("embed_s"):
                vectors = _embed_table(settings, collection, subset, None, tmp_root, rows_done)
            ids = cast(list[str], subset["id"].to_pylist())  # a required column: no nulls
        if vectors is not None or remove:
            vecs = (
                vectors
                if vectors is not None
                else np.zeros((0, store.meta(org_id, collection).dim), np.float32)
            )
            meta = add_to_index(
                store, org_id, collection, ids, vecs, model=model, remove=remove, params=params
            )
        rows = len(ids)
    if meta is not None:
        recorder.record_index(collection, meta)
    seconds = time.perf_counter() - started
    _record_metrics(collection, rows, seconds)
    return {
        **detail,
        "rows": rows,
        "removed": len(remove),
        "seconds": round(seconds, 2),
        "version": meta.version if meta else None,
    }


def _embed_table(
    settings: AppSettings,
    collection: str,
    table: pa.Table,
    paths: list[str] | None,
    tmp_root: Path,
    on_rows: Callable[[int], None],
) -> np.ndarray:
    """Vectors of `table`'s rows, in its order, from the Ray Data embedding pool; `paths`:
    Parquet files that hold exactly these rows (else they are written to a temp file)."""
    tmp = None
    if paths is None:
        tmp_root.mkdir(parents=True, exist_ok=True)
        tmp = tmp_root / f"reindex-{uuid.uuid4().hex}.parquet"
        pq.write_table(table, tmp)
        paths = [str(tmp)]
    try:
        ids, vectors = embed_with_ray(settings, paths, collection, table.num_rows, on_rows)
    finally:
        if tmp is not None:
            tmp.unlink(missing_ok=True)
    if vectors is None:
        raise RuntimeError(f"the embedding pool returned no vectors for {table.num_rows} rows")
    cfg = settings.embedder
    if cfg.dim is not None and vectors.shape[1] != cfg.dim:
        raise EmbeddingDimError(
            f"embedder.dim is {cfg.dim} but {cfg.model} produced {vectors.shape[1]}-d vectors: "
            f"set embedder.dim to {vectors.shape[1]}"
        )
    at = {doc_id: pos for pos, doc_id in enumerate(ids)}
    try:
        order = [at[str(doc_id)] for doc_id in table["id"].to_pylist()]
    except KeyError as exc:
        raise RuntimeError(f"the embedding pool lost row {exc}") from None
    return vectors[order]


def _record_metrics(collection: str, rows: int, seconds: float) -> None:
    try:
        from deployments.metrics import RayMetrics

        metrics = RayMetrics()
        metrics.inc("crow_reindex_rows_total", rows, collection=collection)
        metrics.observe("crow_reindex_seconds", seconds, collection=collection)
    except Exception as exc:  # metrics must never fail a reindex
        log.info("reindex metrics not recorded: %s", exc)


def _current_meta(store: IndexStore, org_id: str, collection: str) -> IndexMeta | None:
    try:
        return store.meta(org_id, collection)
    except IndexNotFoundError:
        return None


def _check_model(
    cfg: EmbedderSettings, current: IndexMeta | None, collection: str, *, full: bool
) -> str | None:
    """Refuse a build the current index contradicts, before any embedding: `embedder.dim`
    against an index of the same model, and an incremental reindex over an index of another
    model (mixed vectors). A full reindex is how the model changes: it replaces the index,
    and what it returns says so (the job's detail, the version's meta)."""
    if current is None:
        return None
    check_index_dim(cfg, (current.model, current.dim))
    if same_model(current.model, cfg.model):
        return None
    change = (
        f"{collection}: the current index holds {current.model} vectors ({current.dim}-d), "
        f"embedder.model is {cfg.model}"
    )
    if not full:
        raise EmbeddingDimError(f"{change}: run a full reindex to change the model")
    log.warning("%s: the full reindex replaces that index", change)
    return f"{change}: replaced by a full reindex"


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
    parser.add_argument(
        "--collection", choices=INDEX_COLLECTIONS, action="append", help="default: all four"
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--full", action="store_true", default=True)
    mode.add_argument("--incremental", action="store_true")
    parser.add_argument("--config", default="serve_config.yaml", help=CONFIG_HELP)
    parser.add_argument(
        "--job-id", default=os.environ.get(JOB_ID_ENV) or f"job_{uuid.uuid4().hex[:20]}"
    )
    args = parser.parse_args(argv)
    try:  # "--config env": the app args in CROW_APP_ARGS (how ReindexControl submits)
        settings = settings_from_config_arg(args.config)
    except ConfigError as exc:
        parser.error(str(exc))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")

    import ray

    if not DataLake(settings.data_dir).org_exists(args.org):
        print(f"unknown organization {args.org!r}", file=sys.stderr)
        return 2
    ray.init(address=os.environ.get("RAY_ADDRESS"), ignore_reinit_error=True, log_to_driver=True)
    recorder = JobRecorder(settings, args.org, args.job_id)
    stages = Stages(recorder.created_at)
    done, notes = 0, ["done"]
    try:
        for collection in args.collection or INDEX_COLLECTIONS:
            result = reindex_collection(
                settings,
                args.org,
                collection,
                full=not args.incremental,
                recorder=recorder,
                stages=stages,
            )
            recorder.update(timings=stages.record())
            done += result["rows"]
            if "source_kind" in result:
                notes.append(describe_source(result))
            if "model_change" in result:
                notes.append(result["model_change"])
            print(f"{args.org}/{collection}: {result}", flush=True)
        notify_retrievers()
        recorder.update(
            state="succeeded",
            rows_done=done,
            detail="; ".join(notes)[:1000],
            timings=stages.record(),
        )
        return 0
    except BaseException as exc:
        recorder.update(
            state="failed" if isinstance(exc, Exception) else "stopped",
            detail=f"{type(exc).__name__}: {exc}"[:1000],
            timings=stages.record(),
        )
        raise
    finally:
        recorder.close()


if __name__ == "__main__":
    sys.exit(main())
