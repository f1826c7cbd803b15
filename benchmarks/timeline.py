"""Where one answer's time goes: timed wrappers around the chat path's parts, and a timeline
that attributes every instant of the answer to exactly one part.

The wrappers sit between ``ChatService`` / ``Agent`` and their services (the async facades,
the model, the tools), so no core code is touched. Spans may overlap (tools run in parallel,
a tool awaits the embedder): each instant goes to the highest-priority part running then,
in the order of ``PARTS``; what no span covers is ``rest`` (prompts, routing, the loop's own
code, event-loop hops). The parts therefore add up to the answer's wall time exactly.
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from crow.chat.agent.tool import Tool

PARTS: tuple[str, ...] = ("model", "embedding", "retrieval", "store", "tools")
"""Priority order. ``tools`` is tool code and analytics queries (DuckDB counts, the time
anchor) outside embedding and retrieval; ``retrieval`` is SearchService.search: vector
search, DuckDB filtering and row fetches."""
ALL_PARTS: tuple[str, ...] = (*PARTS, "rest")


class Timeline:
    """Spans (part, start, end) recorded during one answer."""

    def __init__(self) -> None:
        self.spans: list[tuple[str, float, float]] = []

    def reset(self) -> None:
        self.spans.clear()

    async def timed(self, part: str, awaitable: Awaitable[Any]) -> Any:
        started = time.perf_counter()
        try:
            return await awaitable
        finally:
            self.spans.append((part, started, time.perf_counter()))

    def breakdown(self, start: float, end: float) -> dict[str, float]:
        return attribute(self.spans, start, end)


def attribute(
    spans: Sequence[tuple[str, float, float]], start: float, end: float
) -> dict[str, float]:
    """Seconds per part in [start, end], each instant to the first part of ``PARTS`` running
    then; ``rest`` is the time no span covers."""
    out = dict.fromkeys(ALL_PARTS, 0.0)
    cuts = sorted({start, end, *(t for _, a, b in spans for t in (a, b) if start < t < end)})
    rank = {p: i for i, p in enumerate(PARTS)}
    for a, b in itertools.pairwise(cuts):
        running = [p for p, s, e in spans if s <= a and e >= b]
        out[min(running, key=rank.__getitem__) if running else "rest"] += b - a
    return out


class TimedProxy:
    """``await proxy.method(...)`` of the wrapped async facade, recorded as one span."""

    def __init__(self, target: Any, part: str, timeline: Timeline) -> None:
        self._target, self._part, self._timeline = target, part, timeline

    def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]:
        method = getattr(self._target, name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            return await self._timeline.timed(self._part, method(*args, **kwargs))

        return call


class TimedModel:
    """A ChatModel whose requests are recorded as ``model`` spans."""

    def __init__(self, model: Any, timeline: Timeline) -> None:
        self.model, self._timeline = model, timeline

    async def request(self, messages, tools=(), params=None):
        return await self._timeline.timed("model", self.model.request(messages, tools, params))

    async def stream(self, messages, tools=(), params=None):
        started = time.perf_counter()
        try:
            async for event in self.model.stream(messages, tools, params):
                yield event
        finally:
            self._timeline.spans.append(("model", started, time.perf_counter()))


def timed_tools(tools: Sequence[Tool], timeline: Timeline) -> tuple[Tool, ...]:
    """The tools, each invocation recorded as a ``tools`` span."""

    def wrap(fn: Callable[[Any, Any], Awaitable[Any]]) -> Callable[[Any, Any], Awaitable[Any]]:
        async def invoke(args: Any, ctx: Any) -> Any:
            return await timeline.timed("tools", fn(args, ctx))

        return invoke

    return tuple(dataclasses.replace(t, fn=wrap(t.fn)) for t in tools)
