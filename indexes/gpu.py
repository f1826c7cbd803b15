"""Optional GPU placement of FAISS indexes (faiss-gpu on the GPU profile)."""

from __future__ import annotations

import logging

import faiss

log = logging.getLogger(__name__)


def gpu_count() -> int:
    """GPUs visible to FAISS (0 with faiss-cpu, which lacks ``get_num_gpus``)."""
    get_num_gpus = getattr(faiss, "get_num_gpus", None)
    return int(get_num_gpus()) if get_num_gpus is not None else 0


def maybe_to_gpu(index: faiss.Index, use_gpu: bool) -> faiss.Index:
    """Copy ``index`` to all visible GPUs when asked and possible; else return it as is."""
    if not use_gpu:
        log.info("FAISS index (%d vectors) stays on CPU (use_gpu=False)", index.ntotal)
        return index
    n_gpus = gpu_count()
    if n_gpus == 0 or not hasattr(faiss, "index_cpu_to_all_gpus"):
        log.warning("use_gpu=True but FAISS sees no GPU (faiss-cpu build?); searching on CPU")
        return index
    log.info("moving FAISS index (%d vectors) to %d GPU(s)", index.ntotal, n_gpus)
    return faiss.index_cpu_to_all_gpus(index)
