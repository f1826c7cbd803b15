"""Limits and quotas: rate limits per key, the daily token quota, the session cap, body bounds."""

from __future__ import annotations

import time

from fastapi.testclient import TestClient

from crow.api.app import create_app
from crow.auth.limiter import TokenBuckets
from crow.settings import AppSettings
from models.messages import AssistantTurn, Usage
from models.testing import ScriptedChatModel
from tests.conftest import ORG_A, ORG_B, assert_error, key_headers, store_app
from tests.demo_env import build_demo_env

SESSIONS = "/api/v1/chat/sessions"


def demo_client(tmp_path, store, model, **overrides) -> TestClient:
    demo = build_demo_env(tmp_path / "var", interactions=200)
    demo.settings = AppSettings.from_args({"var_dir": str(tmp_path / "var"), **overrides})
    services = demo.services(model, store=store)
    return TestClient(create_app(services, chat_model=model), raise_server_exceptions=False)


def test_token_buckets_refill_at_their_rate():
    now = [0.0]
    buckets = TokenBuckets(clock=lambda: now[0])
    take = lambda: buckets.take("k", per_minute=60, burst=2)  # noqa: E731
    assert [take(), take()] == [0.0, 0.0]
    assert take() == 1.0  # one token a second: the next in 1 s
    now[0] = 0.5
    assert take() == 0.5
    now[0] = 1.0
    assert take() == 0.0 and take() > 0
    now[0] = 100.0  # refills up to the burst, not beyond
    assert [take(), take()] == [0.0, 0.0] and take() > 0
    assert buckets.take("other", per_minute=60, burst=2) == 0.0  # per key


def test_chat_and_search_rates_are_per_key_and_say_when_to_retry(tmp_path, store):
    model = ScriptedChatModel()
    # one every 3 s: an answer (guidance included) takes tens of ms, far less than a refill
    # (at 2 a second, three answers on a busy 2-core machine once outlasted a refill)
    limits = {"chat_per_minute": 20, "chat_burst": 2, "search_per_minute": 6, "search_burst": 3}
    with demo_client(tmp_path, store, model, quotas=limits) as api:
        a, a2 = key_headers(store, ORG_A, "reader"), key_headers(store, ORG_A, "reader")
        sid = api.post(SESSIONS, headers=a).json()["id"]
        model.add(*[AssistantTurn(text="Hi.")] * 4)
        ask = lambda h: api.post(f"{SESSIONS}/{sid}/messages", json={"content": "hi"}, headers=h)  # noqa: E731
        assert [ask(a).status_code, ask(a).status_code] == [200, 200]
        r = ask(a)
        assert_error(r, 429, "rate_limited")
        assert int(r.headers["retry-after"]) >= 1
        assert ask(a2).status_code == 200  # another key has its own bucket
        time.sleep(3.1)  # one every 3 s: refilled
        assert ask(a).status_code == 200
        search = lambda: api.get("/api/v1/products/search", params={"query": "tent"}, headers=a)  # noqa: E731
        codes = [search().status_code for _ in range(4)]
        assert codes == [200, 200, 200, 429]
        assert api.get(f"{SESSIONS}/{sid}", headers=a).status_code == 200  # reads aren't limited


def test_the_daily_token_quota(tmp_path, store):
    model = ScriptedChatModel()
    with demo_client(tmp_path, store, model, quotas={"daily_tokens": 50}) as api:
        a, b = key_headers(store, ORG_A), key_headers(store, ORG_B)
        sid = api.post(SESSIONS, headers=a).json()["id"]
        model.add(AssistantTurn(text="Hi.", usage=Usage(prompt_tokens=40, completion_tokens=12)))
        assert (
            api.post(f"{SESSIONS}/{sid}/messages", json={"content": "hi"}, headers=a).status_code
            == 200
        )
        usage = api.get("/api/v1/usage", headers=a).json()
        assert (usage["tokens_used"], usage["daily_token_quota"], usage["tokens_left"]) == (
            52,
            50,
            0,
        )
        for r in (
            api.post(f"{SESSIONS}/{sid}/messages", json={"content": "again"}, headers=a),
            api.post("/api/v1/qna/query", json={"content": "returns?"}, headers=a),
            api.post(
                "/v1/chat/completions",
                json={"messages": [{"role": "user", "content": "x"}]},
                headers=a,
            ),
            # an A2A message sent not to wait for (fire and forget) counts the same
            api.post(
                "/a2a",
                headers=a,
                json={
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "message/send",
                    "params": {
                        "configuration": {"blocking": False},
                        "message": {
                            "role": "user",
                            "messageId": "m",
                            "parts": [{"kind": "text", "text": "x"}],
                        },
                    },
                },
            ),
        ):
            error = assert_error(r, 429, "quota_exceeded")
            assert 0 < int(r.headers["retry-after"]) <= 86_400 and "00:00 UTC" in error["message"]
        assert api.get("/api/v1/usage", headers=b).json()["tokens_used"] == 0  # per organization
        assert api.get(f"{SESSIONS}/{sid}/messages", headers=a).status_code == 200  # history stays


def test_the_session_cap(client, settings, lake, store):
    capped = AppSettings.from_args(
        {"var_dir": str(settings.var_dir), "quotas": {"max_sessions": 2}}
    )
    app = store_app(capped, store)
    with TestClient(app) as api:
        a = client.as_org(ORG_A)
        assert api.post(SESSIONS, headers=a).status_code == 201
        assert api.post("/api/v1/qna/sessions", headers=a).status_code == 201
        assert_error(api.post(SESSIONS, headers=a), 409, "too_many_sessions")
        assert api.post(SESSIONS, headers=client.as_org(ORG_B)).status_code == 201


def chunked(size: int):
    """A body of `size` bytes sent without Content-Length (chunked transfer)."""
    yield b'{"content": "'
    for _ in range(size // 1000):
        yield b"x" * 1000
    yield b'"}'


def test_bodies_are_bounded_on_every_route_declared_or_chunked(settings, lake, store):
    small = AppSettings.from_args(
        {"var_dir": str(settings.var_dir), "limits": {"max_body_bytes": 5000}}
    )
    model = ScriptedChatModel()
    app = store_app(small, store, chat_model=model)
    a = key_headers(store, ORG_A)
    json_headers = {
        **a,
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
    }
    with TestClient(app, base_url="http://127.0.0.1:8000", raise_server_exceptions=False) as api:
        sid = api.post(SESSIONS, headers=a).json()["id"]
        for path in (
            f"{SESSIONS}/{sid}/messages",
            f"{SESSIONS}/{sid}/messages/stream",
            "/v1/chat/completions",
            "/a2a",
            "/a2a/tasks/send",
            "/mcp",
            "/api/v1/qna/index",
        ):
            r = api.post(path, content=chunked(10_000), headers=json_headers)
            assert "content-length" not in r.request.headers
            assert_error(r, 413, "payload_too_large")
            declared = api.post(path, content=b"x" * 6000, headers=json_headers)
            assert_error(declared, 413, "payload_too_large")
        assert store.list_messages(ORG_A, sid) == []  # nothing half-written
        # under the bound, a chunked body reaches the route whole
        model.add(AssistantTurn(text="Fine."))
        body = (b'{"messages": [{"role": "user", "content": "', b"x" * 3000, b'"}]}')
        r = api.post("/v1/chat/completions", content=iter(body), headers=json_headers)
        assert r.status_code == 200, r.text
    assert model.calls[-1].messages[-1].content == "x" * 3000


def test_a_slow_embedding_is_504_after_timeouts_embed_s(settings, lake, store):
    import asyncio

    class Stuck:
        async def embed(self, texts):
            await asyncio.sleep(5)

    quick = AppSettings.from_args({"var_dir": str(settings.var_dir), "timeouts": {"embed_s": 0.2}})
    with TestClient(
        store_app(quick, store, embedder=Stuck()), raise_server_exceptions=False
    ) as api:
        started = time.monotonic()
        r = api.get(
            "/api/v1/products/search", params={"query": "tent"}, headers=key_headers(store, ORG_A)
        )
        assert_error(r, 504, "embed_timeout")
        assert time.monotonic() - started < 2
