"""Stop and regenerate in the chat service over a real chat store: a stream closed early stops
the model and keeps what was written, marked stopped; a regenerated answer goes after the one
it answers again, both stay, and the model reads only the latest."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import AsyncGenerator, AsyncIterator

import pytest

from crow.chat.agent.config import AgentConfig
from crow.chat.service import AnswerNotFound, NotLatestAnswer, SessionNotFound
from crow.store.chat_store import ChatStore
from models.messages import AssistantTurn, TextDelta, TurnDone
from models.testing import ScriptedChatModel
from tests.agent_support import ORG
from tests.demo_env import build_demo_env


class EndlessModel(ScriptedChatModel):
    """Streams "word0 word1 …" a word every 20 ms for as long as it is listened to, and
    counts the words it produced."""

    produced = 0

    async def stream(self, messages, tools=(), params=None) -> AsyncIterator:
        self.calls.append(messages)
        for i in range(10_000):
            self.produced += 1
            yield TextDelta(text=f"word{i} ")
            await asyncio.sleep(0.02)
        yield TurnDone(turn=AssistantTurn(text="never"))


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    return build_demo_env(tmp_path_factory.mktemp("var"))


@pytest.fixture
def store(tmp_path):
    store = ChatStore(tmp_path / "chat.duckdb")
    yield store
    store.close()


async def _stop_after(events: AsyncGenerator[dict, None], pieces: int, *, how: str) -> str:
    """Read `pieces` text deltas, then stop listening: close the stream ("closed"), cancel
    the task reading it ("cancelled": a server whose client went away), or throw a
    CancelledError in at its yield ("thrown": what Ray Serve does to a replica's generator
    whose caller stopped) and keep the error, as a caller's traceback would."""
    seen = ""
    kept: list[BaseException] = []

    async def read() -> None:
        nonlocal seen
        n = 0
        async for event in events:
            if event["type"] == "text_delta":
                seen += event["text"]
                n += 1
                if n == pieces:
                    if how == "closed":
                        await events.aclose()
                        return
                    if how == "thrown":
                        try:
                            await events.athrow(asyncio.CancelledError())
                        except asyncio.CancelledError as exc:
                            kept.append(exc)
                        return
                    await asyncio.sleep(3600)  # cancelled here

    task = asyncio.ensure_future(read())
    if how == "cancelled":
        while seen.count("word") < pieces:
            await asyncio.sleep(0.005)
        task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    return seen


@pytest.mark.parametrize("how", ["closed", "cancelled", "thrown"])
def test_a_stopped_answer_stops_the_model_and_is_stored_as_far_as_it_got(demo, store, how):
    model = EndlessModel()
    service = demo.chat(model, store=store, config=AgentConfig())
    session = store.create_session(ORG)["id"]

    async def scenario() -> tuple[str, int, int]:
        seen = await _stop_after(service.send_events(ORG, session, "Tell me a story"), 5, how=how)
        at_stop = model.produced
        for _ in range(100):  # the stopped answer is stored by a task of its own
            if len(store.list_messages(ORG, session)) == 2:
                break
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.2)
        return seen, at_stop, model.produced

    seen, at_stop, later = asyncio.run(scenario())
    assert later <= at_stop + 1  # the model is not asked for more once the stream is closed
    question, answer = store.list_messages(ORG, session)
    assert (question["role"], answer["role"]) == ("user", "assistant")
    assert answer["stopped"] is True and question["stopped"] is False
    assert answer["content"].startswith(seen) and seen.startswith("word0 word1 word2")


def test_regenerate_answers_the_same_question_again_and_keeps_both(demo, store):
    model = ScriptedChatModel([AssistantTurn(text="First answer."), AssistantTurn(text="Second.")])
    service = demo.chat(model, store=store, config=AgentConfig())
    session = store.create_session(ORG)["id"]
    first = asyncio.run(service.send(ORG, session, "Hello there"))

    async def regenerate(answer_id: str) -> list[dict]:
        return [e async for e in service.regenerate_events(ORG, session, answer_id)]

    events = asyncio.run(regenerate(first["id"]))
    assert events[0] == {"type": "regenerating", "message": first}
    second = events[-1]["message"]
    assert second["regenerated_from"] == first["id"] and second["content"] == "Second."
    rows = store.list_messages(ORG, session)
    assert [(m["role"], m["content"]) for m in rows] == [
        ("user", "Hello there"),
        ("assistant", "First answer."),
        ("assistant", "Second."),
    ]
    asked = model.calls[-1].messages
    assert [m.role for m in asked] == ["system", "system", "user"]  # the prompt, the org
    assert asked[-1].content == "Hello there"

    # The next question's history has the question and its latest answer only.
    model.add(AssistantTurn(text="Third."))
    asyncio.run(service.send(ORG, session, "And then?"))
    assert [m.content for m in model.calls[-1].messages[2:]] == [
        "Hello there",
        "Second.",
        "And then?",
    ]

    with pytest.raises(NotLatestAnswer):
        asyncio.run(regenerate(first["id"]))
    with pytest.raises(AnswerNotFound):
        asyncio.run(regenerate(rows[0]["id"]))  # a question is not an answer
    with pytest.raises(SessionNotFound):
        asyncio.run(
            _first(service.regenerate_events("fresh-mart", session, second["id"]))
        )  # another organization's session
    qna = store.create_session(ORG, kind="qna")["id"]
    store.add_message(ORG, qna, "user", "Return policy?", kind="qna")
    kb = store.add_message(ORG, qna, "assistant", "60 days.", kind="qna")
    with pytest.raises(SessionNotFound):  # a Q&A session's answers are not the chat agent's
        asyncio.run(_first(service.regenerate_events(ORG, qna, kb["id"])))


async def _first(events: AsyncIterator[dict]) -> dict:
    return await anext(events)


REQUEST: contextvars.ContextVar[str | None] = contextvars.ContextVar("request", default=None)


def test_a_stopped_answer_is_stored_outside_the_cancelled_requests_context(demo, store):
    """A server may cancel every call a cancelled request made, found by its context (Ray
    Serve cancels a cancelled request's child requests): the stopped answer's store call
    must not be one of them, or the stop loses the answer."""
    model = EndlessModel()
    service = demo.chat(model, store=store, config=AgentConfig())
    session = store.create_session(ORG)["id"]
    stored_in: list[str | None] = []
    finish_turn = store.finish_turn

    def recording_finish_turn(*args, **kwargs):
        stored_in.append(REQUEST.get())
        return finish_turn(*args, **kwargs)

    store.finish_turn = recording_finish_turn  # type: ignore[method-assign]

    async def request() -> str:
        REQUEST.set("the-request")
        events = service.send_events(ORG, session, "Tell me a story")
        return await _stop_after(events, 3, how="thrown")

    async def scenario() -> None:
        await asyncio.ensure_future(request())
        for _ in range(100):
            if stored_in:
                return
            await asyncio.sleep(0.02)

    asyncio.run(scenario())
    assert stored_in == [None], stored_in
    assert store.list_messages(ORG, session)[-1]["stopped"] is True
