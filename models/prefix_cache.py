"""Reuse the KV cache of the previous generation for the prompt prefix they share.

Requests of the agent share a long prefix (system prompt + tool schemas, then earlier
turns); on CPU, recomputing it dominates time-to-first-token. One entry is kept: the
last generated sequence and its cache. Only the generation thread may touch it.
"""

from __future__ import annotations

from typing import Any


class PrefixCache:
    def __init__(self, *, min_tokens: int = 16) -> None:
        self._min_tokens = min_tokens
        self._ids: Any = None
        self._cache: Any = None

    def take(self, input_ids: Any) -> tuple[Any, int]:
        """Hand out the stored cache cropped to the shared prefix (or None) and its length.

        The entry is removed: generation extends the cache in place, and a failed
        generation must not leave a half-updated cache behind.
        """
        ids, cache = self._ids, self._cache
        self._ids = self._cache = None
        if cache is None:
            return None, 0
        cached = int(cache.get_seq_length())
        limit = min(cached, int(ids.shape[0]), int(input_ids.shape[0]) - 1)
        mismatch = (ids[:limit] != input_ids[:limit]).nonzero()
        common = int(mismatch[0, 0]) if mismatch.numel() else limit
        if common < self._min_tokens:
            return None, 0
        if common < cached:
            cache.crop(common - cached)  # a negative count drops that many trailing tokens
        return cache, common

    def keep(self, sequence: Any, cache: Any) -> None:
        """Store the full generated sequence (prompt + output) and its cache."""
        self._ids, self._cache = sequence, cache
