"""Model factories for Serve tests (`llm: {backend: custom, factory: ...}`); the helper that
runs serve_config.yaml on a private local Ray instance lives in testing.local_app."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from crow.settings import AppSettings
from crow.store.chat_store import ChatStore
from models.messages import AssistantTurn, Message, ModelParams, ToolCall, ToolSpec
from models.testing import ScriptedChatModel
from testing.local_app import APP_NAME, ROOT, free_port, serve_config_app, wait_until

__all__ = [
    "APP_NAME",
    "ROOT",
    "api_keys",
    "free_port",
    "rule_model",
    "rule_model_slow",
    "serve_config_app",
    "wait_until",
]


def api_keys(var: Path, orgs: Sequence[str], role: str = "editor") -> dict[str, dict[str, str]]:
    """Request headers with a new API key per org, written to `var`'s chat store before the
    app starts there (the store file has one writer once it runs)."""
    from tests.conftest import key_headers

    store = ChatStore(AppSettings.from_args({"var_dir": str(var)}).chat_db_path)
    try:
        return {org: key_headers(store, org, role) for org in orgs}
    finally:
        store.close()


def _count_then_answer(
    messages: Sequence[Message], tools: Sequence[ToolSpec], params: ModelParams
) -> AssistantTurn:
    last = messages[-1]
    results = [json.loads(last.content)] if last.role == "tool" else []
    if totals := [r["total_interactions"] for r in results if "total_interactions" in r]:
        return AssistantTurn(text=f"You have {totals[-1]:,} interactions.")
    if tools and "how many" in last.content.lower():
        return AssistantTurn(
            tool_calls=(ToolCall(id="c1", name="get_interaction_summary", arguments={}),),
            finish_reason="tool_calls",
        )
    return AssistantTurn(text="Hello! Ask me about your retail data.")


class _Endless(ScriptedChatModel):
    """Answers every request with the same rule (a scripted model that never runs out)."""

    async def request(self, messages, tools=(), params=None):
        self.add(_count_then_answer)
        self.calls.clear()  # long runs: keep no history of requests
        return await super().request(messages, tools, params)


def rule_model() -> ScriptedChatModel:
    return _Endless(latency_s=0.0)


def rule_model_slow() -> ScriptedChatModel:
    """The same rules with a fixed 0.2 s per model call, so requests are in flight."""
    return _Endless(latency_s=0.2)
