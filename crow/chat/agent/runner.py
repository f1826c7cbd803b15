"""Tool calls run for the agent: each once per answer, bounded in time, failures reported to
the model."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

from crow.chat.agent.context import ToolContext
from crow.chat.agent.guidance import copies_the_hint
from crow.chat.agent.sources import Source
from crow.chat.agent.step import AgentRun
from crow.chat.agent.tool import Tool
from indexes.store import IndexNotFoundError
from models.messages import Message, ToolCall

STILL_INDEXING = (
    "search is still being prepared: this organization's data is being indexed. "
    "Tell the user to try again in a minute"
)


async def run_tool(
    tool: Tool | None,
    call: ToolCall,
    ctx: ToolContext,
    timeout_s: float,
    refused: str | None = None,
) -> tuple[dict[str, Any], str, list[Source]]:
    """(the step as recorded, the result the model reads, the sources it returned). A
    failing, slow or unknown tool, or a call ``refused`` before it runs, becomes an error
    result: never fatal to the answer."""
    started = time.perf_counter()
    sources: list[Source] = []
    charts: list[dict[str, Any]] = []
    try:
        if tool is None:
            raise LookupError(f"there is no tool named {call.name!r}")
        if refused is not None:
            raise ValueError(refused)
        async with asyncio.timeout(timeout_s):
            output = await tool.invoke(call.arguments, ctx)
        content, sources, error = output.for_model(), output.sources, None
        charts = [chart.model_dump() for chart in output.charts]
    except TimeoutError:
        error = f"the tool took longer than {timeout_s:g}s"
    except IndexNotFoundError:  # a first indexing is running (or none has run yet)
        error = STILL_INDEXING
    except Exception as exc:  # a failing tool is reported to the model
        error = f"{type(exc).__name__}: {exc}"[:300]
    if error is not None:
        content = json.dumps({"error": f"{call.name} failed: {error}"})
    step = {
        "id": call.id,
        "name": call.name,
        "arguments": call.arguments,
        "ok": error is None,
        "error": error,
        "results": len(sources),
        "charts": charts,
        "ms": round((time.perf_counter() - started) * 1000, 1),
    }
    return step, content, sources


def _hint_copied(tool: Tool | None, call: ToolCall, hint: str, asked: Sequence[str]) -> str | None:
    query = call.arguments.get("query")
    if not (isinstance(query, str) and copies_the_hint(query, hint, asked)):
        return None
    field = tool.args.model_fields.get("query") if tool is not None else None
    optional = field is not None and not field.is_required()  # a search of everything
    return (
        f"the query {query!r} is words of the suggestion after the question, not of the "
        "question; write the query from what the question asks about"
        + (", or an empty query if it names no topic" if optional else "")
    )


def fresh_calls(calls: Sequence[ToolCall], seen: set[str]) -> list[ToolCall]:
    """The calls not run before in this answer (small models repeat themselves)."""
    fresh = []
    for call in calls:
        key = json.dumps([call.name, call.arguments], sort_keys=True, default=str)
        if key not in seen:
            seen.add(key)
            fresh.append(call)
    return fresh


async def run_tools(
    tools: Mapping[str, Tool],
    calls: Sequence[ToolCall],
    run: AgentRun,
    ctx: ToolContext,
    timeout_s: float,
) -> list[dict[str, Any]]:
    """One step's calls in parallel; their results join the run's messages in call order."""
    started = time.perf_counter()
    asked = [m.content for m in run.messages if m.role == "user"]
    refusals = [_hint_copied(tools.get(c.name), c, run.hint, asked) for c in calls]
    run.refused += sum(r is not None for r in refusals)
    results = await asyncio.gather(
        *(
            run_tool(tools.get(c.name), c, ctx, timeout_s, refused)
            for c, refused in zip(calls, refusals, strict=True)
        )
    )
    run.tools_s += time.perf_counter() - started
    for call, (step, content, sources) in zip(calls, results, strict=True):
        run.messages.append(Message.tool(content, tool_call_id=call.id, name=call.name))
        run.outputs.append((call.name, json.loads(content)))
        run.returned.extend(sources)
        run.steps.append(step)
    return [step for step, _, _ in results]
