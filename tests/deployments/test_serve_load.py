"""A bounded loopback load test: concurrent chat sessions against serve_config.yaml with a
fixed-latency scripted model; no errors allowed; throughput and latency to var/bench/."""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import time
import uuid

import httpx
import pytest

from tests.demo_env import seed_demo
from tests.serve_support import ROOT, api_keys, serve_config_app

pytestmark = pytest.mark.serve

ORG = "acme-outdoor"
SESSIONS = 32
DURATION_S = 60.0
MODEL = "testing.rule_model:rule_model_slow"  # 0.2 s per model call
MODEL_LATENCY_S = 0.2
QUESTIONS = ("Hello", "How many interactions do we have?")  # 1 model call; 2 calls and a tool
RESULT = ROOT / "var" / "bench" / "load.json"
# Rate limits far above what the sessions send: the throughput is measured, not the limiter.
QUOTAS = {
    "chat_per_minute": 1e6,
    "chat_burst": 100_000,
    "search_per_minute": 1e6,
    "search_burst": 100_000,
}


async def _session(
    http: httpx.AsyncClient, index: int, until: float, latencies: list[float], errors: list[str]
) -> None:
    sid = (await http.post("/api/v1/chat/sessions")).json()["id"]
    n = 0
    while time.monotonic() < until:
        question = QUESTIONS[(index + n) % len(QUESTIONS)]
        start = time.monotonic()
        try:
            r = await http.post(
                f"/api/v1/chat/sessions/{sid}/messages",
                json={"content": f"{question} ({n})", "message_id": uuid.uuid4().hex},
            )
        except httpx.HTTPError as exc:
            errors.append(repr(exc))
        else:
            if r.status_code == 200 and r.json()["role"] == "assistant":
                latencies.append(time.monotonic() - start)
            else:
                errors.append(f"{r.status_code} {r.text[:200]}")
        n += 1


async def _load(url: str, headers: dict[str, str]) -> tuple[list[float], list[str], float]:
    latencies: list[float] = []
    errors: list[str] = []
    limits = httpx.Limits(max_connections=SESSIONS, max_keepalive_connections=SESSIONS)
    async with httpx.AsyncClient(
        base_url=url, headers=headers, limits=limits, timeout=httpx.Timeout(30.0, connect=5.0)
    ) as http:
        start = time.monotonic()
        until = start + DURATION_S
        await asyncio.gather(
            *(_session(http, i, until, latencies, errors) for i in range(SESSIONS))
        )
        return latencies, errors, time.monotonic() - start


def test_concurrent_chat_sessions_under_load(tmp_path):
    var = tmp_path / "var"
    seed_demo(var, ORG)
    headers = api_keys(var, [ORG])[ORG]  # before the app starts on var
    with serve_config_app(var, MODEL, quotas=QUOTAS) as url:
        warm = httpx.post(f"{url}/api/v1/chat/sessions", headers=headers).json()
        r = httpx.post(
            f"{url}/api/v1/chat/sessions/{warm['id']}/messages",
            timeout=30,
            json={"content": QUESTIONS[1]},
            headers=headers,
        )
        assert r.status_code == 200, r.text
        latencies, errors, elapsed = asyncio.run(_load(url, headers))
    quantiles = statistics.quantiles(latencies, n=100, method="inclusive")
    result = {
        "sessions": SESSIONS,
        "duration_s": round(elapsed, 2),
        "model_latency_s": MODEL_LATENCY_S,
        "questions": list(QUESTIONS),
        "answers": len(latencies),
        "errors": len(errors),
        "throughput_answers_per_s": round(len(latencies) / elapsed, 2),
        "latency_s": {
            "p50": round(quantiles[49], 3),
            "p99": round(quantiles[98], 3),
            "mean": round(statistics.fmean(latencies), 3),
            "max": round(max(latencies), 3),
        },
        "cpus": os.cpu_count(),
    }
    RESULT.parent.mkdir(parents=True, exist_ok=True)
    RESULT.write_text(json.dumps(result, indent=2) + "\n")
    print(f"\nload: {json.dumps(result)}")
    assert not errors, errors[:5]
    assert latencies
