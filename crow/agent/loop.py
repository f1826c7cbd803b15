"""The agent loop: history + tools -> model -> tools in parallel -> ... -> answer with footnotes.

Reads top-down: ``run`` -> ``_iterate`` -> ``_step`` (model) -> ``_run_tools``. At most
``max_iterations`` model calls with tools; past that, or when the loop fails, one plain call
without tools answers from what was gathered. Events stream out as they happen: every model
step streams, and its text reaches the client as ``text_delta`` events while it is written.
When the text shown is not the final answer (it was a preamble to tool calls, or a check
composed the answer from the data), a ``text_replaced`` event says so and carries the text
that replaces it; the footnotes follow the answer as a last ``text_delta``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from crow.agent.compose import (
    ECHO_STOPS,
    compose,
    count_is_wrong,
    invented_names,
    looks_unusable,
)
from crow.agent.context import ToolContext
from crow.agent.grounding import fill_arguments, ground_arguments
from crow.agent.intent import IntentRouter, Route
from crow.agent.prompts import SMALL_TALK_NOTE, answer_from_data
from crow.agent.router import (
    is_count_question,
    is_org_question,
    is_small_talk,
    wants_more_than_a_count,
)
from crow.agent.sources import Source, select_sources, with_footnotes
from crow.agent.tools import TOOLS, TOOLS_BY_NAME, Tool
from models.chat import ChatModel
from models.errors import ModelError
from models.messages import (
    AssistantTurn,
    Message,
    ModelParams,
    NamedToolChoice,
    TextDelta,
    ToolCall,
    ToolChoice,
    TurnDone,
)
from models.toolparse import retry_message

if TYPE_CHECKING:
    from crow.settings import AppSettings

log = logging.getLogger(__name__)

COUNT_ANSWER_TOKENS = 160
"""A count answer is a few lines; a small model that goes on past them is inventing."""


@dataclass(frozen=True)
class AgentConfig:
    max_iterations: int = 5
    """Model calls with tools before the plain fallback call."""
    tool_timeout_s: float = 15.0
    model_timeout_s: float = 90.0
    max_tokens: int = 512
    ground_arguments: bool = False
    """Drop filters the question never asked for (small models invent them)."""
    route_small_talk: bool = False
    """Answer greetings and thanks without offering tools (small models call one anyway)."""
    route_counts: bool = False
    """Make get_interaction_summary the first call of a count question."""
    router: Literal["off", "advisory", "force"] = "off"
    """The semantic intent router: call the routed tools ("force"), or name them as a hint."""
    route_arguments: Literal["question", "model"] = "question"
    """Routed searches: the question is the query ("question") or the model writes the call."""

    @classmethod
    def from_settings(cls, s: AppSettings) -> AgentConfig:
        return cls(
            max_iterations=s.limits.max_iterations, tool_timeout_s=s.timeouts.tool_s,
            model_timeout_s=s.timeouts.model_s, max_tokens=s.llm.max_tokens,
            ground_arguments=s.agent.ground_arguments, route_small_talk=s.agent.route_small_talk,
            route_counts=s.agent.route_counts, router=s.agent.router,
            route_arguments=s.agent.route_arguments,
        )  # fmt: skip


@dataclass
class AgentAnswer:
    content: str  # the answer with its footnotes
    sources: list[Source]
    tool_steps: list[dict[str, Any]]
    timings: dict[str, float]
    fallback: str | None = None  # why the plain fallback call answered, if it did
    iterations: int = 0


@dataclass
class _Run:
    messages: list[Message]
    returned: list[Source] = field(default_factory=list)
    outputs: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)  # tool calls already run (name + arguments)
    steps: list[dict[str, Any]] = field(default_factory=list)
    emit: Callable[[dict[str, Any]], None] = lambda event: None
    """Where a model step's text deltas go while it streams (the events queue)."""
    shown: str = ""
    """The answer text streamed to the client so far."""
    model_s: float = 0.0
    tools_s: float = 0.0
    route_s: float = 0.0


class Agent:
    def __init__(self, model: ChatModel, config: AgentConfig | None = None,
                 tools: Sequence[Tool] = TOOLS) -> None:  # fmt: skip
        self.model = model
        self.config = config or AgentConfig()
        self.tools = {t.name: t for t in tools}
        self.specs = [t.spec for t in tools]
        self.router = IntentRouter()

    async def run(self, messages: list[Message], ctx: ToolContext) -> AgentAnswer:
        answer = None
        async for event in self.events(messages, ctx):
            if event["type"] == "done":
                answer = event["answer"]
        assert answer is not None
        return answer

    async def events(
        self, messages: list[Message], ctx: ToolContext
    ) -> AsyncIterator[dict[str, Any]]:
        """tool_call_started / tool_call_finished / text_delta ... sources, done."""
        queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        task = asyncio.ensure_future(self._answer(messages, ctx, queue.put_nowait))
        task.add_done_callback(lambda _: queue.put_nowait(None))
        try:
            while (event := await queue.get()) is not None:
                yield event
            await task  # its errors surface here
        finally:
            if not task.done():  # the client went away: stop the model and the tools
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    async def _answer(
        self, messages: list[Message], ctx: ToolContext, emit: Callable[[dict[str, Any]], None]
    ) -> None:
        started = time.perf_counter()
        run = _Run(list(messages), emit=emit)
        text, fallback, iterations = None, None, 0
        try:
            async for event in self._iterate(run, ctx):
                if event["type"] == "final":
                    text, iterations = event["text"], event["iterations"]
                else:
                    emit(event)
            if text is None:
                fallback, iterations = "max_iterations", self.config.max_iterations
        except ModelError as exc:
            log.warning("agent loop failed (%s); falling back to a plain call", exc)
            fallback = f"error: {type(exc).__name__}"
        if text is None:
            text = await self._plain(run)
        if run.outputs and self._needs_composing(text, run):
            text, fallback = compose(run.outputs), fallback or "composed"
        sources = select_sources(text, run.returned)
        answer = AgentAnswer(
            content=with_footnotes(text, sources), sources=sources, tool_steps=run.steps,
            timings={"model_s": round(run.model_s, 3), "tools_s": round(run.tools_s, 3),
                     "route_s": round(run.route_s, 3),
                     "total_s": round(time.perf_counter() - started, 3)},
            fallback=fallback, iterations=iterations,
        )  # fmt: skip
        text = with_footnotes(text, ())  # the answer as stored, before its footnotes
        if run.shown.strip() != text.strip():
            emit({"type": "text_replaced", "text": text, "reason": fallback or "final_answer"})
        if footnotes := answer.content[len(text) :]:
            emit({"type": "text_delta", "text": footnotes})
        emit({"type": "sources", "sources": [s.model_dump() for s in sources]})
        emit({"type": "done", "answer": answer})

    async def _iterate(self, run: _Run, ctx: ToolContext) -> AsyncIterator[dict[str, Any]]:
        question = _question(run.messages)
        if self.config.route_small_talk and is_small_talk(question):
            yield {"type": "final", "text": await self._small_talk(run, question), "iterations": 1}
            return
        route = await self._route(run, ctx, question)
        if route is not None and self.config.router == "force":
            async for event in self._follow(run, ctx, route, question):
                yield event
            return
        if route is not None and self.config.router == "advisory":
            run.messages.append(Message.system(_hint(route)))
        first: ToolChoice = "auto"
        answer_after: str | None = None  # the one tool whose result is all the answer needs
        if self.config.route_counts and is_count_question(question):
            first = NamedToolChoice(name="get_interaction_summary")
            answer_after = None if wants_more_than_a_count(question) else first.name
        elif self.config.route_counts and is_org_question(question):
            first = NamedToolChoice(name="search_org_context")
            answer_after = first.name
        for iteration in range(1, self.config.max_iterations + 1):
            if answer_after and any(name == answer_after for name, _ in run.outputs):
                # The routed tool's result is all the answer needs: answer from it now.
                text = (await self._step(run, tools=False)).text
                yield {"type": "final", "text": text, "iterations": iteration}
                return
            choice = first if iteration == 1 else "auto"
            turn = await self._step(run, tools=True, choice=choice)
            if (
                isinstance(choice, NamedToolChoice)
                and not turn.tool_calls
                and turn.invalid_tool_calls
            ):
                # The routed call came out malformed: its arguments are all optional, and the
                # ones the question states are filled in from the question itself.
                args = _question_arguments(choice.name, question)
                turn = AssistantTurn(
                    tool_calls=(ToolCall(id="routed", name=choice.name, arguments=args),)
                )
            if turn.invalid_tool_calls and not turn.tool_calls:
                run.messages.append(turn.to_message())
                run.messages.append(
                    Message.user(retry_message(turn.invalid_tool_calls, self.specs))
                )
                continue
            fresh = _fresh_calls(turn.tool_calls, run.seen)
            if not fresh:
                # No tool calls, or only ones already answered: the model has what it asked for.
                text = turn.text if not turn.tool_calls else ""
                yield {"type": "final", "text": text, "iterations": iteration}
                return
            run.messages.append(Message.assistant(turn.text, tuple(fresh)))
            for call in fresh:
                yield {"type": "tool_call_started", "name": call.name, "arguments": call.arguments}
            for step in await self._run_tools(fresh, run, ctx):
                yield {"type": "tool_call_finished", **step}

    async def _route(self, run: _Run, ctx: ToolContext, question: str) -> Route | None:
        """The router's intents for the question; None when it is off, unsure or fails."""
        if self.config.router == "off" or not question.strip():
            return None
        started = time.perf_counter()
        try:
            async with asyncio.timeout(self.config.tool_timeout_s):
                route = await self.router.route(question, partial(_embed, ctx))
        except Exception as exc:  # the router only helps; the model can still choose
            log.warning("intent router failed (%s); the model chooses the tools", exc)
            return None
        finally:
            run.route_s += time.perf_counter() - started
        return None if route.abstained else route

    async def _follow(
        self, run: _Run, ctx: ToolContext, route: Route, question: str
    ) -> AsyncIterator[dict[str, Any]]:
        """Call the routed tools in order, then have the model answer from their results."""
        if route.small_talk:
            yield {"type": "final", "text": await self._small_talk(run, question), "iterations": 1}
            return
        asked = list(run.messages)
        for n, name in enumerate(route.tools, start=1):
            call = await self._routed_call(run, name, question, f"route-{n}")
            run.messages.append(Message.assistant("", (call,)))
            yield {"type": "tool_call_started", "name": call.name, "arguments": call.arguments}
            for step in await self._run_tools([call], run, ctx):
                yield {"type": "tool_call_finished", **step}
        results = [(name, json.dumps(out, ensure_ascii=False)) for name, out in run.outputs]
        messages = _replace_question(asked, answer_from_data(question, results))
        counts_only = all(name == "get_interaction_summary" for name, _ in run.outputs)
        text = (await self._step(run, tools=False, messages=messages,
                                 max_tokens=COUNT_ANSWER_TOKENS if counts_only else None)).text  # fmt: skip
        yield {"type": "final", "text": text, "iterations": len(route.tools) + 1}

    async def _routed_call(self, run: _Run, name: str, question: str, call_id: str) -> ToolCall:
        """A routed tool's call: its arguments from the question, or written by the model."""
        if self.config.route_arguments == "model" and name != "get_interaction_summary":
            turn = await self._step(run, tools=True, choice=NamedToolChoice(name=name))
            named = [c for c in turn.tool_calls if c.name == name]
            if named:
                return named[0]
        arguments, _ = fill_arguments(name, question, _question_arguments(name, question))
        return ToolCall(id=call_id, name=name, arguments=arguments)

    async def _small_talk(self, run: _Run, question: str) -> str:
        """A short natural reply, no tools (the note keeps a small model from reciting data)."""
        messages = _replace_question(run.messages, f"{question}\n\n{SMALL_TALK_NOTE}")
        return (await self._step(run, tools=False, messages=messages)).text

    async def _step(
        self, run: _Run, *, tools: bool, choice: ToolChoice = "auto",
        messages: list[Message] | None = None, max_tokens: int | None = None,
    ) -> AssistantTurn:  # fmt: skip
        params = ModelParams(
            max_tokens=min(max_tokens or self.config.max_tokens, self.config.max_tokens),
            timeout_s=self.config.model_timeout_s,
            tool_choice=choice if tools else "none",
            stop=ECHO_STOPS if run.outputs else (),  # don't wait for a copy of the results
        )  # fmt: skip
        started = time.perf_counter()
        specs = self.specs if tools else []
        turn: AssistantTurn | None = None
        fresh = True  # this step's first piece of text replaces what an earlier one showed
        try:
            async for event in self.model.stream(messages or run.messages, specs, params):
                if isinstance(event, TextDelta):
                    if fresh and run.shown:
                        run.emit({"type": "text_replaced", "text": "", "reason": "next_step"})
                        run.shown = ""
                    fresh = False
                    run.shown += event.text
                    run.emit({"type": "text_delta", "text": event.text})
                elif isinstance(event, TurnDone):
                    turn = event.turn
        finally:
            run.model_s += time.perf_counter() - started
        if turn is None:
            raise ModelError("the model's stream ended without its turn")
        return turn

    async def _run_tools(
        self, calls: Sequence[ToolCall], run: _Run, ctx: ToolContext
    ) -> list[dict[str, Any]]:
        started = time.perf_counter()
        question = _question(run.messages)
        results = await asyncio.gather(*(self._run_tool(call, ctx, question) for call in calls))
        run.tools_s += time.perf_counter() - started
        steps = []
        for call, (step, content, sources) in zip(calls, results, strict=True):
            run.messages.append(Message.tool(content, tool_call_id=call.id, name=call.name))
            run.outputs.append((call.name, json.loads(content)))
            run.returned.extend(sources)
            run.steps.append(step)
            steps.append(step)
        return steps

    async def _run_tool(
        self, call: ToolCall, ctx: ToolContext, question: str
    ) -> tuple[dict[str, Any], str, list[Source]]:
        tool = self.tools.get(call.name) or TOOLS_BY_NAME.get(call.name)
        started = time.perf_counter()
        sources: list[Source] = []
        arguments, dropped, added = call.arguments, [], []
        if self.config.ground_arguments:
            arguments, dropped = ground_arguments(question, call.arguments)
            arguments, added = fill_arguments(call.name, question, arguments)
        try:
            if tool is None:
                raise LookupError(f"there is no tool named {call.name!r}")
            async with asyncio.timeout(self.config.tool_timeout_s):
                output = await tool.invoke(arguments, ctx)
            content, sources, error = output.for_model(), output.sources, None
        except TimeoutError:
            error = f"the tool took longer than {self.config.tool_timeout_s:g}s"
        except Exception as exc:  # a failing tool is reported to the model, never fatal
            error = f"{type(exc).__name__}: {exc}"[:300]
        if error is not None:
            content = f'{{"error": "{call.name} failed: {_escape(error)}"}}'
        step = {"id": call.id, "name": call.name, "arguments": arguments, "dropped": dropped, "added": added, "ok": error is None,
                "error": error, "results": len(sources),
                "ms": round((time.perf_counter() - started) * 1000, 1)}  # fmt: skip
        return step, content, sources

    @staticmethod
    def _needs_composing(text: str, run: _Run) -> bool:
        """The model's text is unusable, names something no tool returned, or states a count
        the summary tool did not give."""
        question = _question(run.messages)
        if looks_unusable(text) or invented_names(text, run.outputs, question):
            return True
        summaries = [
            c for name, c in run.outputs if name == "get_interaction_summary" and "error" not in c
        ]
        return bool(summaries) and count_is_wrong(text, summaries[-1])

    async def _plain(self, run: _Run) -> str:
        """One call without tools, answering from whatever the history holds."""
        turn = await self._step(run, tools=False)
        return turn.text


def _fresh_calls(calls: Sequence[ToolCall], seen: set[str]) -> list[ToolCall]:
    """The calls not run before in this answer (small models repeat themselves)."""
    fresh = []
    for call in calls:
        key = json.dumps([call.name, call.arguments], sort_keys=True, default=str)
        if key not in seen:
            seen.add(key)
            fresh.append(call)
    return fresh


async def _embed(ctx: ToolContext, texts: list[str]) -> np.ndarray:
    """The router's texts: questions through the request's cache (a search of the question
    reuses the vector), the router's examples in one batch."""
    if len(texts) > 4:
        return await ctx.embedder.embed(texts)
    return np.stack(await asyncio.gather(*(ctx.embed(t) for t in texts)))


def _question(messages: Sequence[Message]) -> str:
    """The user's latest message."""
    return next((m.content for m in reversed(messages) if m.role == "user"), "")


def _replace_question(messages: Sequence[Message], content: str) -> list[Message]:
    """The messages with the last user message's text replaced."""
    out = list(messages)
    last = max(i for i, m in enumerate(out) if m.role == "user")
    out[last] = Message.user(content)
    return out


def _question_arguments(tool: str, question: str) -> dict[str, Any]:
    """A call's arguments when the model wrote none usable: the summary takes none (all its
    filters are optional), a search takes the question as its query."""
    return {} if tool == "get_interaction_summary" else {"query": question}


def _hint(route: Route) -> str:
    tools = ", ".join(route.tools) or "no tool (answer directly)"
    return f"Routing hint (may be wrong; follow the question): likely tools: {tools}."


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ")
