"""The rule-based scripted model: greeting, single-tool and multi-tool answers by rule.

One double for every test and benchmark that needs a model which never runs out: the Serve
tests and the graph benchmark name its factories in ``llm: {backend: custom, factory: ...}``
(``testing.rule_model:rule_model``, ``:rule_model_slow``, ``:bench_model``); in-process tests
call them. A queue of scripted turns is models.testing.ScriptedChatModel, which this extends.

It costs no generation time, so what remains of an answer's latency is the app's own. The
benchmark's model first sleeps the latency written in the file named by
``$BENCH_MODEL_LATENCY_FILE`` (milliseconds; no variable or no file: 0). The file is read per
call, so one running Serve app serves both the zero-latency overhead runs and the
fixed-latency load runs; the variable is set before Ray starts, so the LLM replica inherits it.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from crow.chat.agent.cues import is_count_question, is_small_talk
from models.messages import (
    AssistantTurn,
    Message,
    ModelParams,
    NamedToolChoice,
    ToolCall,
    ToolSpec,
)
from models.testing import ScriptedChatModel

LATENCY_FILE_ENV = "BENCH_MODEL_LATENCY_FILE"
GREETING = "Hello! Ask me about your retail data."
STORY = " ".join(f"Chapter {i} of the story." for i in range(500))  # streamed slowly
STORY_PIECE_S = 0.02  # between two-word pieces of the story: ~25 s in all, to be stopped


def file_latency_s() -> float:
    """The latency the benchmark wrote to ``$BENCH_MODEL_LATENCY_FILE``, in seconds."""
    path = os.environ.get(LATENCY_FILE_ENV)
    try:
        return float(Path(path).read_text()) / 1000 if path else 0.0
    except (OSError, ValueError):
        return 0.0


def set_latency_ms(path: Path, ms: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{ms:g}")


def rule(
    messages: Sequence[Message], tools: Sequence[ToolSpec], params: ModelParams
) -> AssistantTurn:
    """Tool results -> a short answer from them; a named tool choice -> that tool; otherwise
    a count -> the summary, small talk -> a greeting, anything else -> products and patterns
    at once."""
    question = next((m.content for m in reversed(messages) if m.role == "user"), "")
    if messages[-1].role == "tool" or not tools or params.tool_choice == "none":
        return AssistantTurn(text=_answer(messages))
    if isinstance(params.tool_choice, NamedToolChoice):
        name = params.tool_choice.name
        args = {} if name == "get_interaction_summary" else {"query": question}
        return _calls((name, args))
    if is_count_question(question):
        return _calls(("get_interaction_summary", {}))
    if "story" in question.lower():
        return AssistantTurn(text=STORY)
    if is_small_talk(question):
        return AssistantTurn(text=GREETING)
    return _calls(
        ("search_products", {"query": question, "sort": "popularity"}),
        ("search_patterns", {"query": question}),
    )


def _calls(*calls: tuple[str, dict[str, Any]]) -> AssistantTurn:
    return AssistantTurn(
        tool_calls=tuple(
            ToolCall(id=f"c{i}", name=n, arguments=a) for i, (n, a) in enumerate(calls)
        ),
        finish_reason="tool_calls",
    )


def _answer(messages: Sequence[Message]) -> str:
    results: list[dict[str, Any]] = []
    for m in reversed(messages):
        if m.role != "tool":
            break
        results.insert(0, json.loads(m.content))
    if not results:
        return GREETING
    parts = []
    for r in results:
        if "total_interactions" in r:
            parts.append(f"You have {r['total_interactions']:,} interactions.")
        for key in ("products", "patterns", "interactions", "documents"):
            if rows := r.get(key):
                titles = ", ".join(str(row.get("title") or row.get("id")) for row in rows[:3])
                parts.append(f"Top {key}: {titles}.")
    return " ".join(parts) or "I found nothing about that."


class RuleModel(ScriptedChatModel):
    """:func:`rule` for every request, after ``latency()`` seconds; never runs out."""

    def __init__(self, latency: Callable[[], float] = lambda: 0.0) -> None:
        super().__init__()
        self._latency = latency

    async def request(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] = (),
        params: ModelParams | None = None,
    ) -> AssistantTurn:
        self.add(rule)
        self.calls.clear()  # long runs: keep no history of requests
        if (delay := self._latency()) > 0:
            await asyncio.sleep(delay)
        return await super().request(messages, tools, params)

    def delta_delay_for(self, turn: AssistantTurn) -> float:
        """The story slowly, two words at a time (a client can stop it); the rest at once."""
        return STORY_PIECE_S if turn.text == STORY else 0.0


def rule_model() -> RuleModel:
    return RuleModel()


def rule_model_slow() -> RuleModel:
    """The same rules with a fixed 0.2 s per model call, so requests are in flight."""
    return RuleModel(lambda: 0.2)


def bench_model() -> RuleModel:
    """The graph benchmark's model: the latency its file names (see the module's doc)."""
    return RuleModel(file_latency_s)
