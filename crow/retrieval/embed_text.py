"""What a row of each searchable collection is embedded as, and embedding a table's rows.

Both reindex paths use it: the in-process build (``embed_rows_with``) and the Ray Data
actors of jobs/reindex.py (``embed_distinct`` per batch).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

TEXT_COLUMNS: dict[str, tuple[str, ...]] = {
    "products": ("title", "category", "description"),
    "interactions": ("channel", "text"),
    "patterns": ("type", "title", "description"),
    "org_context": ("title", "context_type", "body"),
}
MAX_TEXT_CHARS = 2000  # beyond this the small embedder truncates anyway


def texts_for(collection: str, columns: Mapping[str, Sequence[Any]]) -> list[str]:
    """One embedding text per row, from a column-oriented batch."""
    parts = [columns[name] for name in TEXT_COLUMNS[collection]]
    return [
        ". ".join(str(v) for v in values if v)[:MAX_TEXT_CHARS]
        for values in zip(*parts, strict=True)
    ]


EmbedRows = Callable[[pa.Table], np.ndarray]
"""Vectors for the rows of a table, in its row order."""


def embed_distinct(
    embed: Callable[[list[str]], np.ndarray],
    texts: Sequence[str],
    *,
    batch_size: int = 256,
    on_progress: Callable[[float], None] | None = None,
) -> np.ndarray:
    """Vectors of `texts` in their order, each distinct text embedded once.

    Rows repeat their text often (a demo organization's 20,000 interactions have about
    10,000 distinct texts; camera events and short posts repeat in real data too), and a
    text's vector does not depend on the rows around it. The distinct texts go to `embed`
    shortest first, `batch_size` at a time, so a batch pads its texts to similar lengths.
    `on_progress` gets the share of the distinct texts embedded so far, from 0 to 1.
    """
    distinct = sorted(set(texts), key=lambda t: (len(t), t))
    if not distinct:
        raise ValueError("no texts to embed")
    chunks = []
    for start in range(0, len(distinct), batch_size):
        chunks.append(np.asarray(embed(distinct[start : start + batch_size]), dtype=np.float32))
        if on_progress:
            on_progress(min(start + batch_size, len(distinct)) / len(distinct))
    vectors = np.concatenate(chunks)
    row_of = {text: i for i, text in enumerate(distinct)}
    return vectors[[row_of[t] for t in texts]]


def embed_rows_with(
    embed: Callable[[list[str]], np.ndarray],
    collection: str,
    *,
    batch_size: int = 256,
    on_progress: Callable[[int, int], None] | None = None,
) -> EmbedRows:
    """An EmbedRows that embeds in this process, the table's distinct texts `batch_size` at
    a time (``embed_distinct``); `on_progress` gets (rows done, rows) in proportion."""

    def run(table: pa.Table) -> np.ndarray:
        total = table.num_rows
        if not total:
            raise ValueError("no rows to embed")
        texts = texts_for(collection, table.to_pydict())

        def progress(share: float) -> None:
            if on_progress:
                on_progress(round(total * share), total)

        return embed_distinct(embed, texts, batch_size=batch_size, on_progress=progress)

    return run
