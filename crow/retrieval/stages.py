"""Where a reindex spends its time: seconds per stage, kept in the job's record.

The same stages for both ways a reindex runs (the Ray Job, and a small reindex in the
ReindexControl replica), summed over the job's collections:

    start_s         from the job's record to the work starting (a Ray Job's start-up)
    source_s        reading the organization's knowledge source (full org_context reindexes)
    embed_s         embedding the rows (a Ray Job: the Ray Data pipeline, actors included)
    embed_first_s   until the first vectors came back (model load, pipeline start)
    index_s         everything else of a build: reading Parquet, FAISS, writing, publishing
    total_s         the whole job, from its record's creation
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

import numpy as np

Embed = Callable[[list[str]], np.ndarray]


class Stages:
    def __init__(self, created_at: str | None = None) -> None:
        """``created_at``: the job record's creation time (ISO); start_s and total_s count
        from it (without it, from now)."""
        self._t0 = time.perf_counter()
        self._ago = _seconds_since(created_at) if created_at else 0.0
        self.seconds: dict[str, float] = {"start_s": self._ago}

    def add(self, stage: str, seconds: float) -> None:
        self.seconds[stage] = self.seconds.get(stage, 0.0) + seconds

    @contextmanager
    def timed(self, stage: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.add(stage, time.perf_counter() - started)

    def timed_embed(self, embed: Embed) -> Embed:
        """``embed`` whose calls count as embed_s (and the first one's end as embed_first_s)."""

        def timed(texts: list[str]) -> np.ndarray:
            started = time.perf_counter()
            out = embed(texts)
            self.add("embed_s", time.perf_counter() - started)
            self.first_vectors()
            return out

        return timed

    def first_vectors(self) -> None:
        """Vectors came back: the first time, that is embed_first_s."""
        self.seconds.setdefault("embed_first_s", self._ago + time.perf_counter() - self._t0)

    @contextmanager
    def collection(self) -> Iterator[None]:
        """One collection's whole step (source, embedding and index work): what its source
        and embedding stages did not take is index_s."""
        with self.timed("_steps_s"):
            yield

    def record(self) -> dict[str, float]:
        """The timings as the job record keeps them: index_s net of source and embedding."""
        out = dict(self.seconds)
        steps = out.pop("_steps_s", 0.0)
        out["index_s"] = max(0.0, steps - out.get("embed_s", 0.0) - out.get("source_s", 0.0))
        out["total_s"] = self._ago + time.perf_counter() - self._t0
        return {k: round(v, 2) for k, v in out.items()}


def _seconds_since(iso: str) -> float:
    then = datetime.fromisoformat(iso)
    if then.tzinfo is None:
        then = then.replace(tzinfo=UTC)
    return max(0.0, (datetime.now(UTC) - then).total_seconds())
