"""The chat service: persist the question, run the agent over the session, persist the answer.

The user message is stored before the model is called (a model failure leaves it stored);
the assistant message is stored with its sources, tool steps and timings afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from crow.background import Background
from crow.chat.agent.answer import AgentAnswer
from crow.chat.agent.config import AgentConfig
from crow.chat.agent.loop import Agent
from crow.chat.agent.prompts import opening
from crow.chat.agent.tool import Tool
from crow.chat.agent.tools import TOOLS
from crow.chat.qna import answer_from_kb
from crow.facades import StoreFacade
from crow.metrics import Metrics, NoMetrics
from crow.services import Services, need
from crow.store.chat_store import SessionKind
from models.chat import ChatModel
from models.messages import Message, ModelParams

log = logging.getLogger(__name__)


class SessionNotFound(LookupError):
    """The session is not the org's, or was deleted while its question was answered."""


class AnswerInProgress(RuntimeError):
    """A request with this message id is being answered right now (a client retry)."""


class AnswerNotFound(LookupError):
    """No answer with this id in the session (to regenerate)."""


class NotLatestAnswer(ValueError):
    """Only the session's latest answer can be regenerated (its answer goes after it)."""


IN_PROGRESS_WAIT_S = 20.0  # a retry waits this long for the first request's answer
HEARTBEAT_S = 3.0  # a request answering a message id renews its claim this often
TAKEOVER_AFTER_S = 10.0  # a claim not renewed this long is a dead request's: answer again
_POLL_S = 0.25


class ChatService:
    def __init__(
        self,
        services: Services,
        model: ChatModel,
        *,
        tools: Sequence[Tool] = TOOLS,
        config: AgentConfig | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        """The agent loop over ``model`` and ``tools``, configured from the settings
        (``config`` replaces that, in a test). The chat store and what the tools reach come
        from ``services`` (built by crow.app); one missing fails here, not in a request."""
        settings = services.settings
        self.services = services
        self.store: StoreFacade = services.store
        for part in ("embedder", "retriever", "analytics"):  # what the tools reach
            need(getattr(services, part), part)
        self.org_names = {o["id"]: o["name"] for o in services.lake.list_orgs()}
        self.agent = Agent(model, config or AgentConfig.from_settings(settings), tools)
        self.history_messages = settings.limits.history_messages
        self.metrics = metrics or NoMetrics()
        self._storing = Background()  # stopped answers being stored

    def _record(self, answer: AgentAnswer) -> None:
        self.metrics.observe("crow_agent_iterations", answer.iterations)
        if answer.fallback:
            self.metrics.inc("crow_agent_fallbacks_total", reason=answer.fallback.split(":")[0])
        for step in answer.tool_steps:
            self.metrics.inc("crow_tool_calls_total", tool=step["name"], ok=str(step["ok"]).lower())
            self.metrics.observe("crow_tool_seconds", step["ms"] / 1000, tool=step["name"])

    async def send(
        self,
        org_id: str,
        session_id: str,
        content: str,
        *,
        kind: SessionKind = "chat",
        message_id: str | None = None,
    ) -> dict[str, Any]:
        final: dict[str, Any] | None = None
        async for event in self.send_events(
            org_id, session_id, content, kind=kind, message_id=message_id
        ):
            if event["type"] == "done":
                final = event["message"]
        assert final is not None
        return final

    async def send_events(
        self,
        org_id: str,
        session_id: str,
        content: str,
        *,
        kind: SessionKind = "chat",
        message_id: str | None = None,
    ) -> AsyncIterator[dict[str, Any]]:
        store = self.store
        if message_id is not None:  # a client's key is unique within its session only
            message_id = f"{session_id}:{message_id}"
        started = await store.start_turn(
            org_id,
            session_id,
            content,
            kind=kind,
            message_id=message_id,
            history=self.history_messages,
        )
        if started is None:
            raise SessionNotFound(session_id)
        history, user = started
        yield {"type": "user_message", "message": user}
        # A client retry of a question gets its one answer, not a second model run.
        answer_id = None if message_id is None else answer_message_id(message_id)
        if answer_id is not None and (done := await self._answer_or_claim(org_id, answer_id)):
            yield {"type": "done", "message": done}
            return
        async with self._claimed(org_id, answer_id):
            turn = _Turn(org_id, session_id, kind, answer_id)
            answer = self._answer(turn, content, history, user)
            async with contextlib.aclosing(answer):  # closed with this one: a stop is stored
                async for event in answer:
                    yield event

    async def regenerate_events(
        self, org_id: str, session_id: str, answer_id: str
    ) -> AsyncIterator[dict[str, Any]]:
        """Answer the question of the session's latest answer `answer_id` again; the new
        answer is stored after it and both stay in the history. The first event is
        ``regenerating`` with the answer answered again."""
        if await self.store.get_session(org_id, session_id) is None:  # the org's chat only
            raise SessionNotFound(session_id)
        rows = await self.store.list_messages(org_id, session_id, limit=self.history_messages)
        answer = next((m for m in rows if m["id"] == answer_id), None)
        if answer is None or answer["role"] != "assistant":
            raise AnswerNotFound(answer_id)
        if rows[-1]["id"] != answer_id:
            raise NotLatestAnswer(answer_id)
        asked = [i for i, m in enumerate(rows) if m["role"] == "user"]
        if not asked:  # the question is older than the history window
            raise AnswerNotFound(answer_id)
        question = rows[asked[-1]]
        yield {"type": "regenerating", "message": answer}
        turn = _Turn(org_id, session_id, "chat", None, regenerated_from=answer_id)
        again = self._answer(turn, question["content"], rows[: asked[-1]], question)
        async with contextlib.aclosing(again):
            async for event in again:
                yield event

    async def _answer(
        self,
        turn: _Turn,
        content: str,
        history: list[dict[str, Any]],
        user: dict[str, Any],
    ) -> AsyncGenerator[dict[str, Any], None]:
        """The agent's events, then the answer stored (``done``). A consumer that stops
        listening (the user pressed stop, the client went away) cancels the agent and the
        model; what was written until then is stored as the answer, marked stopped."""
        ctx = self.services.tool_context(turn.org_id)
        messages = opening(self.org_names.get(turn.org_id, turn.org_id))
        messages += _history(history, user["id"])
        messages.append(Message.user(content))
        answer: AgentAnswer | None = None
        written = _Written()
        try:
            async with contextlib.aclosing(self.agent.events(messages, ctx)) as events:
                async for event in events:
                    if event["type"] == "done":
                        answer = event["answer"]
                    else:
                        written.see(event)
                        yield event
        except (asyncio.CancelledError, GeneratorExit):
            # Stored in a task of its own (a cancelled request's awaits are cancelled too),
            # in a context of its own (crow.background)
            self._storing.start(self._store_stopped(turn, written))
            raise
        assert answer is not None
        self._record(answer)
        stored = await self._finish(
            turn,
            answer.content,
            tokens=answer.tokens,
            sources=[s.model_dump() for s in answer.sources],
            tool_steps=answer.tool_steps,
            timings={
                **answer.timings,
                "iterations": answer.iterations,
                "embed_calls": ctx.embed_calls,
                "fallback": answer.fallback,
            },
        )
        if stored is None:  # the session was deleted while the question was answered
            raise SessionNotFound(turn.session_id)
        yield {"type": "done", "message": stored}

    async def _store_stopped(self, turn: _Turn, written: _Written) -> None:
        """What a stopped answer wrote, stored (a deleted session keeps nothing)."""
        try:
            await self._finish(
                turn, written.text, tokens=0, tool_steps=written.steps, timings={}, stopped=True
            )
        except Exception:
            log.warning("a stopped answer in %s was not stored", turn.session_id, exc_info=True)

    async def _finish(self, turn: _Turn, content: str, **fields: Any) -> dict[str, Any] | None:
        return await self.store.finish_turn(
            turn.org_id,
            turn.session_id,
            content,
            kind=turn.kind,
            message_id=turn.answer_id,
            regenerated_from=turn.regenerated_from,
            **fields,
        )

    @contextlib.asynccontextmanager
    async def _claimed(self, org_id: str, answer_id: str | None) -> AsyncIterator[None]:
        """While answering a claimed message id: renew the claim every HEARTBEAT_S (a
        replica that dies stops renewing it), and release it at the end, answered or not."""
        if answer_id is None:
            yield
            return
        store = self.store

        async def renew() -> None:
            while True:
                await asyncio.sleep(HEARTBEAT_S)
                await store.renew_claim(org_id, answer_id)

        heartbeat = asyncio.create_task(renew())
        try:
            yield
        finally:
            heartbeat.cancel()
            with contextlib.suppress(Exception):  # the store away: the claim goes stale
                await store.release_answer(org_id, answer_id)

    async def _answer_or_claim(self, org_id: str, answer_id: str) -> dict[str, Any] | None:
        """The stored answer to a client's message id, or None once this request has claimed
        the answering. While another request answers it, wait (IN_PROGRESS_WAIT_S, then
        AnswerInProgress); a claim released without an answer (a failure) or gone stale (a
        crash, TAKEOVER_AFTER_S) is taken over."""
        store = self.store
        deadline = time.monotonic() + IN_PROGRESS_WAIT_S
        while True:
            if done := await store.get_message(org_id, answer_id):
                return done
            if await store.claim_answer(org_id, answer_id, stale_after_s=TAKEOVER_AFTER_S):
                if done := await store.get_message(org_id, answer_id):  # stored meanwhile
                    await store.release_answer(org_id, answer_id)
                    return done
                return None
            if time.monotonic() > deadline:
                raise AnswerInProgress(answer_id)
            await asyncio.sleep(_POLL_S)

    async def ask_kb(
        self,
        org_id: str,
        question: str,
        *,
        session_id: str | None = None,
        message_id: str | None = None,
    ) -> dict[str, Any]:
        """A Q&A answer from the knowledge base; stored when asked within a Q&A session (a
        retry with the same `message_id` gets that answer, not a second one)."""
        store = self.store
        history: list[Message] = []
        answer_id = None
        if session_id is not None:
            mid = None if message_id is None else f"{session_id}:{message_id}"
            started = await store.start_turn(
                org_id,
                session_id,
                question,
                kind="qna",
                message_id=mid,
                history=self.history_messages,
            )
            if started is None:
                raise SessionNotFound(session_id)
            rows, user = started
            answer_id = None if mid is None else answer_message_id(mid)
            if answer_id is not None and (done := await self._answer_or_claim(org_id, answer_id)):
                return done
            history = _history(rows, user["id"])
        async with self._claimed(org_id, answer_id):
            return await self._kb_answer(org_id, question, session_id, history, answer_id)

    async def _kb_answer(
        self,
        org_id: str,
        question: str,
        session_id: str | None,
        history: list[Message],
        answer_id: str | None,
    ) -> dict[str, Any]:
        store = self.store
        ctx = self.services.tool_context(org_id)
        config = self.agent.config
        params = ModelParams(
            tool_choice="none", timeout_s=config.model_timeout_s, max_tokens=config.max_tokens
        )
        answer = await answer_from_kb(
            self.agent.model,
            ctx,
            self.org_names.get(org_id, org_id),
            history,
            question,
            params=params,
        )
        fields: dict[str, Any] = {
            "sources": [s.model_dump() for s in answer.sources],
            "tool_steps": answer.tool_steps,
            "timings": answer.timings,
        }
        if session_id is None:
            await store.add_usage(org_id, answer.tokens)
            return {"role": "assistant", "content": answer.content, **fields}
        stored = await store.finish_turn(
            org_id,
            session_id,
            answer.content,
            tokens=answer.tokens,
            kind="qna",
            message_id=answer_id,
            **fields,
        )
        if stored is None:
            raise SessionNotFound(session_id)
        return stored


def answer_message_id(message_id: str) -> str:
    """The id of the answer to a client's message id (":" is not allowed in client ids)."""
    return f"{message_id}:answer"


@dataclass(frozen=True)
class _Turn:
    """Where an answer goes: its session, its id (a client's retry key) and what it redoes."""

    org_id: str
    session_id: str
    kind: SessionKind
    answer_id: str | None
    regenerated_from: str | None = None


@dataclass
class _Written:
    """What an answer in progress has written and the tool steps it ran, from its events."""

    text: str = ""
    steps: list[dict[str, Any]] = field(default_factory=list)

    def see(self, event: dict[str, Any]) -> None:
        if event["type"] == "text_delta":
            self.text += event["text"]
        elif event["type"] == "text_replaced":
            self.text = event["text"]
        elif event["type"] == "tool_call_finished":
            self.steps.append({k: v for k, v in event.items() if k != "type"})


def _history(rows: list[dict[str, Any]], question_id: str) -> list[Message]:
    """The earlier messages as the model reads them: an answer that was regenerated is left
    out (its question's latest answer stands for it)."""
    redone = {m["regenerated_from"] for m in rows if m.get("regenerated_from")}
    return [_as_message(m) for m in rows if m["id"] != question_id and m["id"] not in redone]


def _as_message(row: dict[str, Any]) -> Message:
    if row["role"] == "assistant":
        return Message.assistant(row["content"])
    return Message.user(row["content"])
