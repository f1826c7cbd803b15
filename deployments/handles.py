"""An async facade over a DeploymentHandle, the same shape as crow.services.ThreadProxy;
and the typed views of a ``@serve.deployment`` class and of a streaming call."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, cast

from ray.serve import Deployment
from ray.serve.handle import DeploymentHandle, DeploymentResponse, DeploymentResponseGenerator

from models.messages import AssistantTurn, Message, ModelParams, StreamEvent, ToolSpec


def as_deployment(decorated: object) -> Deployment:
    """The Deployment a ``@serve.deployment`` class is (mypy keeps a decorated class's type)."""
    if not isinstance(decorated, Deployment):
        raise TypeError(f"{decorated!r} is not a @serve.deployment")
    return decorated


def streamed(
    response: DeploymentResponse[Any] | DeploymentResponseGenerator[Any],
) -> DeploymentResponseGenerator[Any]:
    """A call through ``handle.options(stream=True)``: Ray types ``remote()`` as either
    response, though the stream option makes it a generator."""
    return cast(DeploymentResponseGenerator[Any], response)


async def relayed(response: DeploymentResponseGenerator[Any]) -> AsyncIterator[Any]:
    """The items of a streaming call as they arrive; a consumer that stops early (closed or
    cancelled: a client pressed stop or went away) cancels the replica's generator."""
    finished = False
    try:
        async for item in response:
            yield item
        finished = True
    finally:
        if not finished:
            response.cancel()  # type: ignore[no-untyped-call]


class HandleProxy:
    """``await proxy.method(*args)`` calls ``handle.method.remote(*args)`` and awaits it."""

    def __init__(self, handle: DeploymentHandle[Any]) -> None:
        self._handle = handle

    def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]:
        method = getattr(self._handle, name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            return await method.remote(*args, **kwargs)

        return call


class HandleChatModel:
    """A ChatModel whose requests go to the LLM deployment (CPU backend or vLLM adapter)."""

    def __init__(self, handle: DeploymentHandle[Any]) -> None:
        self._handle = handle

    async def request(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] = (),
        params: ModelParams | None = None,
    ) -> AssistantTurn:
        turn: AssistantTurn = await self._handle.request.remote(list(messages), list(tools), params)
        return turn

    async def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] = (),
        params: ModelParams | None = None,
    ) -> AsyncIterator[StreamEvent]:
        events = self._handle.options(stream=True).stream.remote(
            list(messages), list(tools), params
        )
        async for event in relayed(streamed(events)):
            yield event


class StreamingProxy(HandleProxy):
    """HandleProxy plus ``stream_<method>``-free streaming: names in `streams` yield events."""

    def __init__(self, handle: DeploymentHandle[Any], streams: Sequence[str]) -> None:
        super().__init__(handle)
        self._streams = set(streams)
        self._raw = handle

    def __getattr__(self, name: str) -> Any:
        if name in self._streams:
            method = getattr(self._raw.options(stream=True), name)

            def gen(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
                return relayed(method.remote(*args, **kwargs))

            return gen
        return super().__getattr__(name)
