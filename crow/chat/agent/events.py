"""A producer's events as an async iterator, and the producer stopped when nobody listens."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any

Event = dict[str, Any]
Emit = Callable[[Event], None]


async def events_of(produce: Callable[[Emit], Awaitable[None]]) -> AsyncGenerator[Event]:
    """Run ``produce(emit)`` and yield what it emits as it emits it; its errors surface at the
    end. When the consumer stops early (a client went away), the producer is cancelled, and
    with it the model and the tools it was waiting for."""
    queue: asyncio.Queue[Event | None] = asyncio.Queue()
    task = asyncio.ensure_future(produce(queue.put_nowait))
    task.add_done_callback(lambda _: queue.put_nowait(None))
    try:
        while (event := await queue.get()) is not None:
            yield event
        await task
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
