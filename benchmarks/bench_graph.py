"""The whole Serve graph with a scripted model: per-request overhead, and throughput under load.

One start of serve_config.yaml (``testing.local_app.serve_config_app``: HTTP proxy,
Ingress, Orchestrator, LLM, ChatStore, Embedder, Retriever, Analytics, as `serve run` deploys
them) with ``testing.rule_model`` as the LLM, over the demo org's data and indexes;
the LLM deployment's response cache is off so every request reaches the model.

(a) **Overhead**: the same questions, one at a time, through HTTP -> the graph and through
    ``ChatService.send`` in this process (same scripted model, real embedder, retriever,
    analytics and a DuckDB chat store of its own), alternating the two paths request by
    request; the model takes no time, so what is measured is the app's own work.
(b) **Load**: the model sleeps a fixed time per call; at each concurrency, that many clients
    (one session each) ask the mixed questions back to back for a fixed duration.

The graph's requests carry an editor API key of the org (made in the app's chat store before
it starts) and the app runs with rate limits far above the load (``QUOTAS``), so the limiter
never answers 429: every request still pays for its key check and rate bookkeeping.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import statistics
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks.bench_common import pct
from benchmarks.questions import QUESTION_TYPES, all_questions
from benchmarks.serve_trace import breakdown, logging_options, read_calls, summarize
from crow.app import LocalApp
from testing.rule_model import LATENCY_FILE_ENV, bench_model, set_latency_ms

FACTORY = "testing.rule_model:bench_model"
MESSAGES = "/api/v1/chat/sessions"
# Per-key rate limits (settings.quotas) far above what the load sends: throughput, not 429s.
QUOTAS = {
    "chat_per_minute": 1e6,
    "chat_burst": 100_000,
    "search_per_minute": 1e6,
    "search_burst": 100_000,
}


def bench_graph(
    direct: LocalApp,
    work: Path,
    org_id: str,
    *,
    rounds: int = 10,
    levels: tuple[int, ...] = (1, 8, 32, 64),
    duration_s: float = 12.0,
    model_latency_ms: float = 200.0,
    progress: bool = True,
) -> dict[str, Any]:
    """``direct``: the in-process path (its settings name the data and indexes both use)."""
    from testing.local_app import serve_config_app

    var = work / "graph-var"
    shutil.rmtree(var, ignore_errors=True)  # the app's chat DB of a last run
    latency_file = work / "model_latency_ms"
    logs = work / "graph-logs"  # the replicas' JSON access logs: the overhead's breakdown
    shutil.rmtree(logs, ignore_errors=True)
    set_latency_ms(latency_file, 0)
    s = direct.settings
    llm = {"backend": "custom", "factory": FACTORY, "cache_entries": 0}
    out: dict[str, Any] = {
        "model": f"{FACTORY} (scripted; response cache off)",
        "rate_limits": QUOTAS,
    }
    headers = api_key_headers(var, org_id)  # before the app starts: one writer once it runs
    with _env(LATENCY_FILE_ENV, str(latency_file)):
        direct.preload(org_id)
        chat = direct.chat(bench_model())
        started = time.perf_counter()
        with serve_config_app(
            var,
            None,
            llm=llm,
            quotas=QUOTAS,
            data_root=str(s.data_dir.resolve()),
            index_root=str(s.index_dir.resolve()),
            app_options=logging_options(logs),
        ) as url:
            out["app_start_s"] = round(time.perf_counter() - started, 1)
            out["overhead"], traced = asyncio.run(
                _overhead(chat, direct, url, headers, org_id, rounds, progress)
            )
            set_latency_ms(latency_file, model_latency_ms)
            out["load"] = {
                "model_latency_ms": model_latency_ms,
                "duration_s": duration_s,
                "questions": "greeting, single-tool and multi-tool questions in turn",
                "levels": [
                    asyncio.run(_level(url, headers, c, duration_s, progress)) for c in levels
                ],
                "llm_alone": [asyncio.run(_llm_alone(c, duration_s)) for c in levels],
            }
    out["overhead"]["breakdown"] = _breakdown(logs, traced)
    _model_bound(out["load"], out["overhead"]["breakdown"]["by_type"])
    return out


def _model_bound(load: dict[str, Any], by_type: dict[str, Any]) -> None:
    """Each level's answers/s next to the most the LLM deployment alone allows at that
    concurrency: its calls/s over the model calls an answer of the question mix makes."""
    pool = [kind for kind, _ in all_questions()]
    calls = statistics.fmean(by_type[kind].get("llm_calls", 0) for kind in pool)
    load["model_calls_per_answer"] = round(calls, 2)
    for level, alone in zip(load["levels"], load["llm_alone"], strict=True):
        bound = alone["calls_per_s"] / calls if calls else None
        level["model_bound_per_s"] = round(bound, 2) if bound else None
        level["ratio_to_model_bound"] = (
            round(level["throughput_per_s"] / bound, 2) if bound else None
        )


async def _llm_alone(concurrency: int, duration_s: float) -> dict[str, Any]:
    """The LLM deployment called directly (a handle from this driver), `concurrency` callers
    back to back with one-question prompts: calls/s. Calls it turns away (its queue is full:
    BackPressureError) are retried after 10 ms and counted."""
    from ray import serve
    from ray.serve.exceptions import BackPressureError

    from models.messages import Message

    llm = serve.get_deployment_handle("LLM", app_name="crow")
    questions = [q for _, q in all_questions()]
    done, refused = 0, 0
    cpu = _CpuMeter()
    until = time.perf_counter() + duration_s
    started = time.perf_counter()

    async def caller(index: int) -> None:
        nonlocal done, refused
        n = index
        while time.perf_counter() < until:
            prompt = [Message.user(questions[n % len(questions)])]
            try:
                await llm.request.remote(prompt, [], None, use_cache=False)
                done += 1
            except BackPressureError:
                refused += 1
                await asyncio.sleep(0.01)
            n += 1

    await asyncio.gather(*(caller(i) for i in range(concurrency)))
    elapsed = time.perf_counter() - started
    return {
        "concurrency": concurrency,
        "calls": done,
        "refused": refused,
        "calls_per_s": round(done / elapsed, 2),
        "cpu_percent": cpu.percent(),
    }


class _CpuMeter:
    """The machine's CPU use (percent of all cores) since it was made."""

    def __init__(self) -> None:
        import psutil

        self._psutil = psutil
        psutil.cpu_percent(interval=None)

    def percent(self) -> float:
        return float(self._psutil.cpu_percent(interval=None))


def _breakdown(logs: Path, traced: dict[str, list[tuple[str, float]]]) -> dict[str, Any]:
    """Per question type: the graph's requests split by part (benchmarks.serve_trace)."""
    calls = read_calls(logs, {rid for pairs in traced.values() for rid, _ in pairs})
    by_type: dict[str, Any] = {}
    for kind, pairs in traced.items():
        rows = [b for rid, ms in pairs if (b := breakdown(ms, calls.get(rid, [])))]
        by_type[kind] = summarize(rows)
    return {
        "source": "Serve replica access logs (JSON) joined by request id; medians per type",
        "by_type": by_type,
    }


def api_key_headers(var: Path, org_id: str) -> dict[str, str]:
    """Request headers with a new editor key of `org_id`, written to `var`'s chat store (call
    it before the app starts there: the store file has one writer once the app runs)."""
    from crow.settings import AppSettings
    from crow.store.chat_store import ChatStore

    store = ChatStore(AppSettings.from_args({"var_dir": str(var)}).chat_db_path)
    try:
        key = store.create_api_key(org_id, "editor", name="bench")["key"]
    finally:
        store.close()
    return {"Authorization": f"Bearer {key}", "X-Organization-Id": org_id}


@contextlib.contextmanager
def _env(name: str, value: str) -> Iterator[None]:
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old


def _client(url: str, headers: dict[str, str], connections: int):
    import httpx

    return httpx.AsyncClient(
        base_url=url,
        headers=headers,
        limits=httpx.Limits(max_connections=connections, max_keepalive_connections=connections),
        timeout=httpx.Timeout(120.0, connect=10.0),
    )


async def _ask(http, session_id: str, question: str) -> str:
    """Ask; the request id Serve gave the request."""
    r = await http.post(f"{MESSAGES}/{session_id}/messages", json={"content": question})
    if r.status_code != 200 or r.json().get("role") != "assistant":
        raise RuntimeError(f"{r.status_code} {r.text[:200]}")
    return str(r.headers.get("x-request-id", ""))


# -- (a) overhead ---------------------------------------------------------------------------
async def _overhead(
    chat,
    direct: LocalApp,
    url: str,
    headers: dict[str, str],
    org_id: str,
    rounds: int,
    progress: bool,
) -> tuple[dict[str, Any], dict[str, list[tuple[str, float]]]]:
    """The timings, and each graph request's (request id, client ms) by type."""
    from tqdm import tqdm

    plan = all_questions()
    traced: dict[str, list[tuple[str, float]]] = {kind: [] for kind in QUESTION_TYPES}
    times: dict[str, dict[str, list[float]]] = {
        path: {kind: [] for kind in QUESTION_TYPES} for path in ("direct", "graph")
    }
    async with _client(url, headers, 1) as http:
        graph_sid = {k: (await http.post(MESSAGES)).json()["id"] for k in QUESTION_TYPES}
        direct_sid = {k: direct.store.create_session(org_id)["id"] for k in QUESTION_TYPES}

        async def one(path: str, kind: str, question: str) -> tuple[float, str]:
            started = time.perf_counter()
            rid = ""
            if path == "graph":
                rid = await _ask(http, graph_sid[kind], question)
            else:
                await chat.send(org_id, direct_sid[kind], question)
            return (time.perf_counter() - started) * 1000, rid

        for kind, question in plan:  # warm-up: first calls, index loads, connections
            await one("direct", kind, question)
            await one("graph", kind, question)
        with tqdm(
            total=rounds * len(plan) * 2,
            desc="graph overhead (scripted model, 0 ms)",
            unit="req",
            disable=not progress,
        ) as bar:
            for r in range(rounds):
                for kind, question in plan:
                    for path in ("direct", "graph") if r % 2 == 0 else ("graph", "direct"):
                        ms, rid = await one(path, kind, question)
                        times[path][kind].append(ms)
                        if rid:
                            traced[kind].append((rid, ms))
                        bar.update()
    by_type = {
        kind: _compare(times["direct"][kind], times["graph"][kind]) for kind in QUESTION_TYPES
    }
    every = {p: [x for v in times[p].values() for x in v] for p in times}
    return {
        "rounds": rounds,
        "order": "direct and graph alternate request by request (which goes first alternates)",
        "by_type": by_type,
        "all": _compare(every["direct"], every["graph"]),
        "samples_ms": {
            p: {k: [round(x, 3) for x in v] for k, v in d.items()} for p, d in times.items()
        },
    }, traced


def _compare(direct: list[float], graph: list[float]) -> dict[str, Any]:
    d, g = _stats(direct), _stats(graph)
    return {
        "n": len(direct),
        "direct_ms": d,
        "graph_ms": g,
        "ratio_p50": round(g["p50"] / d["p50"], 2),
        "added_ms_p50": round(g["p50"] - d["p50"], 2),
    }


def _stats(values: list[float]) -> dict[str, float]:
    return {
        "p50": pct(values, 50),
        "p99": pct(values, 99),
        "mean": round(statistics.fmean(values), 3),
    }


# -- (b) load -------------------------------------------------------------------------------
async def _level(
    url: str, headers: dict[str, str], concurrency: int, duration_s: float, progress: bool
) -> dict[str, Any]:
    from tqdm import tqdm

    latencies: list[float] = []
    errors: list[str] = []
    async with _client(url, headers, concurrency) as http:
        sids = [(await http.post(MESSAGES)).json()["id"] for _ in range(concurrency)]
        pool = all_questions()
        cpu = _CpuMeter()
        started = time.perf_counter()
        until = started + duration_s

        async def client(index: int, sid: str) -> None:
            n = index
            while time.perf_counter() < until:
                _, question = pool[n % len(pool)]
                t0 = time.perf_counter()
                try:
                    await _ask(http, sid, question)
                    latencies.append(time.perf_counter() - t0)
                except Exception as exc:  # counted and reported, the run goes on
                    errors.append(f"{type(exc).__name__}: {exc}"[:200])
                n += 1

        with tqdm(
            total=round(duration_s),
            desc=f"graph load c={concurrency}",
            unit="s",
            disable=not progress,
        ) as bar:

            async def tick() -> None:
                while bar.n < bar.total:
                    await asyncio.sleep(1)
                    bar.set_postfix(answers=len(latencies), errors=len(errors))
                    bar.update()

            ticker = asyncio.create_task(tick())
            await asyncio.gather(*(client(i, sid) for i, sid in enumerate(sids)))
            ticker.cancel()
        elapsed = time.perf_counter() - started
    has = bool(latencies)
    return {
        "concurrency": concurrency,
        "answers": len(latencies),
        "errors": len(errors),
        "error_examples": sorted(set(errors))[:3],
        "elapsed_s": round(elapsed, 2),
        "throughput_per_s": round(len(latencies) / elapsed, 2),
        "cpu_percent": cpu.percent(),
        "p50_s": pct(latencies, 50) if has else None,
        "p99_s": pct(latencies, 99) if has else None,
        "mean_s": round(statistics.fmean(latencies), 3) if has else None,
    }
