"""Who may do what: API keys, the organization of a key, roles, the operator, local mode."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from fastapi.testclient import TestClient

from crow.settings import AppSettings
from models.messages import AssistantTurn, Usage
from models.testing import ScriptedChatModel
from tests.conftest import (
    MCP_ACCEPT,
    MCP_INITIALIZE,
    ORG_A,
    ORG_B,
    assert_error,
    key_headers,
    store_app,
)

SESSIONS = "/api/v1/chat/sessions"
GUARDED = [
    ("GET", "/api/v1/organizations"),
    ("POST", SESSIONS),
    ("GET", "/api/v1/usage"),
    ("POST", f"{SESSIONS}/ses_x/messages/stream"),
    ("POST", "/mcp"),
    ("POST", "/a2a"),
    ("POST", "/a2a/tasks/send"),
    ("GET", "/v1/models"),
    ("POST", "/v1/chat/completions"),
    ("GET", "/api/v1/no-such-route"),
]


def make_client(settings, lake, store, model=None, **overrides) -> TestClient:
    if overrides:
        settings = AppSettings.from_args({"var_dir": str(settings.var_dir), **overrides})
    return TestClient(store_app(settings, store, chat_model=model), raise_server_exceptions=False)


@pytest.fixture
def api(settings, lake, store):
    model = ScriptedChatModel()
    with make_client(settings, lake, store, model, auth={"key_cache_s": 0}) as client:
        client.model = model
        yield client


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def test_every_surface_wants_a_key_and_says_how(api):
    for method, path in GUARDED:
        r = api.request(method, path, json={})
        error = assert_error(r, 401, "unauthorized")
        assert r.headers["www-authenticate"] == 'Bearer realm="ask-crow"', path
        assert "Authorization: Bearer" in error["message"]


def test_the_probes_docs_page_and_agent_card_stay_public(api):
    for path in (
        "/health",
        "/ready",
        "/docs",
        "/openapi.json",
        "/",
        "/.well-known/agent-card.json",
        "/static/app.js",
    ):
        assert api.get(path).status_code == 200, path
    card = api.get("/.well-known/agent-card.json").json()
    scheme = next(iter(card["securitySchemes"].values()))
    assert scheme["httpAuthSecurityScheme"]["scheme"].lower() == "bearer"
    doc = api.get("/openapi.json").json()
    assert doc["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
    assert doc["paths"][SESSIONS]["post"]["security"] == [{"HTTPBearer": []}]
    assert "security" not in doc["paths"]["/health"]["get"]


def test_malformed_unknown_wrong_revoked_and_expired_keys_are_401(api, store):
    good = store.create_api_key(ORG_A, "reader")
    expired = store.create_api_key(ORG_A, "reader", expires_at=datetime.now(UTC) - timedelta(1))
    key_id = good["key"].split("_")[1]
    wrong_secret = f"crow_{key_id}_" + "A" * 43
    assert wrong_secret != good["key"]
    for key in ("nonsense", "crow_zz_zz", wrong_secret, expired["key"], "x" * 5000):
        r = api.get("/api/v1/organizations", headers=bearer(key))
        assert_error(r, 401, "invalid_key")
        assert 'error="invalid_token"' in r.headers["www-authenticate"]
    assert api.get("/api/v1/organizations", headers=bearer(good["key"])).status_code == 200
    assert store.revoke_api_key(good["id"])
    assert_error(api.get("/api/v1/organizations", headers=bearer(good["key"])), 401, "invalid_key")
    assert_error(
        api.get("/api/v1/organizations", headers={"Authorization": good["key"]}),
        401,
        "unauthorized",
    )


def test_the_organization_is_the_keys(api, store, lake):
    a = key_headers(store, ORG_A, "reader")
    assert api.get("/api/v1/organizations", headers=a).json() == {
        "organizations": [{"id": ORG_A, "name": "Acme Outdoor"}]
    }
    only_key = {"Authorization": a["Authorization"]}  # the header is optional
    session = api.post(SESSIONS, headers=only_key).json()
    assert session["org_id"] == ORG_A
    assert_error(
        api.post(SESSIONS, headers={**a, "X-Organization-Id": ORG_B}), 403, "wrong_organization"
    )
    assert_error(api.get(f"{SESSIONS}/organization/{ORG_B}", headers=a), 403, "wrong_organization")
    nowhere = key_headers(store, "globex", "reader")  # a key of an org without data
    assert_error(api.post(SESSIONS, headers=nowhere), 404, "organization_not_found")


def test_roles(api, store):
    reader, editor = key_headers(store, ORG_A, "reader"), key_headers(store, ORG_A, "editor")
    admin = key_headers(store, ORG_A, "admin")
    row = b'{"id": "p1", "title": "Tent", "category": "Tents", "price": 10}'
    ndjson = {"Content-Type": "application/x-ndjson"}
    doc = {"title": "Returns", "body": "60 days."}
    refused = [
        ("POST", "/api/v1/ingest/products", {"content": row, "headers": ndjson}),
        ("POST", "/api/v1/qna/index", {"json": doc}),
        ("POST", "/api/v1/qna/reindex", {"json": {}}),
        ("GET", "/api/v1/keys", {}),
        ("POST", "/api/v1/keys", {"json": {}}),
    ]
    for method, path, kw in refused:
        headers = {**reader, **kw.pop("headers", {})}
        error = assert_error(api.request(method, path, headers=headers, **kw), 403, "forbidden")
        assert "role" in error["message"]
    # a reader chats and searches
    assert api.post(SESSIONS, headers=reader).status_code == 201
    assert api.get("/api/v1/usage", headers=reader).status_code == 200
    # an editor ingests, but manages no keys
    r = api.post("/api/v1/ingest/products", content=row, headers={**editor, **ndjson})
    assert r.status_code == 201, r.text
    assert_error(api.get("/api/v1/keys", headers=editor), 403, "forbidden")
    # an admin manages the org's keys: shown once, listed without secrets, revocable
    created = api.post(
        "/api/v1/keys",
        json={"role": "reader", "name": "kiosk", "expires_in_days": 7},
        headers=admin,
    )
    assert created.status_code == 201, created.text
    new = created.json()
    assert new["org_id"] == ORG_A and new["key"].startswith("crow_") and new["expires_at"]
    listed = api.get("/api/v1/keys", headers=admin).json()["keys"]
    assert new["id"] in {k["id"] for k in listed} and all("key" not in k for k in listed)
    assert all("secret" not in str(k) and new["key"] not in str(k) for k in listed)
    assert api.get("/api/v1/usage", headers=bearer(new["key"])).status_code == 200
    other_org = store.create_api_key(ORG_B, "reader")
    assert_error(api.delete(f"/api/v1/keys/{other_org['id']}", headers=admin), 404, "key_not_found")
    assert api.delete(f"/api/v1/keys/{new['id']}", headers=admin).status_code == 204
    assert_error(api.get("/api/v1/usage", headers=bearer(new["key"])), 401, "invalid_key")
    assert_error(
        api.post("/api/v1/keys", json={"role": "root"}, headers=admin), 422, "invalid_request"
    )


def test_the_operator_token_lists_every_org_and_reads_no_data(settings, lake, store, monkeypatch):
    monkeypatch.setenv("ASK_CROW_OPERATOR_TOKEN", "op-secret-0123456789")
    with make_client(settings, lake, store) as api:
        operator = bearer("op-secret-0123456789")
        orgs = api.get("/api/v1/organizations", headers=operator).json()["organizations"]
        assert [o["id"] for o in orgs] == [ORG_A, ORG_B]
        assert_error(api.post(SESSIONS, headers=operator), 403, "forbidden")
        assert_error(
            api.get("/api/v1/organizations", headers=bearer("op-secret")), 401, "invalid_key"
        )


def test_auth_off_answers_only_local_clients_of_a_loopback_server(settings, lake, store):
    local = AppSettings.from_args({"var_dir": str(settings.var_dir), "auth": {"mode": "off"}})
    app = store_app(local, store)
    with TestClient(app, base_url="http://127.0.0.1:8000", client=("127.0.0.1", 5000)) as api:
        assert api.post(SESSIONS, headers={"X-Organization-Id": ORG_B}).json()["org_id"] == ORG_B
        assert_error(api.post(SESSIONS), 400, "missing_organization")
        orgs = api.get("/api/v1/organizations").json()["organizations"]
        assert len(orgs) == 2
    with TestClient(app, base_url="http://127.0.0.1:8000", client=("10.1.2.3", 5000)) as api:
        assert_error(api.post(SESSIONS, headers={"X-Organization-Id": ORG_B}), 403, "auth_off")
    with TestClient(app, base_url="http://10.0.0.5:8000", client=("127.0.0.1", 5000)) as api:
        assert_error(api.get("/api/v1/organizations"), 403, "auth_off")


def test_the_host_allowlist(settings, lake, store, ha):
    with make_client(settings, lake, store, auth={"allowed_hosts": ["crow.example.com"]}) as api:
        assert_error(api.get("/api/v1/organizations", headers=ha), 400, "invalid_host")
        assert api.get("/health").status_code == 200  # probes come by pod IP
        good = {**ha, "Host": "crow.example.com"}
        assert api.get("/api/v1/organizations", headers=good).status_code == 200
        # MCP's own DNS-rebinding check admits the same names, with a port too
        init, accept = MCP_INITIALIZE, MCP_ACCEPT
        for host in ("crow.example.com", "crow.example.com:8000"):
            r = api.post("/mcp", json=init, headers={**ha, **accept, "Host": host})
            assert r.status_code == 200, (host, r.status_code, r.text)


def test_v1_needs_a_key_takes_json_only_caps_max_tokens_and_counts_tokens(api, store):
    a = key_headers(store, ORG_A, "reader")
    body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 100_000}
    assert_error(api.post("/v1/chat/completions", json=body), 401, "unauthorized")
    plain = api.post(
        "/v1/chat/completions", content=b"{}", headers={**a, "Content-Type": "text/plain"}
    )
    assert_error(plain, 415, "unsupported_media_type")
    api.model.add(AssistantTurn(text="Hello.", usage=Usage(prompt_tokens=7, completion_tokens=2)))
    r = api.post("/v1/chat/completions", json=body, headers=a)
    assert r.status_code == 200, r.text
    assert api.model.calls[-1].params.max_tokens == AppSettings().llm.max_tokens
    assert store.usage_today(ORG_A) == 9 and store.usage_today(ORG_B) == 0
    assert api.get("/v1/models", headers=a).status_code == 200


def test_keys_command_line(settings, lake, store, capsys, tmp_path):
    from jobs.keys import main

    store.close()  # the command opens the file itself (the app is down)
    config = tmp_path / "config.yaml"
    config.write_text(
        f"applications:\n  - name: crow\n    args:\n      var_dir: {settings.var_dir}\n"
    )
    assert (
        main(
            [
                "--config",
                str(config),
                "create",
                "--org",
                ORG_A,
                "--role",
                "editor",
                "--name",
                "ci",
                "--expires",
                "30",
            ]
        )
        == 0
    )
    key_id, key = capsys.readouterr().out.split("\n")[:2]
    key_id = key_id.split()[0]
    assert key.startswith(f"crow_{key_id}_")
    assert main(["--config", str(config), "list", "--org", ORG_A]) == 0
    listing = capsys.readouterr().out
    assert key_id in listing and "active" in listing and key not in listing
    assert main(["--config", str(config), "revoke", key_id]) == 0
    assert main(["--config", str(config), "revoke", key_id]) == 1
    assert main(["--config", str(config), "create", "--org", "nope", "--role", "reader"]) == 2
    from crow.store.chat_store import ChatStore

    again = ChatStore(settings.chat_db_path)
    assert again.authenticate(key) is None
    again.close()
