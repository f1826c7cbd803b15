"""Latency breakdown of one chat answer, by question type, with the real local model.

Each answer goes through ``ChatService.send`` in this process (real model, real embedder,
real DuckDB chat store, real indexes of the demo org), its services wrapped by the timing
proxies of ``benchmarks.timeline``: model, embedding, retrieval, store, tools and the rest.
Every answer starts a new session (no history). Two warm-up answers first (a greeting and a
count question, untimed) put the system prompt, with and without tools, in the model's
prefix cache, as in a running app.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from typing import Any

from benchmarks.questions import QUESTION_TYPES, QUESTIONS
from benchmarks.timeline import ALL_PARTS, TimedModel, TimedProxy, Timeline, timed_tools
from crow.app import LocalApp
from crow.chat.agent.tools import TOOLS


def bench_breakdown(
    app: LocalApp,
    model: Any,
    org_id: str,
    *,
    reps: int = 1,
    per_type: int | None = None,
    label: str | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """``reps`` rounds over the first ``per_type`` questions (None: all) of every type;
    ``label`` names the model in the results."""
    from tqdm import tqdm

    timeline = Timeline()
    chat = app.chat(
        TimedModel(model, timeline),
        wrap=lambda part, facade: TimedProxy(facade, part, timeline),
        tools=timed_tools(TOOLS, timeline),
    )
    app.preload(org_id)
    plan = [
        (kind, q)
        for _ in range(reps)
        for kind in QUESTION_TYPES
        for q in QUESTIONS[kind][:per_type]
    ]

    async def answer(question: str) -> dict[str, Any]:
        session = await asyncio.to_thread(app.store.create_session, org_id)
        timeline.reset()
        started = time.perf_counter()
        message = await chat.send(org_id, session["id"], question)
        ended = time.perf_counter()
        parts = timeline.breakdown(started, ended)
        return {
            "question": question,
            "total_s": round(ended - started, 4),
            "parts_s": {k: round(v, 4) for k, v in parts.items()},
            "model_calls": sum(1 for p, _, _ in timeline.spans if p == "model"),
            "tools_called": [s["name"] for s in message["tool_steps"]],
            "agent_timings": message["timings"],
            "answer": message["content"][:300],
        }

    async def run() -> list[dict[str, Any]]:
        with tqdm(
            total=2 + len(plan), desc="breakdown (real model)", unit="answer", disable=not progress
        ) as bar:
            for warm in (QUESTIONS["greeting"][0], QUESTIONS["single_tool"][0]):
                await answer(warm)
                bar.update()
            samples = []
            for kind, question in plan:
                bar.set_postfix_str(kind)
                samples.append({"type": kind, **await answer(question)})
                bar.update()
            return samples

    samples = asyncio.run(run())
    return {
        "model": label or type(model).__name__,
        "org": org_id,
        "reps": reps,
        "parts": list(ALL_PARTS),
        "by_type": {
            kind: summarize([s for s in samples if s["type"] == kind]) for kind in QUESTION_TYPES
        },
        "samples": samples,
    }


def summarize(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians of the total and of each part; shares of the summed time (they add to 1)."""
    if not samples:
        return {"n": 0}
    total = sum(s["total_s"] for s in samples)
    return {
        "n": len(samples),
        "total_s_median": round(statistics.median(s["total_s"] for s in samples), 3),
        "total_s": [s["total_s"] for s in samples],
        "parts_s_median": {
            p: round(statistics.median(s["parts_s"][p] for s in samples), 4) for p in ALL_PARTS
        },
        "share": {
            p: round(sum(s["parts_s"][p] for s in samples) / total, 4) if total else 0.0
            for p in ALL_PARTS
        },
        "model_calls_median": statistics.median(s["model_calls"] for s in samples),
        "tools_called": [s["tools_called"] for s in samples],
    }
