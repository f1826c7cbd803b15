"""A build embeds each distinct text once and gives every row its text's vector."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from crow.retrieval.embed_text import embed_distinct, embed_rows_with, texts_for


class CountingEmbed:
    """A deterministic fake encoder (a text's vector depends on the text alone) that records
    every batch it is given."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []

    def __call__(self, texts: list[str]) -> np.ndarray:
        self.batches.append(list(texts))
        return np.array([[len(t), sum(map(ord, t)) % 97, 1.0] for t in texts], dtype=np.float32)


def test_each_distinct_text_is_embedded_once_and_rows_keep_their_order() -> None:
    texts = ["tent", "a longer text", "tent", "kayak", "a longer text", "tent"]
    embed = CountingEmbed()
    shares: list[float] = []
    vectors = embed_distinct(embed, texts, batch_size=2, on_progress=shares.append)
    sent = [t for batch in embed.batches for t in batch]
    assert sorted(sent) == ["a longer text", "kayak", "tent"]  # once each
    assert [len(t) for t in sent] == sorted(len(t) for t in sent)  # shortest first
    assert all(len(b) <= 2 for b in embed.batches)
    np.testing.assert_array_equal(vectors, CountingEmbed()(texts))  # as if row by row
    assert shares[-1] == 1.0 and shares == sorted(shares)


def test_rows_progress_reaches_the_row_count() -> None:
    table = pa.table(
        {
            "id": [f"int-{i}" for i in range(10)],
            "channel": ["web"] * 10,
            "text": ["viewed the tent page"] * 7 + ["asked about kayaks", "hi", "hi"],
        }
    )
    embed, progress = CountingEmbed(), []
    rows = embed_rows_with(
        embed, "interactions", batch_size=1, on_progress=lambda d, t: progress.append((d, t))
    )
    vectors = rows(table)
    assert sum(len(b) for b in embed.batches) == 3
    assert progress[-1] == (10, 10)
    np.testing.assert_array_equal(
        vectors, CountingEmbed()(texts_for("interactions", table.to_pydict()))
    )
    with pytest.raises(ValueError, match="no rows"):
        rows(table.slice(0, 0))
