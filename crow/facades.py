"""The async facades the request path awaits (``await x.method(...)``), as Protocols.

In process they are :class:`crow.services.ThreadProxy` objects over the blocking components
(or the components themselves, where already async); under Serve, DeploymentHandle facades of
the same shape. Each Protocol names the methods the core calls, with the component's signature
and an awaitable result.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

if TYPE_CHECKING:
    from crow.retrieval.sort_order import SortOrder
    from crow.store.chat_store import Role, SessionKind
    from crow.store.feedback import Rating
    from crow.store.jobs import JobState
    from indexes.filters import SearchFilter

Row = dict[str, Any]
"""A stored record as the store returns it (a session, a message, a key, a job run)."""


class EmbedderFacade(Protocol):
    """models.embedder.Embedder: texts -> ``(n, dim)`` float32 rows, L2-normalized."""

    def embed(self, texts: list[str]) -> Awaitable[np.ndarray]: ...


class RetrieverFacade(Protocol):
    """crow.retrieval.search.SearchService."""

    def search(
        self,
        org_id: str,
        collection: str,
        vector: np.ndarray | None,
        *,
        k: int = 10,
        flt: SearchFilter | None = None,
        sort: SortOrder = "relevance",
        counted: SearchFilter | None = None,
    ) -> Awaitable[list[Row]]: ...
    def readiness(self, org_id: str) -> Awaitable[dict[str, str | None]]: ...
    def product_categories(self, org_id: str) -> Awaitable[list[str]]: ...


class AnalyticsFacade(Protocol):
    """crow.data.analytics.Analytics."""

    def interaction_summary(
        self,
        org_id: str,
        *,
        channel: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> Awaitable[dict[str, Any]]: ...

    def data_time_range(
        self, org_id: str
    ) -> Awaitable[tuple[datetime | None, datetime | None]]: ...


class StoreFacade(Protocol):
    """crow.store.chat_store.ChatStore (with its Access and A2AState parts)."""

    def create_session(
        self,
        org_id: str,
        *,
        kind: SessionKind = "chat",
        title: str | None = None,
        max_sessions: int | None = None,
    ) -> Awaitable[Row | None]: ...
    def get_session(
        self, org_id: str, session_id: str, *, kind: SessionKind = "chat"
    ) -> Awaitable[Row | None]: ...
    def list_sessions(
        self, org_id: str, *, kind: SessionKind = "chat", limit: int = 20, offset: int = 0
    ) -> Awaitable[tuple[list[Row], int]]: ...
    def delete_session(
        self, org_id: str, session_id: str, *, kind: SessionKind = "chat"
    ) -> Awaitable[bool]: ...
    def add_message(
        self,
        org_id: str,
        session_id: str,
        role: Role,
        content: str,
        *,
        kind: SessionKind = "chat",
        sources: list[dict[str, Any]] | None = None,
        tool_steps: list[dict[str, Any]] | None = None,
        timings: dict[str, Any] | None = None,
        message_id: str | None = None,
    ) -> Awaitable[Row | None]: ...
    def get_message(self, org_id: str, message_id: str) -> Awaitable[Row | None]: ...
    def list_messages(
        self, org_id: str, session_id: str, *, limit: int = 50, before: int | None = None
    ) -> Awaitable[list[Row]]: ...
    def start_turn(
        self,
        org_id: str,
        session_id: str,
        content: str,
        *,
        kind: SessionKind = "chat",
        message_id: str | None = None,
        history: int = 50,
    ) -> Awaitable[tuple[list[Row], Row] | None]: ...
    def finish_turn(
        self,
        org_id: str,
        session_id: str,
        content: str,
        *,
        tokens: int,
        kind: SessionKind = "chat",
        message_id: str | None = None,
        sources: list[dict[str, Any]] | None = None,
        tool_steps: list[dict[str, Any]] | None = None,
        timings: dict[str, Any] | None = None,
        stopped: bool = False,
        regenerated_from: str | None = None,
    ) -> Awaitable[Row | None]: ...
    def record_index_version(
        self, org_id: str, collection: str, version: str, *, kind: str, row_count: int, model: str
    ) -> Awaitable[None]: ...
    def create_job_run(
        self,
        org_id: str,
        kind: str,
        *,
        job_id: str | None = None,
        collections: list[str] | None = None,
    ) -> Awaitable[Row]: ...
    def update_job_run(
        self,
        org_id: str,
        job_id: str,
        *,
        state: JobState | None = None,
        rows_done: int | None = None,
        rows_total: int | None = None,
        detail: str | None = None,
        timings: dict[str, float] | None = None,
    ) -> Awaitable[None]: ...
    def get_job_run(self, org_id: str, job_id: str) -> Awaitable[Row | None]: ...
    def latest_job_run(self, org_id: str, kind: str) -> Awaitable[Row | None]: ...
    def claim_answer(
        self, org_id: str, answer_id: str, *, stale_after_s: float
    ) -> Awaitable[bool]: ...
    def renew_claim(self, org_id: str, answer_id: str) -> Awaitable[None]: ...
    def release_answer(self, org_id: str, answer_id: str) -> Awaitable[None]: ...
    # Feedback and chat search.
    def set_feedback(
        self,
        org_id: str,
        session_id: str,
        message_id: str,
        rating: Rating,
        *,
        comment: str | None = None,
        correction: str | None = None,
    ) -> Awaitable[Row | None]: ...
    def delete_feedback(self, org_id: str, session_id: str, message_id: str) -> Awaitable[bool]: ...
    def feedback_rows(
        self,
        org_id: str,
        *,
        since: datetime | None = None,
        rating: Rating | None = None,
        limit: int = 1000,
    ) -> Awaitable[list[Row]]: ...
    def search_chats(
        self, org_id: str, text: str, *, limit: int = 20, offset: int = 0
    ) -> Awaitable[tuple[list[Row], int]]: ...
    # Access: API keys, rate limits and token quotas.
    def create_api_key(
        self, org_id: str, role: str, *, name: str | None = None, expires_at: datetime | None = None
    ) -> Awaitable[Row]: ...
    def list_api_keys(self, org_id: str | None = None) -> Awaitable[list[Row]]: ...
    def revoke_api_key(self, key_id: str, *, org_id: str | None = None) -> Awaitable[bool]: ...
    def authenticate(self, key: str) -> Awaitable[Row | None]: ...
    def admit(
        self,
        bucket: str,
        *,
        per_minute: float,
        burst: int,
        org_id: str | None = None,
        daily_tokens: int = 0,
    ) -> Awaitable[tuple[str, float] | None]: ...
    def add_usage(self, org_id: str, tokens: int) -> Awaitable[None]: ...
    def usage_today(self, org_id: str) -> Awaitable[int]: ...
    # A2AState: A2A tasks (JSON bodies) and A2A contexts mapped to chat sessions.
    def save_a2a_task(
        self,
        org_id: str,
        task_id: str,
        context_id: str,
        state: str,
        final: bool,
        body: str,
        *,
        retention_s: float,
    ) -> Awaitable[None]: ...
    def get_a2a_task(self, org_id: str, task_id: str) -> Awaitable[str | None]: ...
    def list_a2a_tasks(
        self, org_id: str, context_id: str | None = None
    ) -> Awaitable[list[str]]: ...
    def delete_a2a_task(self, org_id: str, task_id: str) -> Awaitable[None]: ...
    def a2a_session(self, org_id: str, external_id: str) -> Awaitable[str | None]: ...
    def map_a2a_session(
        self, org_id: str, external_id: str, session_id: str
    ) -> Awaitable[None]: ...


class IndexerFacade(Protocol):
    """crow.retrieval.index_control.IndexControl (already async)."""

    def index_documents(
        self, org_id: str, records: list[dict[str, Any]], vectors: np.ndarray
    ) -> Awaitable[str]: ...
    def submit(self, org_id: str, collections: list[str], full: bool) -> Awaitable[Row]: ...
    def status(self, org_id: str, job_id: str) -> Awaitable[Row | None]: ...
    def schedule(self, org_id: str) -> Awaitable[dict[str, Any]]: ...


class ChatFacade(Protocol):
    """crow.chat.service.ChatService (already async)."""

    def send(
        self,
        org_id: str,
        session_id: str,
        content: str,
        *,
        kind: SessionKind = "chat",
        message_id: str | None = None,
    ) -> Awaitable[dict[str, Any]]: ...
    def send_events(
        self,
        org_id: str,
        session_id: str,
        content: str,
        *,
        kind: SessionKind = "chat",
        message_id: str | None = None,
    ) -> AsyncIterator[dict[str, Any]]: ...
    def regenerate_events(
        self, org_id: str, session_id: str, answer_id: str
    ) -> AsyncIterator[dict[str, Any]]: ...
    def ask_kb(
        self,
        org_id: str,
        question: str,
        *,
        session_id: str | None = None,
        message_id: str | None = None,
    ) -> Awaitable[dict[str, Any]]: ...
