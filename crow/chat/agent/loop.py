"""The agent loop: history + tools -> model -> tools in parallel -> ... -> answer with footnotes.

The model decides: each step it sees the system prompt, the conversation and the five tools
and calls tools (run in parallel) or answers. At most ``max_iterations`` steps; past that, or
when a step fails or only repeats calls, one plain call answers from what was gathered.
Small models get help they read (``hints``, crow.chat.agent.guidance), never decisions.

An answer is asked again once, a call required (the model picks which, and its arguments),
when it
- claims data with no tool run for the question (unsourced.needs_a_call: a count, "nothing
  found", a lookup announced or described but not made), or, with guidance, comes with no
  call where the routing hint named tools;
- states a fact, or that there is none, after calls that all failed (anything at all, when
  one was refused for copying the hint: it can be written again), or, without data, writes
  out the hint line;
- says a part "is not specified" after calls.

A checked answer (crow.chat.agent.checks) that fails gets one correction; failing again, it
is composed from the results and says so (``fallback: "composed"``). Text streams as
``text_delta`` events; ``text_replaced`` carries a final text that differs from what was
shown; footnotes last.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from collections.abc import AsyncGenerator, Sequence
from functools import partial
from typing import Any

from crow.chat.agent.answer import AgentAnswer, finish
from crow.chat.agent.checks import (
    answer_problem,
    for_correction,
    half_compared,
    short_of_question,
)
from crow.chat.agent.compose import ECHO_STOPS, compose
from crow.chat.agent.config import AgentConfig
from crow.chat.agent.context import ToolContext
from crow.chat.agent.events import Emit, events_of
from crow.chat.agent.guidance import Guidance, earlier_question, offered, question_of
from crow.chat.agent.runner import fresh_calls, run_tools
from crow.chat.agent.step import AgentRun, stream_step
from crow.chat.agent.tool import Tool
from crow.chat.agent.tools import TOOLS
from crow.chat.agent.unsourced import needs_a_call
from models.chat import ChatModel
from models.errors import ModelError, PromptTooLong
from models.messages import AssistantTurn, Message, ModelParams
from models.toolparse import retry_message

log = logging.getLogger(__name__)


class Agent:
    def __init__(
        self, model: ChatModel, config: AgentConfig | None = None, tools: Sequence[Tool] = TOOLS
    ) -> None:
        self.model = model
        self.config = config or AgentConfig()
        self.tools = {t.name: t for t in tools}
        self.guidance = Guidance(self.config.tool_timeout_s) if self.config.hints else None
        self.specs = [t.spec for t in tools]
        if self.guidance is not None:
            self.specs = offered(self.specs)

    async def run(self, messages: list[Message], ctx: ToolContext) -> AgentAnswer:
        answer: AgentAnswer | None = None
        async for event in self.events(messages, ctx):
            if event["type"] == "done":
                answer = event["answer"]
        assert answer is not None
        return answer

    def events(self, messages: list[Message], ctx: ToolContext) -> AsyncGenerator[dict[str, Any]]:
        """tool_call_started / tool_call_finished / text_delta ... sources, done."""
        return events_of(partial(self._answer, messages, ctx))

    async def _answer(self, messages: list[Message], ctx: ToolContext, emit: Emit) -> None:
        started = time.perf_counter()
        earlier = earlier_question(messages) or ""
        ctx = dataclasses.replace(ctx, question=question_of(messages), earlier=earlier)
        run = AgentRun(list(messages), emit)
        if self.guidance is not None:
            guided = await self.guidance.apply(run.messages, ctx)
            run.messages, run.hinted, run.hint = guided.messages, guided.hinted, guided.hint
            run.route_s = time.perf_counter() - started
        text, fallback = None, None
        try:
            text, fallback = await self._loop(run, ctx)
        except ModelError as exc:
            log.warning("agent loop failed (%s); falling back to a plain call", exc)
            fallback = f"error: {type(exc).__name__}"
        if text is None:
            text, fallback = await self._plain(run, fallback)
        text, fallback = await self._checked(run, text, fallback)
        finish(run, text, fallback, started)

    async def _loop(self, run: AgentRun, ctx: ToolContext) -> tuple[str | None, str | None]:
        """Model steps with tools until one answers in text: (the text, None), or (None, why)
        when the model only repeats calls already answered or reaches the iteration limit."""
        for _ in range(self.config.max_iterations):
            # asked again below (an answer with no tool behind it): a call must come
            turn = await self._step(run, tools=True, required=run.must_call)
            if turn.invalid_tool_calls and not turn.tool_calls:
                run.messages.append(turn.to_message())
                run.messages.append(
                    Message.user(retry_message(turn.invalid_tool_calls, self.specs))
                )
                continue
            fresh = fresh_calls(turn.tool_calls, run.seen)
            if turn.tool_calls and not fresh:
                return None, "repeated_call"
            if not fresh:
                problem = None if run.nudged else needs_a_call(turn.text, run, self.tools)
                if problem is None:
                    return turn.text, None
                # Once: the same step again, a call required. The answer is not kept: after
                # it and a correction, the 1.5B wrote the earlier question's channel again.
                log.info("answer needs a call (%s); asked again, a call required", problem)
                run.nudged = run.must_call = True
                continue
            run.must_call = False
            run.messages.append(Message.assistant(turn.text, tuple(fresh)))
            for call in fresh:
                run.emit(
                    {"type": "tool_call_started", "name": call.name, "arguments": call.arguments}
                )
            for step in await run_tools(self.tools, fresh, run, ctx, self.config.tool_timeout_s):
                run.emit({"type": "tool_call_finished", **step})
        return None, "max_iterations"

    async def _plain(self, run: AgentRun, fallback: str | None) -> tuple[str, str | None]:
        """The plain call's answer; over the prompt budget, without the tools' specs (they
        stay offered otherwise, for the prompt cache); if it fails still, one composed from
        what the tools found (a first question whose results outgrew the local model's
        prompt budget had no answer)."""
        try:
            try:
                return (await self._step(run, tools=False)).text, fallback
            except PromptTooLong:
                return (await self._step(run, tools=False, offered=False)).text, fallback
        except ModelError as exc:
            if not run.found:
                raise
            log.warning("the plain call failed too (%s); composing the answer", exc)
            return compose(run.outputs), "composed"

    async def _checked(
        self, run: AgentRun, text: str, fallback: str | None
    ) -> tuple[str, str | None]:
        """One correction round for an answer that fails a check, then the composed answer
        (a repeat of an earlier answer, one channel's count for all of them or an answer
        naming no pattern only gets the correction; a comparison given one side's figure,
        corrected for it and given one side again, is composed: blind33's and blind37's, the
        only two such answers in the stored runs, were both wrong)."""
        question = question_of(run.messages)
        problem = answer_problem(text, run.outputs, question) or short_of_question(
            text, run.outputs, run.messages, question, run.returned
        )
        if problem is None or not run.outputs or fallback == "composed":
            return text, fallback
        log.info("answer check failed (%s): %.200r", problem, text)
        halved = problem == half_compared(text, run.outputs, question)
        run.messages = for_correction(run.messages, problem, run.hint)
        with contextlib.suppress(ModelError):
            text = (await self._step(run, tools=False)).text
            problem = answer_problem(text, run.outputs, question) or (
                half_compared(text, run.outputs, question) if halved else None
            )
            if problem is None:
                return text, fallback
            log.info("corrected answer failed too (%s): %.200r", problem, text)
        return compose(run.outputs), "composed"

    async def _step(
        self,
        run: AgentRun,
        *,
        tools: bool,
        required: bool = False,
        offered: bool = True,
    ) -> AssistantTurn:
        # The tools stay offered when the step may not call them (tool_choice "none"), so a
        # model's prompt cache covers the answer step too.
        params = ModelParams(
            max_tokens=self.config.max_tokens,
            timeout_s=self.config.model_timeout_s,
            tool_choice=("required" if required else "auto") if tools else "none",
            stop=ECHO_STOPS if run.outputs else (),  # don't wait for a copy of the results
        )
        return await stream_step(self.model, self.specs if offered else (), run, params)
