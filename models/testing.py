"""Test doubles for the model layer: a scripted ChatModel and an in-thread HTTP server.

Shipped in the package (not in tests/) so every test suite reuses the same double.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from models.chat import stream_turn
from models.errors import ModelError, ModelTimeout
from models.messages import (
    AssistantTurn,
    Message,
    ModelParams,
    StreamEvent,
    TextDelta,
    ToolCallDone,
    ToolSpec,
    TurnDone,
)

TurnFactory = Callable[[Sequence[Message], Sequence[ToolSpec], ModelParams], AssistantTurn]
"""A scripted step computed from the request; may raise a ModelError to script a failure."""


@dataclass(frozen=True)
class RecordedCall:
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...]
    params: ModelParams


class ScriptedChatModel:
    """A ChatModel that answers with a fixed queue of turns, in order, and records requests.

    Each entry is an AssistantTurn, a ModelError instance to raise, or a callable building
    the turn from the request. Running out of turns raises AssertionError.

    `stream` replays a turn's text as one TextDelta, or, with ``delta_delay_s``, as pieces of
    ``delta_words`` words with that pause before each piece after the first (see
    `stream_turn_slowly`), so a client can watch an answer arrive.
    """

    def __init__(
        self,
        turns: Sequence[AssistantTurn | ModelError | TurnFactory] = (),
        *,
        latency_s: float = 0.0,
        delta_delay_s: float = 0.0,
        delta_words: int = 2,
    ) -> None:
        self._turns = list(turns)
        self._latency_s = latency_s
        self._delta_delay_s = delta_delay_s
        self._delta_words = delta_words
        self.calls: list[RecordedCall] = []

    def add(self, *turns: AssistantTurn | ModelError | TurnFactory) -> None:
        self._turns.extend(turns)

    @property
    def remaining(self) -> int:
        return len(self._turns)

    def assert_complete(self) -> None:
        """Fail if scripted turns were left unused."""
        assert not self._turns, f"{len(self._turns)} scripted turn(s) were never requested"

    async def request(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] = (),
        params: ModelParams | None = None,
    ) -> AssistantTurn:
        params = params or ModelParams()
        self.calls.append(RecordedCall(tuple(messages), tuple(tools), params))
        if not self._turns:
            raise AssertionError(f"ScriptedChatModel got unscripted request #{len(self.calls)}")
        step = self._turns.pop(0)
        if self._latency_s:
            try:
                async with asyncio.timeout(params.timeout_s):
                    await asyncio.sleep(self._latency_s)
            except TimeoutError:
                raise ModelTimeout(f"scripted latency exceeded {params.timeout_s:g}s") from None
        if isinstance(step, ModelError):
            raise step
        if isinstance(step, AssistantTurn):
            return step
        return step(messages, tools, params)

    async def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] = (),
        params: ModelParams | None = None,
    ) -> AsyncIterator[StreamEvent]:
        turn = await self.request(messages, tools, params)
        if delay_s := self.delta_delay_for(turn):
            async for event in stream_turn_slowly(turn, delay_s=delay_s, words=self._delta_words):
                yield event
            return
        async for event in stream_turn(turn):
            yield event

    def delta_delay_for(self, turn: AssistantTurn) -> float:
        """The pause between the pieces `stream` writes `turn` in (0: all at once)."""
        return self._delta_delay_s


def text_pieces(text: str, words: int = 2) -> list[str]:
    """`text` cut into pieces of `words` words each (with their whitespace); they join to it."""
    tokens = re.findall(r"\s*\S+\s*|\s+", text)
    step = max(1, words)
    return ["".join(tokens[i : i + step]) for i in range(0, len(tokens), step)]


async def stream_turn_slowly(
    turn: AssistantTurn, *, delay_s: float = 0.3, words: int = 2
) -> AsyncIterator[StreamEvent]:
    """Replay a finished turn as a model that generates slowly would stream it.

    The text comes as TextDeltas of `words` words, `delay_s` apart (none before the first),
    then the tool calls and the TurnDone, as `models.chat.stream_turn` ends.
    """
    for i, piece in enumerate(text_pieces(turn.text, words)):
        if i and delay_s:
            await asyncio.sleep(delay_s)
        yield TextDelta(text=piece)
    for call in turn.tool_calls:
        yield ToolCallDone(call=call)
    yield TurnDone(turn=turn)


@contextlib.contextmanager
def serve_in_thread(
    app: Callable[..., Any], *, startup_timeout_s: float = 20.0, lifespan: bool = False
) -> Iterator[str]:
    """Run an ASGI app with uvicorn on 127.0.0.1 (free port) in a thread; yield its base URL.

    ``lifespan=True`` runs the app's startup and shutdown as production servers do.
    """
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", lifespan="on" if lifespan else "off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + startup_timeout_s
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("test server did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=startup_timeout_s)
        sock.close()


CROW_TEST_SYSTEM_PROMPT = (
    "You are CROW AI, an intelligent retail analytics assistant for a retail analytics "
    "dashboard.\n"
    "Decide first whether the message needs data.\n"
    "1. Greetings, thanks and small talk (hello, hi, good morning, thanks): reply with one "
    "friendly sentence. Do NOT call any tool.\n"
    "2. COUNT questions (how many, total, number of, count): call get_interaction_summary. "
    "Its arguments are all optional: pass {} unless the user names a channel or dates.\n"
    "3. SEARCH questions (find, show me, list, look up): call search_products, "
    "search_interactions, search_patterns or search_org_context.\n"
    "Use only the tool names listed above, exactly as written. Never invent argument values."
    "\n\nExamples:\n"
    "User: Hello CROW!\nAssistant: Hello! How can I help with your retail data today?\n"
    "User: What's the number of social posts this year?\nAssistant: <tool_call>\n"
    '{"name": "get_interaction_summary", "arguments": {"channel": "social"}}\n</tool_call>\n'
    "User: Look up rain jackets\nAssistant: <tool_call>\n"
    '{"name": "search_products", "arguments": {"query": "rain jackets"}}\n</tool_call>'
)
"""A test-only system prompt for real-model checks; the product's prompt lives in crow/."""
