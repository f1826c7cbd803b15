"""An agent's answer: its text with footnotes to the sources it rests on, its tool steps and
timings, and the stream's last events that deliver it."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from crow.chat.agent.sources import Source, select_sources, with_footnotes
from crow.chat.agent.step import AgentRun


@dataclass
class AgentAnswer:
    content: str  # the answer with its footnotes
    sources: list[Source]
    tool_steps: list[dict[str, Any]]
    timings: dict[str, float]
    fallback: str | None = None  # "composed", or why the plain fallback call answered
    iterations: int = 0
    tokens: int = 0  # model tokens read and written (the organization's daily quota)


def finish(run: AgentRun, text: str, fallback: str | None, started: float) -> AgentAnswer:
    """The answer, sent as the stream's last events: ``text_replaced`` when the final text
    differs from what was shown, the footnotes, ``sources`` and ``done``."""
    sources = select_sources(text, run.returned)
    text = with_footnotes(text, ())  # the answer as stored, before its footnotes
    answer = AgentAnswer(
        content=with_footnotes(text, sources),
        sources=sources,
        tool_steps=run.steps,
        timings={
            "model_s": round(run.model_s, 3),
            "tools_s": round(run.tools_s, 3),
            "route_s": round(run.route_s, 3),
            "total_s": round(time.perf_counter() - started, 3),
        },
        fallback=fallback,
        iterations=run.calls,
        tokens=run.tokens,
    )
    if run.shown.strip() != text.strip():
        run.emit({"type": "text_replaced", "text": text, "reason": fallback or "final_answer"})
    if footnotes := answer.content[len(text) :]:
        run.emit({"type": "text_delta", "text": footnotes})
    run.emit({"type": "sources", "sources": [s.model_dump() for s in sources]})
    run.emit({"type": "done", "answer": answer})
    return answer
