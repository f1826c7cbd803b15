"""The real local model (llama.cpp, the default 1.5B GGUF): constrained tool calls, streaming,
cancellation, deadlines, admission and the prompt budget. Loads the model once."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import httpx
import jsonschema
import pytest

from models.errors import ModelOverloaded, ModelTimeout, PromptTooLong
from models.local import LocalChatModel, LocalModelConfig
from models.messages import Message, ModelParams, NamedToolChoice, TextDelta, TurnDone
from models.openai_server import build_openai_app
from models.testing import CROW_TEST_SYSTEM_PROMPT, serve_in_thread
from tests.models.tools_fixture import TOOLS
from tests.repo import ROOT

pytestmark = pytest.mark.real_model

CACHE_DIR = ROOT / "var" / "models"
BY_NAME = {t.name: t for t in TOOLS}


@pytest.fixture(scope="module")
def model() -> Iterator[LocalChatModel]:
    local = LocalChatModel(
        LocalModelConfig(
            cache_dir=CACHE_DIR, slots=1, max_waiting=1, max_prompt_tokens=1600, max_tokens=96
        )
    )
    local.load()
    yield local
    local.close()


def ask(text: str) -> list[Message]:
    return [Message.system(CROW_TEST_SYSTEM_PROMPT), Message.user(text)]


async def wait_idle(model: LocalChatModel, within_s: float = 5.0) -> float:
    started = time.monotonic()
    while model.busy and time.monotonic() - started < within_s:
        await asyncio.sleep(0.02)
    return time.monotonic() - started


def test_constrained_calls_always_validate(model: LocalChatModel) -> None:
    # Our own wording (never the evaluation questions); each forced or named, so a call must come.
    cases = [
        ("Count web visits from last March.", "required"),
        ("Anything odd about store traffic lately?", "required"),
        ("hello", NamedToolChoice(name="search_patterns")),
        ("Show me tents", NamedToolChoice(name="get_interaction_summary")),
    ]
    params = ModelParams(max_tokens=96, timeout_s=300)
    for question, choice in cases:
        turn = asyncio.run(
            model.request(ask(question), TOOLS, params.model_copy(update={"tool_choice": choice}))
        )
        assert turn.tool_calls and not turn.invalid_tool_calls, (question, turn)
        for call in turn.tool_calls:
            if isinstance(choice, NamedToolChoice):
                assert call.name == choice.name
            jsonschema.validate(call.arguments, BY_NAME[call.name].parameters)


def test_auto_lets_the_model_answer_in_prose_or_call(model: LocalChatModel) -> None:
    """With "auto" the model chooses: small talk gets prose (a grammar that only allowed calls
    forced a call on every step), a count question gets a valid call."""
    params = ModelParams(max_tokens=64, timeout_s=300)
    hello = asyncio.run(model.request(ask("hey, nice to meet you"), TOOLS, params))
    assert not hello.tool_calls and not hello.invalid_tool_calls, hello
    assert hello.text and not hello.text.lstrip().startswith(("{", "`", "<"))
    count = asyncio.run(
        model.request(ask("How many interactions did we have in total?"), TOOLS, params)
    )
    assert [c.name for c in count.tool_calls] == ["get_interaction_summary"], count
    jsonschema.validate(
        count.tool_calls[0].arguments, BY_NAME["get_interaction_summary"].parameters
    )


def test_stream_deltas_add_up_to_the_turn(model: LocalChatModel) -> None:
    async def run() -> list[object]:
        params = ModelParams(max_tokens=24, timeout_s=300)
        return [e async for e in model.stream([Message.user("Say hello to Ada.")], (), params)]

    events = asyncio.run(run())
    assert isinstance(events[-1], TurnDone)
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert len(deltas) > 1  # token by token, not one piece at the end
    assert "".join(deltas).strip() == events[-1].turn.text


def test_a_client_that_hangs_up_stops_the_generation(model: LocalChatModel) -> None:
    """Through /v1/chat/completions with stream: read two chunks, hang up: the runtime goes
    idle at once instead of writing the remaining tokens for nobody."""
    app = build_openai_app(model, max_tokens=96)
    body = {
        "messages": [{"role": "user", "content": "Write a long story about a lighthouse."}],
        "stream": True,
        "max_tokens": 96,
    }
    with serve_in_thread(app) as base, httpx.Client(base_url=base, timeout=120) as client:
        with client.stream("POST", "/v1/chat/completions", json=body) as response:
            assert response.status_code == 200
            texts = 0
            for line in response.iter_lines():
                texts += '"content": "' in line and '"content": ""' not in line
                if texts == 2:
                    break  # two pieces of text arrived: hang up
            assert texts == 2
        hung_up = time.monotonic()
        idle_after = asyncio.run(wait_idle(model))
    assert model.busy == 0
    assert idle_after < 3.0, f"still generating {idle_after:.1f}s after the client left"
    assert time.monotonic() - hung_up < 10


def test_deadline_stops_generation(model: LocalChatModel) -> None:
    with pytest.raises(ModelTimeout):
        asyncio.run(model.request(ask("Write a long poem."), (), ModelParams(timeout_s=0.5)))
    assert asyncio.run(wait_idle(model)) < 5.0


def test_full_queue_is_refused(model: LocalChatModel) -> None:
    # What an earlier test left running (a cancelled prompt step) must not take a slot here.
    assert asyncio.run(wait_idle(model, within_s=60)) < 60
    params = ModelParams(max_tokens=4, timeout_s=300)

    async def burst() -> list[object]:
        calls = [model.request([Message.user("Say hi.")], (), params) for _ in range(3)]
        return await asyncio.gather(*calls, return_exceptions=True)

    results = asyncio.run(burst())
    assert sum(isinstance(r, ModelOverloaded) for r in results) == 1
    assert sum(not isinstance(r, BaseException) for r in results) == 2


def test_a_prompt_over_the_budget_is_refused_with_the_error_shape(model: LocalChatModel) -> None:
    long = [Message.user("tent " * 2500)]
    started = time.monotonic()
    with pytest.raises(PromptTooLong, match="max_prompt_tokens"):
        asyncio.run(model.request(long, (), ModelParams(max_tokens=8)))
    assert time.monotonic() - started < 5  # refused before reading it (prefill: ~20+ s)
    app = build_openai_app(model)
    with serve_in_thread(app) as base:
        body = {"messages": [{"role": "user", "content": long[0].content}]}
        response = httpx.post(f"{base}/v1/chat/completions", json=body, timeout=60)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "prompt_too_long"
