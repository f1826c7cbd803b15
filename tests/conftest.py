"""Shared fixtures: a data lake with two orgs, a chat store, and the HTTP app over them."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from crow.api.app import create_app
from crow.data.lake import DataLake
from crow.services import Services, ThreadProxy
from crow.settings import AppSettings
from crow.store.chat_store import ChatStore
from models.chat import ChatModel

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

ORG_A, ORG_B = "acme-outdoor", "fresh-mart"


_exit_status: list[int] = []


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _exit_status.append(int(exitstatus))


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """Once the report is written and every plugin has finished, end the process without the
    interpreter's finalization. This process loaded Ray (initialised and shut down several
    times), torch and llama.cpp; their native finalizers once crashed it after a green run (CI:
    "690 passed", then a segmentation fault and exit status 2). Every test has released what
    it started by then (its fixtures' teardowns ran), so nothing under test is skipped."""
    if not _exit_status or os.environ.get("CROW_TEST_FINALIZE") == "1":
        return  # a partial run that never finished, or asked to finalize (to debug a crash)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(_exit_status[-1])


@pytest.fixture(autouse=True)
def _no_real_models_unless_marked(request, monkeypatch):
    """A test reaches a real model in this process only when marked @pytest.mark.real_model."""
    if request.node.get_closest_marker("real_model"):
        return
    from models.embedder import SentenceTransformerEmbedder
    from models.local import LocalChatModel

    def refuse(*args, **kwargs):
        raise AssertionError("this test reached a real model; mark it @pytest.mark.real_model")

    monkeypatch.setattr(LocalChatModel, "load", refuse)
    monkeypatch.setattr(SentenceTransformerEmbedder, "__init__", refuse)


@pytest.fixture
def settings(tmp_path: Path) -> AppSettings:
    return AppSettings.from_args({"var_dir": str(tmp_path / "var")})


@pytest.fixture
def lake(settings: AppSettings) -> DataLake:
    lake = DataLake(settings.data_dir)
    lake.register_org(ORG_A, "Acme Outdoor")
    lake.register_org(ORG_B, "Fresh Mart")
    return lake


@pytest.fixture
def store(settings: AppSettings) -> Iterator[ChatStore]:
    store = ChatStore(settings.chat_db_path)
    yield store
    store.close()


def store_app(
    settings: AppSettings,
    store: ChatStore,
    *,
    chat_model: ChatModel | None = None,
    **facades: Any,
) -> FastAPI:
    """The HTTP app over the chat store alone (and any ``facades``, e.g. a broken retriever):
    what a route test needs; a full app in this process is crow.app.LocalApp."""
    services = Services(
        settings=settings, lake=DataLake(settings.data_dir), store=ThreadProxy(store), **facades
    )
    return create_app(services, chat_model=chat_model)


def key_headers(store: ChatStore, org: str, role: str = "editor") -> dict[str, str]:
    """The headers of a request with a new API key of `org`: Authorization and the org."""
    key = store.create_api_key(org, role, name="test")["key"]
    return {"Authorization": f"Bearer {key}", "X-Organization-Id": org}


@pytest.fixture
def ha(store: ChatStore) -> dict[str, str]:
    """An editor key of ORG_A, as request headers."""
    return key_headers(store, ORG_A)


@pytest.fixture
def hb(store: ChatStore) -> dict[str, str]:
    """An editor key of ORG_B, as request headers."""
    return key_headers(store, ORG_B)


class OrgClient(TestClient):
    """The app's test client with an editor key of each test org: ``as_org(org)``."""

    keys: dict[str, dict[str, str]]

    def as_org(self, org: str) -> dict[str, str]:
        return self.keys[org]


@pytest.fixture
def client(
    settings: AppSettings, lake: DataLake, store: ChatStore, ha: dict, hb: dict
) -> Iterator[OrgClient]:
    app = store_app(settings, store)
    with OrgClient(app, raise_server_exceptions=False) as c:
        c.keys = {ORG_A: ha, ORG_B: hb}
        yield c


def assert_error(response, status: int, code: str) -> dict:
    """The one error shape, with the expected status and code."""
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"}
    assert body["error"]["code"] == code
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    return body["error"]


MCP_INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"},
    },
}
"""An MCP client's first request (JSON-RPC initialize)."""
MCP_ACCEPT = {"Accept": "application/json, text/event-stream"}
