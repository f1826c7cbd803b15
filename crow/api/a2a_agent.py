"""The A2A side of Ask CROW on a2a-sdk: the agent card, the executor, the per-app state.

The executor answers every A2A message with ``services.chat.send`` in a chat session of the
caller's org (the organization of its API key); one chat session per A2A context id (the legacy
``tasks/send`` sessionId shares the same mapping). The mapping and the A2A tasks live in the
chat store (crow.api.a2a_tasks): any Ingress replica answers any of them, and finished tasks
are deleted after ``limits.a2a_task_retention_h``.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from typing import Any

from a2a.helpers import new_task, new_text_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.context import ServerCallContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import DefaultServerCallContextBuilder
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from a2a.server.tasks import TaskUpdater
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentProvider,
    AgentSkill,
    HTTPAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
    TaskState,
)
from starlette.requests import Request

from crow.api.a2a_tasks import ChatStoreTaskStore
from crow.api.routes_chat import chat_error, new_session
from crow.chat.service import AnswerInProgress, SessionNotFound
from crow.services import Services, need
from models.errors import ModelError

log = logging.getLogger(__name__)

A2A_RPC_PATH = "/a2a"
CARD_PATHS = ("/.well-known/agent-card.json", "/.well-known/agent.json")
BEARER_SCHEME = "bearer"

_SKILLS: tuple[tuple[str, str, str, tuple[str, ...]], ...] = (
    (
        "product-search",
        "Product search",
        "Finds catalog products and ranks them by relevance or by customer interactions.",
        (
            "Which five products get the most attention from shoppers?",
            "Do we carry any insulated water bottles, and how popular are they?",
        ),
    ),
    (
        "interaction-analysis",
        "Interaction analysis",
        "Counts and searches customer interactions across web, in-store camera and social "
        "channels, optionally for a time range.",
        (
            "How many social media interactions did we log last month?",
            "Show recent in-store observations about checkout queues.",
            "What is the split of interactions per channel this week?",
        ),
    ),
    (
        "pattern-insights",
        "Pattern insights",
        "Surfaces detected behavioral patterns: trends, anomalies, segments, seasonality, "
        "churn risks and product affinities.",
        (
            "Have any unusual spikes in activity been detected recently?",
            "Which customer segments look likely to churn?",
        ),
    ),
    (
        "org-context",
        "Organization context",
        "Answers from the company's own knowledge base: profile, policies, stores, "
        "competitors and programs.",
        (
            "What does our loyalty program offer members?",
            "Summarize the shipping policy for online orders.",
        ),
    ),
)


def agent_card(rpc_url: str) -> AgentCard:
    """The card, with the JSON-RPC endpoint at ``rpc_url`` (A2A 1.0, and 0.3 on the same URL)."""
    return AgentCard(
        name="Ask CROW",
        description="Retail-analytics assistant: answers questions about an organization's "
        "products, customer interactions, detected patterns and company knowledge, with "
        "footnoted sources. Send an API key of the organization: 'Authorization: Bearer <key>'.",
        version="0.1.0",
        provider=AgentProvider(organization="CROW", url="https://crow.example"),
        supported_interfaces=[
            AgentInterface(url=rpc_url, protocol_binding="JSONRPC", protocol_version="1.0"),
            AgentInterface(url=rpc_url, protocol_binding="JSONRPC", protocol_version="0.3"),
        ],
        capabilities=AgentCapabilities(streaming=False, push_notifications=False),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[_skill(*skill) for skill in _SKILLS],
        security_schemes={
            BEARER_SCHEME: SecurityScheme(
                http_auth_security_scheme=HTTPAuthSecurityScheme(
                    scheme="Bearer",
                    bearer_format="API key",
                    description="An API key of the organization: 'Authorization: Bearer <key>'.",
                )
            )
        },
        security_requirements=[SecurityRequirement(schemes={BEARER_SCHEME: StringList()})],
    )


def _skill(skill_id: str, name: str, description: str, examples: tuple[str, ...]) -> AgentSkill:
    return AgentSkill(
        id=skill_id,
        name=name,
        description=description,
        tags=["retail", skill_id.split("-")[0]],
        examples=list(examples),
    )


class SessionMap:
    """Client conversation ids (A2A context id, legacy sessionId) -> chat session, per org,
    kept in the chat store: any Ingress replica continues any conversation."""

    async def resolve(self, services: Services, org_id: str, external_id: str | None) -> str:
        """The chat session for ``external_id``: itself if it is an org chat session, the one
        mapped to it, or a fresh one (remembered for the next message)."""
        store = services.store
        if external_id:
            if await store.get_session(org_id, external_id) is not None:
                return external_id
            mapped = await store.a2a_session(org_id, external_id)
            if mapped and await store.get_session(org_id, mapped) is not None:
                return mapped
        session = await new_session(services, org_id, "chat", None)
        if external_id:
            await store.map_a2a_session(org_id, external_id, session["id"])
        return str(session["id"])


def _idempotency_key(context: RequestContext) -> str | None:
    """The client's message id: a resent message/send is answered once (ids the chat API
    accepts are ``[A-Za-z0-9_-]{1,64}``; others are hashed into that shape)."""
    raw = context.message.message_id if context.message else ""
    if not raw:
        return None
    return "a2a-" + hashlib.sha256(raw.encode()).hexdigest()[:32]


def _org(context: ServerCallContext) -> str:
    return str(context.state.get("org_id", ""))


class CrowAgentExecutor(AgentExecutor):
    """One A2A task per message: the chat answer as a text artifact, sources as metadata."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        state = context.call_context.state
        services: Services = state["services"]
        org_id, sessions = _org(context.call_context), state["sessions"]
        task_id, context_id = str(context.task_id), str(context.context_id)
        if context.current_task is None:
            history = [context.message] if context.message else []
            await event_queue.enqueue_event(
                new_task(task_id, context_id, TaskState.TASK_STATE_SUBMITTED, history=history)
            )
        updater = TaskUpdater(event_queue, task_id, context_id)
        question = context.get_user_input().strip()
        limit = services.settings.limits.max_message_chars
        if not question or len(question) > limit:
            why = (
                "send the question as a text part"
                if not question
                else (f"the question is longer than {limit} characters")
            )
            await updater.reject(new_text_message(why, context_id=context_id, task_id=task_id))
            return
        await updater.start_work()
        try:
            session_id = await sessions.resolve(services, org_id, context_id)
            answer = await need(services.chat, "chat").send(
                org_id, session_id, question, message_id=_idempotency_key(context)
            )
        except (ModelError, SessionNotFound, AnswerInProgress) as exc:
            message = (
                f"the model could not answer: {exc}"
                if isinstance(exc, ModelError)
                else (chat_error(exc).message)
            )
            await updater.failed(new_text_message(message, context_id=context_id, task_id=task_id))
            return
        await updater.add_artifact(
            [new_text_part(answer["content"])],
            name="answer",
            metadata={"sources": answer.get("sources") or [], "chat_session_id": session_id},
        )
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id, context_id = str(context.task_id), str(context.context_id)
        await TaskUpdater(event_queue, task_id, context_id).cancel()


class _OrgContextBuilder(DefaultServerCallContextBuilder):
    """The call context of a request whose org the route has already checked."""

    def __init__(self, sessions: SessionMap) -> None:
        self.sessions = sessions

    def build(self, request: Request) -> ServerCallContext:
        context = super().build(request)
        context.state["org_id"] = request.state.org_id
        context.state["services"] = request.app.state.services
        context.state["sessions"] = self.sessions
        return context


@dataclass
class A2AState:
    """Per app: the conversation mapping, and the a2a-sdk JSON-RPC dispatcher over it."""

    sessions: SessionMap
    dispatcher: JsonRpcDispatcher


def a2a_state(app: Any) -> A2AState:
    """The app's A2A state, made on first use (no work at import or app build time)."""
    state = getattr(app.state, "a2a", None)
    if state is None:
        sessions = SessionMap()
        handler = DefaultRequestHandler(
            agent_executor=CrowAgentExecutor(),
            task_store=ChatStoreTaskStore(),  # per org, in the chat store: any replica reads it
            agent_card=agent_card(A2A_RPC_PATH),
        )
        dispatcher = JsonRpcDispatcher(
            handler, context_builder=_OrgContextBuilder(sessions), enable_v0_3_compat=True
        )
        state = app.state.a2a = A2AState(sessions, dispatcher)
    return state
