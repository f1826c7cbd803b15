"""Searching the organization's chats and exporting one, as a client (and another org) sees it."""

from __future__ import annotations

import json
import re

from tests.conftest import ORG_A, ORG_B, assert_error

SEARCH = "/api/v1/chat/search"
SOURCE = {"type": "product", "id": "p-0042", "title": "Basecamp Dome 4", "detail": ""}


def chat(store, org: str, question: str, answer: str) -> str:
    sid = store.create_session(org)["id"]
    store.add_message(org, sid, "user", question)
    store.add_message(org, sid, "assistant", answer, sources=[SOURCE])
    return sid


def test_search_finds_a_chat_by_a_word_of_its_answer_in_the_org_only(client, store):
    tents = chat(store, ORG_A, "What sells best?", "The **Basecamp Dome 4** TENT leads [1].")
    kayaks = chat(
        store, ORG_A, "Kayak returns?", "Kayaks go back within 60 days; best keep the receipt."
    )
    chat(store, ORG_B, "Tents?", "Fresh Mart sells no tents.")
    qna = store.create_session(ORG_A, kind="qna")["id"]
    store.add_message(ORG_A, qna, "user", "tent policy", kind="qna")
    ha = client.as_org(ORG_A)

    r = client.get(SEARCH, params={"q": "tent"}, headers=ha)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["total"] == 1 and [h["session_id"] for h in body["results"]] == [tents]
    hit = body["results"][0]
    assert hit["role"] == "assistant" and "TENT" in hit["snippet"]
    assert hit["snippet"] == "The Basecamp Dome 4 TENT leads [1]."  # no markdown left
    assert hit["title"] == "What sells best?"

    both = client.get(SEARCH, params={"q": "  BEST  "}, headers=ha).json()
    assert both["total"] == 2  # a question of one, the answer of the other
    page = client.get(SEARCH, params={"q": "best", "limit": 1, "offset": 1}, headers=ha).json()
    assert page["total"] == 2 and len(page["results"]) == 1
    newest_first = [h["session_id"] for h in both["results"]]
    assert newest_first == [kayaks, tents] and page["results"][0]["session_id"] == tents

    assert client.get(SEARCH, params={"q": "%_"}, headers=ha).json()["total"] == 0  # literal
    fresh = client.get(SEARCH, params={"q": "tent"}, headers=client.as_org(ORG_B)).json()
    assert [h["session_id"] for h in fresh["results"]] != [tents] and fresh["total"] == 1


def test_search_needs_a_real_query(client):
    ha = client.as_org(ORG_A)
    for params in ({}, {"q": ""}, {"q": " a "}, {"q": "x" * 201}, {"q": "ok", "limit": 0}):
        assert_error(client.get(SEARCH, params=params, headers=ha), 422, "invalid_request")


def test_export_downloads_markdown_and_json_with_sources(client, store):
    sid = chat(
        store,
        ORG_A,
        "What sells best?",
        'The Basecamp Dome 4 leads [1].\n\n[1] Product: "Basecamp Dome 4"',
    )
    ha = client.as_org(ORG_A)
    r = client.get(f"/api/v1/chat/sessions/{sid}/export", headers=ha)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/markdown")
    disposition = r.headers["content-disposition"]
    assert re.fullmatch(rf'attachment; filename="ask-crow-what-sells-best-{sid}\.md"', disposition)
    text = r.text
    assert text.startswith("# What sells best?\n")
    assert "## You · " in text and "## Ask CROW · " in text
    assert '[1] Product: "Basecamp Dome 4"' in text and "Sources: product `p-0042`" in text

    r = client.get(f"/api/v1/chat/sessions/{sid}/export", params={"format": "json"}, headers=ha)
    assert r.headers["content-disposition"].endswith('.json"')
    data = json.loads(r.text)
    assert data["session"]["id"] == sid
    assert [m["role"] for m in data["messages"]] == ["user", "assistant"]
    assert data["messages"][1]["sources"] == [SOURCE]

    # A stopped answer and its regenerated one say so, in both formats.
    first = store.finish_turn(ORG_A, sid, "Half an ans", tokens=0, stopped=True)
    store.finish_turn(ORG_A, sid, "A whole answer.", tokens=0, regenerated_from=first["id"])
    text = client.get(f"/api/v1/chat/sessions/{sid}/export", headers=ha).text
    assert "Half an ans\n\n*(stopped: the answer is incomplete)*" in text
    assert "## Ask CROW (regenerated) · " in text
    r = client.get(f"/api/v1/chat/sessions/{sid}/export", params={"format": "json"}, headers=ha)
    stopped, again = json.loads(r.text)["messages"][2:]
    assert (stopped["stopped"], again["regenerated_from"]) == (True, first["id"])


def test_export_is_the_orgs_own_and_a_known_format(client, store):
    sid = chat(store, ORG_A, "What sells best?", "Tents.")
    url = f"/api/v1/chat/sessions/{sid}/export"
    assert_error(client.get(url, headers=client.as_org(ORG_B)), 404, "session_not_found")
    assert_error(
        client.get(url, params={"format": "pdf"}, headers=client.as_org(ORG_A)),
        422,
        "invalid_request",
    )
