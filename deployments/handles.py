"""An async facade over a DeploymentHandle, the same shape as crow.services.ThreadProxy."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

from ray.serve.handle import DeploymentHandle

from models.messages import AssistantTurn, Message, ModelParams, StreamEvent, ToolSpec


class HandleProxy:
    """``await proxy.method(*args)`` calls ``handle.method.remote(*args)`` and awaits it."""

    def __init__(self, handle: DeploymentHandle) -> None:
        self._handle = handle

    def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]:
        method = getattr(self._handle, name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            return await method.remote(*args, **kwargs)

        return call


class HandleChatModel:
    """A ChatModel whose requests go to the LLM deployment (CPU backend or vLLM adapter)."""

    def __init__(self, handle: DeploymentHandle) -> None:
        self._handle = handle

    async def request(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] = (),
        params: ModelParams | None = None,
    ) -> AssistantTurn:
        return await self._handle.request.remote(list(messages), list(tools), params)

    async def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] = (),
        params: ModelParams | None = None,
    ) -> AsyncIterator[StreamEvent]:
        async for event in self._handle.options(stream=True).stream.remote(
            list(messages), list(tools), params
        ):
            yield event


class StreamingProxy(HandleProxy):
    """HandleProxy plus ``stream_<method>``-free streaming: names in `streams` yield events."""

    def __init__(self, handle: DeploymentHandle, streams: Sequence[str]) -> None:
        super().__init__(handle)
        self._streams = set(streams)
        self._raw = handle

    def __getattr__(self, name: str) -> Any:
        if name in self._streams:
            method = getattr(self._raw.options(stream=True), name)

            async def gen(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
                async for item in method.remote(*args, **kwargs):
                    yield item

            return gen
        return super().__getattr__(name)
