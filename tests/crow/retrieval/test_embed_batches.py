"""Batches in flight: the vectors come back in row order and progress only moves forward,
with never more than `in_flight` calls at once."""

from __future__ import annotations

import threading
import time

import numpy as np
import pyarrow as pa
import pytest

from crow.retrieval.index_build import embed_rows_with


class CountingEmbed:
    """Vectors that encode the text; records the most calls it saw at once."""

    def __init__(self) -> None:
        self.running = self.most = 0
        self.lock = threading.Lock()

    def __call__(self, texts: list[str]) -> np.ndarray:
        with self.lock:
            self.running += 1
            self.most = max(self.most, self.running)
        time.sleep(0.01 * (len(texts) % 3))  # later batches may finish first
        with self.lock:
            self.running -= 1
        return np.array([[float(len(t)), float(hash(t) % 997)] for t in texts], dtype=np.float32)


@pytest.mark.parametrize("in_flight", [1, 2, 3])
def test_batches_in_flight_keep_row_order(in_flight):
    table = pa.table(
        {
            "id": [f"p{i}" for i in range(23)],
            "title": [f"product {'x' * i}" for i in range(23)],
            "description": ["d"] * 23,
            "category": ["tents"] * 23,
        }
    )
    seen: list[int] = []
    embed = CountingEmbed()
    run = embed_rows_with(
        embed,
        "products",
        batch_size=4,
        in_flight=in_flight,
        on_progress=lambda n, _: seen.append(n),
    )
    vectors = run(table)
    expected = embed_rows_with(CountingEmbed(), "products", batch_size=23)(table)
    np.testing.assert_array_equal(vectors, expected)
    assert seen == sorted(seen) and seen[-1] == 23 and len(seen) == 6
    assert embed.most <= in_flight
