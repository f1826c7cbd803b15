"""Smoke test of the real local model (opt-in: `-m real_model`). Loads the model once."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from models.errors import ModelOverloaded, ModelTimeout
from models.local import LocalChatModel, LocalModelConfig
from models.messages import Message, ModelParams, TextDelta, TurnDone
from models.testing import CROW_TEST_SYSTEM_PROMPT
from tests.models.tools_fixture import TOOLS

pytestmark = pytest.mark.real_model

CACHE_DIR = Path(__file__).resolve().parents[2] / "var" / "models"
PARAMS = ModelParams(max_tokens=96, timeout_s=300)


@pytest.fixture(scope="module")
def model() -> Iterator[LocalChatModel]:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    local = LocalChatModel(LocalModelConfig(cache_dir=CACHE_DIR, max_waiting=1))
    local.load()
    yield local
    local.close()


def ask(text: str) -> list[Message]:
    return [Message.system(CROW_TEST_SYSTEM_PROMPT), Message.user(text)]


def test_greeting_is_answered_without_tools(model: LocalChatModel) -> None:
    turn = asyncio.run(model.request(ask("Hi!"), TOOLS, PARAMS))
    assert turn.tool_calls == () and turn.invalid_tool_calls == ()
    assert turn.text.strip()


def test_count_question_calls_the_summary_tool(model: LocalChatModel) -> None:
    turn = asyncio.run(model.request(ask("How many interactions do we have?"), TOOLS, PARAMS))
    assert "get_interaction_summary" in [c.name for c in turn.tool_calls], turn


def test_stream_deltas_add_up_to_the_turn(model: LocalChatModel) -> None:
    async def run() -> list[object]:
        params = ModelParams(max_tokens=24, timeout_s=300)
        return [e async for e in model.stream(ask("Good evening!"), TOOLS, params)]

    events = asyncio.run(run())
    assert isinstance(events[-1], TurnDone)
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert text == events[-1].turn.text


def test_deadline_stops_generation(model: LocalChatModel) -> None:
    with pytest.raises(ModelTimeout):
        asyncio.run(model.request(ask("Write a long poem."), (), ModelParams(timeout_s=0.5)))


def test_full_queue_is_refused(model: LocalChatModel) -> None:
    params = ModelParams(max_tokens=4, timeout_s=300)

    async def burst() -> list[object]:
        calls = [model.request(ask("Say hi."), (), params) for _ in range(3)]
        return await asyncio.gather(*calls, return_exceptions=True)

    results = asyncio.run(burst())
    assert sum(isinstance(r, ModelOverloaded) for r in results) == 1
    assert sum(not isinstance(r, BaseException) for r in results) == 2
