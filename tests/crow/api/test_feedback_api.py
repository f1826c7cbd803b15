"""Feedback on answers: rated per assistant message, org-scoped, exported as evaluation
questions that jobs.eval reads."""

from __future__ import annotations

import json

from jobs.grading import load_questions
from tests.conftest import ORG_A, ORG_B, assert_error, key_headers

BASE = "/api/v1/chat/sessions"
COUNT_STEP = {"name": "get_interaction_summary", "ok": True, "ms": 4}


def answered_chat(store, org: str) -> tuple[str, list[str]]:
    """A chat of two turns, as the chat service stores them: (session id, answer ids)."""
    sid = store.create_session(org)["id"]
    answers = []
    for question, answer in (
        ("How many web interactions did we have?", "You had 1,200 web interactions [1]."),
        ("And on social media?", "There were 800 social interactions [1]."),
    ):
        store.add_message(org, sid, "user", question)
        stored = store.add_message(
            org, sid, "assistant", answer, tool_steps=[COUNT_STEP], sources=[]
        )
        answers.append(stored["id"])
    return sid, answers


def feedback_url(sid: str, mid: str) -> str:
    return f"{BASE}/{sid}/messages/{mid}/feedback"


def test_feedback_round_trips_to_the_export_eval_reads(client, store, tmp_path):
    sid, (first, second) = answered_chat(store, ORG_A)
    ha = client.as_org(ORG_A)
    r = client.put(feedback_url(sid, first), json={"rating": "up"}, headers=ha)
    assert r.status_code == 200, r.text
    assert r.json()["rating"] == "up" and r.json()["message_id"] == first
    r = client.put(
        feedback_url(sid, second),
        json={"rating": "down", "comment": "wrong figure", "correction": "  812  "},
        headers=ha,
    )
    assert r.json()["correction"] == "812"

    r = client.get("/api/v1/feedback", headers=ha)
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/x-ndjson")
    path = tmp_path / "feedback.jsonl"
    path.write_text(r.text)
    items = {q["id"]: q for q in load_questions(path)}
    assert set(items) == {f"fb-{first}", f"fb-{second}"}
    down = items[f"fb-{second}"]
    assert down["org"] == ORG_A and down["kind"] == "feedback"
    assert down["query"] == "And on social media?"
    assert down["history"] == ["How many web interactions did we have?"]
    assert down["expect_tools"] == ["get_interaction_summary"]
    assert down["truth"] == {"facts": ["812"]}  # jobs.truth: the answer must state it
    assert down["feedback"]["answer"] == "There were 800 social interactions [1]."
    assert "truth" not in items[f"fb-{first}"] and items[f"fb-{first}"]["history"] == []

    only_down = client.get("/api/v1/feedback", params={"rating": "down"}, headers=ha).text
    assert [json.loads(line)["id"] for line in only_down.splitlines()] == [f"fb-{second}"]
    later = client.get("/api/v1/feedback", params={"since": "2999-01-01T00:00:00Z"}, headers=ha)
    assert later.status_code == 200 and later.text == ""


def test_a_new_rating_replaces_the_last_and_can_be_taken_back(client, store):
    sid, (first, _) = answered_chat(store, ORG_A)
    ha = client.as_org(ORG_A)
    client.put(feedback_url(sid, first), json={"rating": "up", "comment": "nice"}, headers=ha)
    r = client.put(feedback_url(sid, first), json={"rating": "down"}, headers=ha)
    assert r.json()["rating"] == "down" and r.json()["comment"] is None
    listed = client.get(f"{BASE}/{sid}/messages", headers=ha).json()["messages"]
    rated = {m["id"]: m.get("feedback") for m in listed}
    assert rated[first] == {"rating": "down", "comment": None, "correction": None}
    assert sum(v is not None for v in rated.values()) == 1  # the others carry none
    assert len(client.get("/api/v1/feedback", headers=ha).text.splitlines()) == 1
    assert client.delete(feedback_url(sid, first), headers=ha).status_code == 204
    assert client.get("/api/v1/feedback", headers=ha).text == ""
    assert_error(client.delete(feedback_url(sid, first), headers=ha), 404, "feedback_not_found")


def test_only_an_answer_of_the_orgs_own_chat_can_be_rated(client, store):
    sid, (first, _) = answered_chat(store, ORG_A)
    question = store.list_messages(ORG_A, sid)[0]["id"]
    ha, hb = client.as_org(ORG_A), client.as_org(ORG_B)
    up = {"rating": "up"}
    assert_error(
        client.put(feedback_url(sid, first), json=up, headers=hb), 404, "message_not_found"
    )
    assert_error(
        client.put(feedback_url(sid, question), json=up, headers=ha), 404, "message_not_found"
    )
    other, _ = answered_chat(store, ORG_A)
    assert_error(
        client.put(feedback_url(other, first), json=up, headers=ha), 404, "message_not_found"
    )
    client.put(feedback_url(sid, first), json=up, headers=ha)
    assert client.get("/api/v1/feedback", headers=hb).text == ""  # B sees none of A's
    assert_error(client.delete(feedback_url(sid, first), headers=hb), 404, "feedback_not_found")


def test_bad_feedback_is_a_clear_422_and_the_export_needs_an_editor(client, store):
    sid, (first, _) = answered_chat(store, ORG_A)
    ha = client.as_org(ORG_A)
    for body in (
        {"rating": "meh"},
        {"rating": "up", "comment": "x" * 2001},
        {"rating": "up", "x": 1},
    ):
        assert_error(
            client.put(feedback_url(sid, first), json=body, headers=ha), 422, "invalid_request"
        )
    assert_error(
        client.get("/api/v1/feedback", params={"since": "yesterday"}, headers=ha),
        422,
        "invalid_request",
    )
    reader = key_headers(store, ORG_A, role="reader")
    assert (
        client.put(feedback_url(sid, first), json={"rating": "up"}, headers=reader).status_code
        == 200
    )
    assert_error(client.get("/api/v1/feedback", headers=reader), 403, "forbidden")


def test_deleting_a_chat_deletes_its_feedback(client, store):
    sid, (first, _) = answered_chat(store, ORG_A)
    ha = client.as_org(ORG_A)
    client.put(feedback_url(sid, first), json={"rating": "down", "correction": "812"}, headers=ha)
    assert client.delete(f"{BASE}/{sid}", headers=ha).status_code == 204
    assert client.get("/api/v1/feedback", headers=ha).text == ""
