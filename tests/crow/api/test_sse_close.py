"""The chat stream's response closes the answer it relays however the response ends: when
sending fails (a client gone away: Ray Serve's closed queue raises) the answer upstream is
closed at once, not when the garbage collector finds it, so its model run is cancelled and
what it wrote is stored as stopped."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from crow.api.routes_chat import sse_response


class Upstream:
    """An answer that streams deltas for as long as it is read and records being closed."""

    def __init__(self) -> None:
        self.closed = False
        self.sent = 0

    async def events(self) -> AsyncIterator[dict[str, Any]]:
        try:
            yield {"type": "user_message", "message": {"id": "m1"}}
            while True:
                self.sent += 1
                yield {"type": "text_delta", "text": "word "}
                await asyncio.sleep(0)
        finally:
            self.closed = True


async def _serve(upstream: Upstream, fail_after: int) -> None:
    """The response over ASGI 2.4 (what Ray Serve's replica speaks), whose `send` raises as
    Ray's closed message queue does once `fail_after` body chunks went out."""
    response = await sse_response(upstream.events())
    bodies = 0

    async def send(message: dict[str, Any]) -> None:
        nonlocal bodies
        if message["type"] == "http.response.body":
            bodies += 1
            if bodies > fail_after:
                raise RuntimeError("New messages cannot be sent after the queue is closed.")

    async def receive() -> dict[str, Any]:
        await asyncio.sleep(3600)
        return {"type": "http.disconnect"}

    scope = {"type": "http", "asgi": {"spec_version": "2.4"}}
    await response(scope, receive, send)


def test_a_failed_send_closes_the_answer_at_once():
    upstream = Upstream()

    async def scenario() -> None:
        with pytest.raises(RuntimeError) as failed:
            await _serve(upstream, fail_after=3)
        # The traceback keeps the response alive: only an explicit close can have run it.
        assert failed.value.__traceback__ is not None
        assert upstream.closed, "the answer was left open after the client went away"

    asyncio.run(scenario())
    assert upstream.sent <= 4  # nothing more was asked of it after the failed send


def test_a_cancelled_response_closes_the_answer_at_once():
    upstream = Upstream()

    async def scenario() -> None:
        task = asyncio.ensure_future(_serve(upstream, fail_after=10**9))
        while upstream.sent < 3:
            await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert upstream.closed

    asyncio.run(scenario())
