"""A bounded in-memory response cache for deterministic requests (temperature 0).

Identical requests (same model, messages, tools and params) are answered from memory, as an
AI gateway's cache would. Hits and misses are counted for the metrics.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Sequence

from models.messages import AssistantTurn, Message, ModelParams, ToolSpec


class ResponseCache:
    def __init__(self, max_entries: int = 256) -> None:
        self.max_entries = max_entries
        self.hits = 0
        self.misses = 0
        self._entries: OrderedDict[str, AssistantTurn] = OrderedDict()

    @staticmethod
    def key(
        model: str, messages: Sequence[Message], tools: Sequence[ToolSpec], params: ModelParams
    ) -> str | None:
        """None when the request is not deterministic (temperature above 0)."""
        if params.temperature > 0:
            return None
        payload = {
            "model": model,
            "messages": [m.model_dump(mode="json") for m in messages],
            "tools": [t.model_dump(mode="json") for t in tools],
            "params": params.model_dump(mode="json", exclude={"timeout_s"}),
        }
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()

    def get(self, key: str | None) -> AssistantTurn | None:
        if key is None:
            return None
        turn = self._entries.get(key)
        if turn is None:
            self.misses += 1
            return None
        self._entries.move_to_end(key)
        self.hits += 1
        return turn

    def put(self, key: str | None, turn: AssistantTurn) -> None:
        if key is None or self.max_entries <= 0:
            return
        self._entries[key] = turn
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    def stats(self) -> dict[str, int]:
        return {"hits": self.hits, "misses": self.misses, "entries": len(self._entries)}
