"""The one-entry prefix KV cache: reuse only the shared prefix, never a stale entry."""

from __future__ import annotations

import torch

from models.prefix_cache import PrefixCache


class FakeCache:
    def __init__(self, length: int) -> None:
        self.length = length

    def get_seq_length(self) -> int:
        return self.length

    def crop(self, length: int) -> None:
        assert length < 0, "transformers 5 accepts only a negative count of tokens to drop"
        self.length += length


def ids(*values: int) -> torch.Tensor:
    return torch.tensor(values)


def test_shared_prefix_is_reused_and_entry_consumed() -> None:
    prefix = PrefixCache(min_tokens=2)
    prefix.keep(ids(1, 2, 3, 4, 9), FakeCache(4))
    cache, reused = prefix.take(ids(1, 2, 3, 7, 8))
    assert reused == 3 and cache.length == 3
    assert prefix.take(ids(1, 2, 3, 7, 8)) == (None, 0)


def test_at_least_one_prompt_token_is_left_to_compute() -> None:
    prefix = PrefixCache(min_tokens=1)
    prefix.keep(ids(1, 2, 3, 4), FakeCache(4))
    cache, reused = prefix.take(ids(1, 2, 3))
    assert reused == 2 and cache.length == 2


def test_short_overlap_is_not_reused() -> None:
    prefix = PrefixCache(min_tokens=3)
    prefix.keep(ids(1, 2, 5, 6), FakeCache(4))
    assert prefix.take(ids(1, 2, 3, 4)) == (None, 0)
