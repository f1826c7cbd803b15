"""The dashboard's browser tests' world: a scripted model that answers by the question, the
app over the indexed demo data served by uvicorn in this process, and page helpers.
(Fixtures: tests/dashboard/conftest.py.)"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Sequence
from typing import NamedTuple

import httpx
from playwright import sync_api  # installed by `make test` (dev extra); no browser download

from crow.data.lake import DataLake
from crow.retrieval.index_control import IndexControl
from crow.store.chat_store import ChatStore
from models.chat import stream_turn
from models.errors import ModelUnavailable
from models.messages import AssistantTurn, Message, ModelParams, ToolCall, ToolSpec
from models.testing import stream_turn_slowly

expect = sync_api.expect

A, B = "acme-outdoor", "fresh-mart"
XSS_TITLE = "Quarantine notice <img src=x onerror=window.__xss=1>"
XSS_BODY = (
    "Quarantine notice: <script>window.__xss=2</script> <img src=x onerror=window.__xss=3> end."
)
TIMEOUT_MS = 20_000
BAD_KEY = "crow_000000000000_" + "x" * 43  # a key's shape, but no such key


class QuestionModel:
    """A ChatModel whose answers depend on the question: the first turn calls the tool that
    fits it, the second answers (in markdown, citing [n]) from what the tool returned.

    `gate` holds the answering turn until set, so a test can watch the thinking state;
    `outages[question]` makes that many requests for the question fail; `delta_delay_s`
    streams answers two words at a time, that many seconds apart (0: all at once).
    """

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.gate.set()
        self.outages: dict[str, int] = {}
        self.delta_delay_s = 0.0
        self.miscount = False  # every answer states a count no tool returned
        self.streamed = 0  # stream events produced, in all (a stopped answer stops it)

    async def request(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] = (),
        params: ModelParams | None = None,
    ) -> AssistantTurn:
        last_user = max(i for i, m in enumerate(messages) if m.role == "user")
        question = messages[last_user].content
        if self.outages.get(question, 0) > 0:
            self.outages[question] -= 1
            raise ModelUnavailable("scripted outage")
        results = [json.loads(m.content) for m in messages[last_user:] if m.role == "tool"]
        if not results and tools and (call := self.tool_for(question.lower())):
            return AssistantTurn(tool_calls=(ToolCall(id="c1", name=call[0], arguments=call[1]),))
        await asyncio.to_thread(self.gate.wait, 30)
        if self.miscount:
            return AssistantTurn(text="You have **12,345** interactions.")
        if "story" in question.lower():  # long: a test stops it while it streams
            return AssistantTurn(text=" ".join(f"Chapter {i} of the story." for i in range(300)))
        return AssistantTurn(text=self.answer(results[-1] if results else {}))

    async def stream(self, messages, tools=(), params=None):
        turn = await self.request(messages, tools, params)
        delay = self.delta_delay_s
        events = stream_turn_slowly(turn, delay_s=delay, words=2) if delay else stream_turn(turn)
        async for event in events:
            self.streamed += 1
            yield event

    @staticmethod
    def tool_for(q: str) -> tuple[str, dict] | None:
        if "how many" in q:
            return "get_interaction_summary", {}
        if "top products" in q:
            return "search_products", {"sort": "popularity", "limit": 3}
        if "web interactions" in q:
            return "search_interactions", {"query": "visit", "channel": "web", "limit": 3}
        if "pattern" in q or "trend" in q:
            return "search_patterns", {"query": q, "limit": 3}
        if "quarantine" in q:
            return "search_org_context", {"query": "quarantine notice", "limit": 5}
        if "company" in q or "market" in q or "outage" in q:
            return "search_org_context", {"query": q, "limit": 3}
        return None

    @staticmethod
    def answer(result: dict) -> str:
        if "total_interactions" in result:
            rows = "\n".join(f"| {c} | {n:,} |" for c, n in sorted(result["by_channel"].items()))
            return (
                f"You have **{result['total_interactions']:,}** interactions.\n\n"
                f"| Channel | Interactions |\n| --- | ---: |\n{rows}"
            )
        if "products" in result:
            lines = [
                f"{i}. **{p['title']}**: {p['interactions']} interactions [{i}]"
                for i, p in enumerate(result["products"], 1)
            ]
            return "Your top products by interactions:\n\n" + "\n".join(lines)
        if "documents" in result:
            for doc in result["documents"]:
                if doc["id"] == "doc-xss":
                    return f"{doc['title']} says:\n\n{doc['text']}"
            first = result["documents"][0]
            return f"From **{first['title']}**: {first['text'][:200]} [1]"
        for key in ("interactions", "patterns"):
            if key in result:
                lines = [f"- {r.get('title') or r['text'][:60]} (`{r['id']}`)" for r in result[key]]
                return "Here is what I found:\n\n" + "\n".join(lines)
        return "Hello! How can I help with your retail data today?"


class Site(NamedTuple):
    url: str
    model: QuestionModel
    keys: dict[str, str]  # org -> its editor key
    indexer: IndexControl  # the app's reindexes, in this process
    store: ChatStore
    lake: DataLake  # the demo data: the truth the page's figures are checked against

    def headers(self, org: str = A) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.keys[org]}", "X-Organization-Id": org}


def open_home(page, site: Site, path: str = "/", org: str = A) -> None:
    """Open `path` signed in with `org`'s key, by the link `make run` prints (#key=…)."""
    page.goto(f"{path}#key={site.keys[org]}")
    expect(page.locator("body[data-ready=true]")).to_have_count(1)


def api(site: Site, method: str, path: str, org: str = A, **kw):
    r = httpx.request(method, site.url + path, headers=site.headers(org), timeout=30, **kw)
    assert r.is_success, r.text
    return r.json() if r.content else None


def stored_keys(page) -> dict[str, str]:
    return page.evaluate("JSON.parse(sessionStorage.getItem('crow.keys') || '{}')")
