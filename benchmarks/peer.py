"""A peer for Ask CROW's loop: pydantic-ai's Agent with the same prompt, tools and model.

    python -m benchmarks.peer [benchmarks.agent_compare's options: --eval-file, --org, --limit,
                               --baseline, --out]

The peer is given what Ask CROW's loop is given: the system prompt, the five tools with the
same names, descriptions and JSON schemas, each calling the same ``Tool.invoke``, and the
same ChatModel instance, reached the way a framework reaches a self-hosted model: over the
OpenAI-compatible server (models/openai_server.py) on a local port. It has none of the loop's
aids for small models (routing hints, answer checks, footnotes). Whatever
pydantic-ai raises (retries or usage limit exceeded, model errors) ends that answer with
``error`` set; it never ends a run. The CLI asks both agents each question, interleaved
(benchmarks/agent_compare.py).
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from importlib.metadata import version
from typing import Any

from pydantic import ValidationError
from pydantic_ai import (
    Agent,
    ModelRetry,
    ModelSettings,
    RunContext,
    ToolFailed,
    UsageLimits,
    capture_run_messages,
)
from pydantic_ai import Tool as PeerTool
from pydantic_ai.messages import ModelResponse, ToolCallPart
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.profiles.openai import OpenAIModelProfile
from pydantic_ai.providers.openai import OpenAIProvider

from crow.chat.agent.context import ToolContext
from crow.chat.agent.sources import Source
from crow.chat.agent.tool import Tool
from crow.chat.agent.tools import TOOLS
from crow.settings import AppSettings
from models.chat import ChatModel
from models.messages import Message, ModelParams
from models.openai_server import build_openai_app
from models.testing import serve_in_thread

FRAMEWORK = "pydantic-ai"


@dataclass(frozen=True)
class PeerConfig:
    """The limits of Ask CROW's loop, in pydantic-ai's terms."""

    max_requests: int = 5
    """Model requests per question (UsageLimits.request_limit), like AgentConfig.max_iterations."""
    model_timeout_s: float = 90.0
    tool_timeout_s: float = 15.0
    max_tokens: int = 512
    retries: int = 1
    """Retries per tool after a call the tool rejects (pydantic-ai's default)."""
    model_name: str = "local"

    @classmethod
    def from_settings(cls, settings: AppSettings, *, max_tokens: int = 512) -> PeerConfig:
        return cls(
            max_requests=settings.limits.max_iterations,
            max_tokens=max_tokens,
            model_timeout_s=settings.timeouts.model_s,
            tool_timeout_s=settings.timeouts.tool_s,
        )


@dataclass
class PeerAnswer:
    """What jobs.grading.grade reads (content, tool_steps, sources, fallback, timings), and more."""

    content: str
    sources: list[Source]
    tool_steps: list[dict[str, Any]]
    timings: dict[str, float]
    fallback: str | None = None  # the peer has no fallback
    error: str | None = None
    requests: int = 0
    trace: list[dict[str, Any]] = field(default_factory=list)
    """Each model response: its finish reason, text and every tool call (rejected ones too)."""


@dataclass
class _Deps:
    ctx: ToolContext
    steps: list[dict[str, Any]] = field(default_factory=list)
    sources: list[Source] = field(default_factory=list)
    tools_s: float = 0.0


def peer_tool(tool: Tool) -> PeerTool[_Deps]:
    """`tool` for pydantic-ai: its name, description and JSON schema, and its own invoke."""

    async def call(run: RunContext[_Deps], **arguments: Any) -> str:
        deps, started = run.deps, time.perf_counter()
        try:
            output = await tool.invoke(arguments, deps.ctx)
        except ValidationError as exc:  # not run: pydantic-ai's way is another try
            raise ModelRetry(f"invalid arguments: {exc}") from None
        except Exception as exc:  # a failing tool is reported to the model, as Ask CROW does
            error = f"{type(exc).__name__}: {exc}"[:300]
            deps.steps.append(_step(run, tool, arguments, started, error=error))
            raise ToolFailed(f"{tool.name} failed: {error}") from None
        finally:
            deps.tools_s += time.perf_counter() - started
        deps.sources.extend(output.sources)
        deps.steps.append(_step(run, tool, arguments, started, results=len(output.sources)))
        return output.for_model()

    spec = tool.spec
    return PeerTool.from_schema(
        call,
        name=spec.name,
        description=spec.description,
        json_schema=spec.parameters,
        takes_ctx=True,
    )


def _step(
    run: RunContext[_Deps],
    tool: Tool,
    arguments: dict[str, Any],
    started: float,
    *,
    error: str | None = None,
    results: int = 0,
) -> dict[str, Any]:
    return {
        "id": run.tool_call_id,
        "name": tool.name,
        "arguments": arguments,
        "ok": error is None,
        "error": error,
        "results": results,
        "ms": round((time.perf_counter() - started) * 1000, 1),
    }


class PeerAgent:
    """pydantic-ai's Agent over the OpenAI-compatible endpoint at `base_url` (…/v1)."""

    def __init__(self, base_url: str, config: PeerConfig, *, tools: Sequence[Tool] = TOOLS) -> None:
        self.config = config
        model = OpenAIChatModel(
            config.model_name,
            provider=OpenAIProvider(base_url=base_url, api_key="peer"),
            # Schemas go out as Ask CROW sends them: OpenAI's strict-mode rewrite would add
            # additionalProperties: false, and the server would then reject extra arguments.
            profile=OpenAIModelProfile(json_schema_transformer=None),
        )
        settings = ModelSettings(
            temperature=0.0,
            max_tokens=config.max_tokens,
            timeout=config.model_timeout_s + 5,
            max_retries=0,
        )
        self.agent = Agent(
            model,
            deps_type=_Deps,
            tools=[peer_tool(t) for t in tools],
            model_settings=settings,
            retries=config.retries,
            tool_timeout=config.tool_timeout_s,
        )

    async def run(self, messages: list[Message], ctx: ToolContext) -> PeerAnswer:
        """Answer the last user message, with the system messages as instructions."""
        system = "\n\n".join(m.content for m in messages if m.role == "system")
        question = next(m.content for m in reversed(messages) if m.role == "user")
        deps, started = _Deps(ctx), time.perf_counter()
        content, error = "", None
        with capture_run_messages() as history:
            try:
                result = await self.agent.run(
                    question,
                    instructions=system,
                    deps=deps,
                    usage_limits=UsageLimits(request_limit=self.config.max_requests),
                )
                content = result.output
            except Exception as exc:  # pydantic-ai's failures are results here, not crashes
                error = f"{type(exc).__name__}: {exc}"[:500]
        responses = [m for m in history if isinstance(m, ModelResponse)]
        return PeerAnswer(
            content=content,
            sources=list({(s.type, s.id): s for s in deps.sources}.values()),
            tool_steps=deps.steps,
            error=error,
            requests=len(responses),
            trace=[_traced(r) for r in responses],
            timings={
                "tools_s": round(deps.tools_s, 3),
                "total_s": round(time.perf_counter() - started, 3),
            },
        )


def _traced(response: ModelResponse) -> dict[str, Any]:
    calls = [
        {"name": p.tool_name, "arguments": p.args}
        for p in response.parts
        if isinstance(p, ToolCallPart)
    ]
    return {
        "finish_reason": response.finish_reason,
        "text": (response.text or "")[:300],
        "calls": calls,
    }


@contextlib.contextmanager
def serve_model(model: ChatModel, config: PeerConfig) -> Iterator[str]:
    """`model` behind the OpenAI-compatible server on a free local port; yields its …/v1 URL."""
    defaults = ModelParams(max_tokens=config.max_tokens, timeout_s=config.model_timeout_s)
    app = build_openai_app(model, model_name=config.model_name, default_params=defaults)
    with serve_in_thread(app) as url:
        yield f"{url}/v1"


def framework_version() -> str:
    return f"{FRAMEWORK} {version('pydantic-ai-slim')}"


def main(argv: list[str] | None = None) -> int:
    """``benchmarks.agent_compare --peer``, writing to var/bench/peer.json unless told otherwise."""
    from benchmarks.agent_compare import main as compare_main

    return compare_main(
        ["--peer", "--out", "var/bench/peer.json", *(sys.argv[1:] if argv is None else argv)]
    )


if __name__ == "__main__":
    sys.exit(main())
