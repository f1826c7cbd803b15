"""LLM deployment of the CPU profile: one ChatModel backend behind the orchestrator's contract.

``request`` / ``stream`` take and return the shared message types, exactly what the
orchestrator's HandleChatModel sends, so the orchestrator never knows which backend runs.
The GPU profile puts Ray Serve LLM's vLLM server in its place (deployments/llm_vllm.py).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from ray import serve

from crow.app import chat_model
from crow.settings import AppSettings
from deployments.metrics import RayMetrics
from models.cache import ResponseCache
from models.chat import stream_turn
from models.messages import AssistantTurn, Message, ModelParams, StreamEvent, ToolSpec


@serve.deployment(name="LLM", max_ongoing_requests=16, ray_actor_options={"num_cpus": 0})
class LLMDeployment:
    def __init__(self, settings: AppSettings) -> None:
        s = settings
        self.name = s.llm.model
        self.model = chat_model(s)  # the backend llm.backend names
        self.cache = ResponseCache(s.llm.cache_entries)
        self.metrics = RayMetrics()

    def _record(self, turn: AssistantTurn, *, cached: bool) -> None:
        self.metrics.inc("crow_llm_cache_total", result="hit" if cached else "miss")
        if cached:
            return
        self.metrics.inc("crow_llm_prompt_tokens_total", turn.usage.prompt_tokens)
        self.metrics.inc("crow_llm_completion_tokens_total", turn.usage.completion_tokens)
        stats = getattr(self.model, "last_stats", None)
        if stats is not None and stats.first_token_s is not None:
            self.metrics.observe("crow_llm_first_token_seconds", stats.first_token_s)

    async def request(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] = (),
        params: ModelParams | None = None,
        *,
        use_cache: bool = True,
    ) -> AssistantTurn:
        params = params or ModelParams()
        key = ResponseCache.key(self.name, messages, tools, params) if use_cache else None
        if (cached := self.cache.get(key)) is not None:
            self._record(cached, cached=True)
            return cached
        turn = await self.model.request(messages, tools, params)
        self.cache.put(key, turn)
        self._record(turn, cached=False)
        return turn

    async def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] = (),
        params: ModelParams | None = None,
        *,
        use_cache: bool = True,
    ) -> AsyncIterator[StreamEvent]:
        params = params or ModelParams()
        key = ResponseCache.key(self.name, messages, tools, params) if use_cache else None
        cached = self.cache.get(key)
        events = (
            stream_turn(cached)
            if cached is not None
            else self.model.stream(messages, tools, params)
        )
        async for event in events:
            if event.type == "turn_done":
                self.cache.put(key, event.turn)
                self._record(event.turn, cached=cached is not None)
            yield event

    def cache_stats(self) -> dict[str, int]:
        return self.cache.stats()

    def check_health(self) -> None:
        if self.model is None:
            raise RuntimeError("model not loaded")
