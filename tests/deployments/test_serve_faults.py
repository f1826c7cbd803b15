"""Replica failures under chat traffic: Serve restarts the Orchestrator and the ChatStore,
every request ends (answered, or an error in the JSON error shape, never a hang) and a
client that retries with the same message_id gets each question stored and answered once."""

from __future__ import annotations

import random
import threading
import time
import uuid
from dataclasses import dataclass, field

import httpx
import pytest

from tests.demo_env import seed_demo
from tests.serve_support import APP_NAME, api_keys, serve_config_app, wait_until

pytestmark = pytest.mark.serve

ORG = "acme-outdoor"
# Rate limits far above the clients' pace: the faults are under test, not the limiter.
QUOTAS = {
    "chat_per_minute": 1e6,
    "chat_burst": 100_000,
    "search_per_minute": 1e6,
    "search_burst": 100_000,
}
CLIENTS = 4
HTTP_TIMEOUT_S = 30.0  # any call taking longer counts as a hang
ATTEMPTS, BACKOFF_S = 8, 0.5  # a client's retry policy (same message_id each time)
RECOVERY_DEADLINE_S = 45.0


@dataclass
class Sent:
    message_id: str
    content: str
    attempts: list[dict] = field(default_factory=list)  # {"start", "end", "status"|"exc", ...}
    answer: dict | None = None


@dataclass
class Client:
    session_id: str
    sent: list[Sent] = field(default_factory=list)


def _ask(http: httpx.Client, client: Client, n: int) -> None:
    content = random.choice(["Hello", "How many interactions do we have?"]) + f" (#{n})"
    sent = Sent(message_id=uuid.uuid4().hex, content=content)
    client.sent.append(sent)
    for attempt in range(ATTEMPTS):
        start = time.monotonic()
        record: dict = {"start": start}
        sent.attempts.append(record)
        try:
            r = http.post(
                f"/api/v1/chat/sessions/{client.session_id}/messages",
                json={"content": content, "message_id": sent.message_id},
            )
        except httpx.TimeoutException as exc:
            record.update(end=time.monotonic(), exc=f"timeout: {exc!r}")
            return  # a hang: no retry, the test fails on it
        except httpx.TransportError as exc:
            record.update(end=time.monotonic(), exc=repr(exc))
        else:
            record.update(end=time.monotonic(), status=r.status_code, body=r.text)
            if r.status_code == 200:
                sent.answer = r.json()
                return
            if r.status_code < 500:
                return
        time.sleep(BACKOFF_S * (attempt + 1))


def _run_client(url: str, headers: dict, client: Client, stop: threading.Event) -> None:
    with httpx.Client(base_url=url, headers=headers, timeout=HTTP_TIMEOUT_S) as http:
        n = 0
        while not stop.is_set():
            _ask(http, client, n)
            n += 1


def _replica_names(deployment: str) -> set[str]:
    import ray

    prefix = f"SERVE_REPLICA::{APP_NAME}#{deployment}#"
    return {
        a["name"]
        for a in ray.util.list_named_actors(all_namespaces=True)
        if a["namespace"] == "serve" and a["name"].startswith(prefix)
    }


def _kill_replica(deployment: str) -> tuple[str, float]:
    import ray

    (name,) = _replica_names(deployment)
    ray.kill(ray.get_actor(name, namespace="serve"), no_restart=True)
    return name, time.monotonic()


def _answered_since(clients: list[Client], since: float) -> bool:
    return any(
        a.get("status") == 200 and a["start"] > since
        for c in clients
        for s in c.sent
        for a in s.attempts
    )


def _history(http: httpx.Client, session_id: str) -> list[dict]:
    messages, before = [], None
    while True:
        params = {"limit": 100} | ({"before": before} if before else {})
        page = http.get(f"/api/v1/chat/sessions/{session_id}/messages", params=params).json()
        messages = page["messages"] + messages
        if not page["has_more"]:
            return messages
        before = page["next_before"]


def test_replica_kills_under_chat_traffic(tmp_path):
    var = tmp_path / "var"
    seed_demo(var, ORG)
    headers = api_keys(var, [ORG])[ORG]  # before the app starts on var
    with serve_config_app(var, "testing.rule_model:rule_model_slow", quotas=QUOTAS) as url:
        http = httpx.Client(base_url=url, headers=headers, timeout=HTTP_TIMEOUT_S)
        clients = [Client(http.post("/api/v1/chat/sessions").json()["id"]) for _ in range(CLIENTS)]
        stop = threading.Event()
        threads = [
            threading.Thread(target=_run_client, args=(url, headers, c, stop), daemon=True)
            for c in clients
        ]
        for t in threads:
            t.start()
        recovery: dict[str, float] = {}
        try:
            time.sleep(3)
            assert _answered_since(clients, 0), "no answer before the faults"
            for deployment in ("Orchestrator", "ChatStore"):
                killed, at = _kill_replica(deployment)
                wait_until(
                    lambda at=at: _answered_since(clients, at),
                    RECOVERY_DEADLINE_S,
                    f"no answer within {RECOVERY_DEADLINE_S}s of killing {deployment}",
                )
                recovery[deployment] = round(
                    min(
                        a["end"]
                        for c in clients
                        for s in c.sent
                        for a in s.attempts
                        if a.get("status") == 200 and a["start"] > at
                    )
                    - at,
                    2,
                )
                replicas = _replica_names(deployment)
                assert replicas and killed not in replicas  # Serve started a new replica
                time.sleep(2)
        finally:
            stop.set()
            for t in threads:
                t.join(timeout=ATTEMPTS * (HTTP_TIMEOUT_S + BACKOFF_S * ATTEMPTS))
        assert not any(t.is_alive() for t in threads), "a client hung"
        assert wait_until(lambda: httpx.get(f"{url}/ready", timeout=10).status_code == 200, 30)

        sent = [s for c in clients for s in c.sent]
        attempts = [a for s in sent for a in s.attempts]
        failures = [a for a in attempts if a.get("status") != 200]
        print(
            f"\nrecovery after kill (s): {recovery}; messages {len(sent)}, attempts "
            f"{len(attempts)}, failed attempts {len(failures)}, answered "
            f"{sum(s.answer is not None for s in sent)}"
        )
        for a in failures:
            print("  failed attempt:", a.get("status"), (a.get("body") or a.get("exc"))[:200])
        # Never a hang; every error is an HTTP answer in the JSON error shape.
        assert not [a for a in failures if "exc" in a and a["exc"].startswith("timeout")]
        for a in failures:
            assert "status" in a, f"no HTTP answer: {a['exc']}"
            error = httpx.Response(a["status"], text=a["body"]).json()["error"]
            assert isinstance(error["code"], str) and isinstance(error["message"], str), a
            # A killed replica is a 503 the client may retry, not an internal error.
            assert (a["status"], error["code"]) == (503, "unavailable"), a
        # The client's retries got every question through both faults.
        assert not [(s.content, s.attempts[-1]) for s in sent if s.answer is None]

        for c in clients:
            stored = _history(http, c.session_id)
            ids = [m["id"] for m in stored]
            assert len(ids) == len(set(ids)), "a message is stored twice"
            users = [m for m in stored if m["role"] == "user"]
            assert len({m["content"] for m in users}) == len(users), "a question is stored twice"
            for i, m in enumerate(stored[1:], 1):  # no answer without its question, none twice
                assert m["role"] == "user" or stored[i - 1]["role"] == "user", stored[i - 1 : i + 1]
            position = {m["id"]: i for i, m in enumerate(stored)}
            for s in c.sent:
                if s.answer is None:
                    continue
                assert [m["content"] for m in users].count(s.content) == 1
                i = position[
                    f"{c.session_id}:{s.message_id}"
                ]  # client ids are scoped to their session
                assert stored[i]["content"] == s.content
                assert stored[i + 1]["role"] == "assistant"
                assert stored[i + 1]["id"] == s.answer["id"]
                assert stored[i + 1]["content"] == s.answer["content"]
        http.close()
