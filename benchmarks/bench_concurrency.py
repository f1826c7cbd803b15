"""The real local model under concurrent chats: answers per minute at 1, 4 and 8 chats, with
llama.cpp's continuous batching on and off, side by side in one run.

*On*: the configured runtime with ``slots`` sequences decoded together (``llm.slots``, at
least 2); *off*: the same runtime with one slot, so a request waits until the one before it
is answered. Both models are loaded at once and the levels alternate between them (on, off,
on, off, ...), so a noisy machine hurts both alike. Each answer goes through
``ChatService.send`` in this process (real model, embedder, indexes, analytics and a DuckDB
chat store), each in a new session; a level asks ``answers(c)`` questions of the benchmark's
mix (greeting, single-tool, multi-tool in turn) over ``c`` chats, each chat asking its next
question when its last is answered. One untimed warm-up answer per model first (the system
prompt into its prefix cache, as in a running app).

With ``allotted_s`` (``make bench --budget-minutes``), a level that would not fit the time
left, estimated from each mode's seconds per answer at its latest level, asks one question
per chat instead, and the levels that still do not fit are left out; ``reduced`` says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
from collections.abc import Callable
from typing import Any

from benchmarks.bench_common import pct
from benchmarks.questions import all_questions
from crow.app import LocalApp, chat_model
from crow.chat.agent.config import AgentConfig
from crow.chat.service import ChatService
from crow.settings import AppSettings

WAIT_S = 900.0  # a model call may wait for 7 answers before its own with one slot


def with_slots(settings: AppSettings, slots: int, callers: int) -> AppSettings:
    """`settings` with `slots` decoded together, room for `callers` at once, and model
    deadlines long enough for a request that waits for the ones before it."""
    llm = settings.llm.model_copy(update={"slots": slots, "max_waiting": max(callers, 1)})
    timeouts = settings.timeouts.model_copy(update={"model_s": WAIT_S})
    return settings.model_copy(update={"llm": llm, "timeouts": timeouts})


def bench_concurrency(
    app: LocalApp,
    org_id: str,
    *,
    levels: tuple[int, ...] = (1, 4, 8),
    answers: Callable[[int], int] = lambda c: max(c, 4),
    allotted_s: float | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """``app``'s settings name the model; its slots (at least 2) are *on*, one slot *off*;
    ``allotted_s``: seconds for the timed levels (None: every level at full size)."""
    from tqdm import tqdm

    on_slots = max(app.settings.llm.slots, 2)
    modes = {"on": on_slots, "off": 1}
    models: dict[str, Any] = {}
    out: dict[str, Any] = {
        "model": f"{app.settings.llm.model} ({app.settings.llm.backend})",
        "slots": modes,
        "answers_per_level": {str(c): answers(c) for c in levels},
        "levels": {mode: [] for mode in modes},
        "reduced": None,
    }
    notes: list[str] = []
    try:
        chats: dict[str, ChatService] = {}
        for mode, slots in modes.items():
            settings = with_slots(app.settings, slots, max(levels))
            started = time.perf_counter()
            models[mode] = chat_model(settings)
            out.setdefault("load_s", {})[mode] = round(time.perf_counter() - started, 1)
            chats[mode] = app.chat(models[mode], config=AgentConfig.from_settings(settings))
        app.preload(org_id)
        for chat in chats.values():  # warm-up, untimed
            asyncio.run(_ask(app, chat, org_id, "Hello!"))
        total = 2 * sum(answers(c) for c in levels)
        started = time.perf_counter()
        with tqdm(total=total, desc="real model, concurrent chats", disable=not progress) as bar:
            for n, c in enumerate(levels):
                count = answers(c)
                if allotted_s is not None and n:
                    left = allotted_s - (time.perf_counter() - started)
                    count = fit_answers(out["levels"], c, count, left)
                    if count < answers(c):
                        notes.append(
                            f"{c} chats: {count or 'no'} answers of {answers(c)} a mode "
                            f"({left / 60:.1f} min left of {allotted_s / 60:.1f})"
                        )
                    out["answers_per_level"][str(c)] = count
                    if not count:
                        break
                for mode, chat in chats.items():
                    bar.set_postfix_str(f"{c} chats, batching {mode}")
                    level = asyncio.run(_level(app, chat, org_id, c, count, bar))
                    out["levels"][mode].append(level)
    finally:
        for model in models.values():
            with contextlib.suppress(Exception):
                getattr(model, "close", lambda: None)()
    out["ratio_on_over_off"] = {
        str(on["concurrency"]): round(on["answers_per_min"] / off["answers_per_min"], 2)
        for on, off in zip(out["levels"]["on"], out["levels"]["off"], strict=True)
        if off["answers_per_min"]
    }
    if notes:
        out["reduced"] = "reduced to fit the time allotted: " + "; ".join(notes)
    return out


def fit_answers(
    done: dict[str, list[dict[str, Any]]], chats: int, wanted: int, left_s: float
) -> int:
    """Answers a mode of the next level asks: ``wanted`` if both modes fit ``left_s``, else
    one per chat if that fits, else 0. A mode's seconds per answer are those of its latest
    level (the nearest in concurrency; with one slot the answers come one at a time anyway)."""
    per_answer = sum(
        levels[-1]["wall_s"] / max(levels[-1]["answers"], 1) for levels in done.values() if levels
    )
    for count in (wanted, chats):
        if count * per_answer <= left_s:
            return count
    return 0


async def _ask(app: LocalApp, chat: ChatService, org_id: str, question: str) -> dict[str, Any]:
    session = await asyncio.to_thread(app.store.create_session, org_id)
    return await chat.send(org_id, session["id"], question)


async def _level(
    app: LocalApp, chat: ChatService, org_id: str, concurrency: int, count: int, bar: Any
) -> dict[str, Any]:
    pool = [q for _, q in all_questions()]
    todo = list(range(count))
    latencies: list[float] = []
    errors: list[str] = []
    fallbacks = 0

    async def client() -> None:
        nonlocal fallbacks
        while todo:
            n = todo.pop(0)
            t0 = time.perf_counter()
            try:
                message = await _ask(app, chat, org_id, pool[n % len(pool)])
            except Exception as exc:  # counted and reported, the level goes on
                errors.append(f"{type(exc).__name__}: {exc}"[:200])
            else:
                latencies.append(time.perf_counter() - t0)
                fallbacks += bool((message.get("timings") or {}).get("fallback"))
            bar.update()

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(concurrency)))
    wall = time.perf_counter() - started
    return {
        "concurrency": concurrency,
        "answers": len(latencies),
        "errors": len(errors),
        "error_examples": sorted(set(errors))[:3],
        "fallbacks": fallbacks,
        "wall_s": round(wall, 1),
        "answers_per_min": round(60 * len(latencies) / wall, 2),
        "p50_s": pct(latencies, 50) if latencies else None,
        "mean_s": round(statistics.fmean(latencies), 2) if latencies else None,
    }
