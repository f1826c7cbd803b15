"""The browser tests' fixtures: one app and one Chromium for the package (tests/dashboard);
each test gets its own browser context and page."""

from __future__ import annotations

import httpx
import pytest
from playwright import sync_api

from crow.api.app import create_app
from crow.retrieval.index_control import IndexControl
from crow.store.chat_store import ChatStore
from models.testing import serve_in_thread
from tests.browser_support import CHROMIUM, CHROMIUM_ARGS
from tests.dashboard.support import (
    TIMEOUT_MS,
    XSS_BODY,
    XSS_TITLE,
    A,
    B,
    QuestionModel,
    Site,
)
from tests.demo_env import build_demo_env


@pytest.fixture(scope="package")
def site(tmp_path_factory):
    var = tmp_path_factory.mktemp("var")
    demo = build_demo_env(var, interactions=1500)
    store = ChatStore(var / "chat.duckdb")
    keys = {org: store.create_api_key(org, "editor", name="e2e")["key"] for org in (A, B)}
    model = QuestionModel()
    services = demo.services(model, store=store, index_control=True)
    assert isinstance(services.indexer, IndexControl)
    with serve_in_thread(create_app(services), lifespan=True) as url:
        site = Site(url, model, keys, services.indexer, store, demo.lake)
        r = httpx.post(
            f"{url}/api/v1/qna/index",
            headers=site.headers(A),
            timeout=30,
            json={"id": "doc-xss", "title": XSS_TITLE, "context_type": "policy", "body": XSS_BODY},
        )
        assert r.status_code in (200, 201), r.text
        yield site
    store.close()


@pytest.fixture(scope="package")
def browser():
    if not CHROMIUM.exists():
        pytest.fail("Chromium is missing: `apt-get install chromium` (.ci/run and make test do it)")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        yield b
        b.close()


@pytest.fixture
def page(site, browser):
    url, model = site.url, site.model
    model.gate.set()
    model.delta_delay_s = 0.0
    model.miscount = False
    context = browser.new_context(
        base_url=url,
        viewport={"width": 1280, "height": 860},
        permissions=["clipboard-read", "clipboard-write"],
    )
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    # (path, X-Organization-Id, Authorization) of every API request the page makes
    page.api_headers = []
    page.on(
        "request",
        lambda r: (
            "/api/v1/" in r.url
            and page.api_headers.append(
                (
                    r.url.split("/api/v1/", 1)[1],
                    r.headers.get("x-organization-id"),
                    r.headers.get("authorization"),
                )
            )
        ),
    )
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    yield page
    context.close()
    model.gate.set()
    model.delta_delay_s = 0.0
    assert not errors, f"script errors on the page: {errors}"
