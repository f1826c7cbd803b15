"""Every store query is scoped to an org: another org's session looks exactly like a missing one."""

import pytest

from crow.store.chat_store import ChatStore, session_title

A, B = "acme-outdoor", "fresh-mart"


@pytest.fixture
def mem_store():
    store = ChatStore(":memory:")
    yield store
    store.close()


@pytest.fixture
def a_session(mem_store):
    s = mem_store.create_session(A)
    mem_store.add_message(A, s["id"], "user", "How many web interactions happened last week?")
    mem_store.add_message(A, s["id"], "assistant", "1,234.", sources=[{"type": "interaction"}])
    return s


def test_sessions_are_invisible_to_other_orgs(mem_store, a_session):
    sid = a_session["id"]
    assert mem_store.get_session(B, sid) is None
    assert mem_store.list_sessions(B) == ([], 0)
    assert mem_store.list_messages(B, sid) == []
    assert mem_store.add_message(B, sid, "user", "sneaky") is None
    assert mem_store.delete_session(B, sid) is False
    # ... and nothing about A's session changed.
    assert mem_store.get_session(A, sid)["message_count"] == 2
    assert mem_store.list_messages(A, sid)[0]["content"].startswith("How many")


def test_chat_and_qna_sessions_are_kept_apart(mem_store, a_session):
    qna = mem_store.create_session(A, kind="qna")
    assert mem_store.get_session(A, qna["id"], kind="chat") is None
    assert mem_store.get_session(A, a_session["id"], kind="qna") is None
    assert [s["id"] for s in mem_store.list_sessions(A, kind="qna")[0]] == [qna["id"]]


def test_jobs_and_index_versions_are_scoped(mem_store):
    job = mem_store.create_job_run(A, "reindex")
    mem_store.update_job_run(A, job["id"], state="running", rows_done=5, rows_total=10)
    mem_store.update_job_run(B, job["id"], state="failed")  # another org: no effect
    assert mem_store.get_job_run(B, job["id"]) is None
    got = mem_store.get_job_run(A, job["id"])
    assert (got["state"], got["rows_done"], got["rows_total"]) == ("running", 5, 10)
    assert got["timings"] == {}  # none recorded yet
    mem_store.update_job_run(A, job["id"], timings={"start_s": 1.5, "embed_s": 2.0})
    mem_store.update_job_run(A, job["id"], rows_done=7)  # other fields keep the timings
    got = mem_store.get_job_run(A, job["id"])
    assert got["timings"] == {"start_s": 1.5, "embed_s": 2.0} and got["rows_done"] == 7
    mem_store.record_index_version(A, "products", "v1", kind="flat", row_count=5, model="m")
    assert mem_store.list_index_versions(B) == []
    assert [v["version"] for v in mem_store.list_index_versions(A)] == ["v1"]


def test_title_comes_from_the_first_user_message(mem_store, a_session):
    assert (
        mem_store.get_session(A, a_session["id"])["title"]
        == "How many web interactions happened last"
    )
    mem_store.add_message(A, a_session["id"], "user", "A later question changes nothing")
    assert mem_store.get_session(A, a_session["id"])["title"].startswith("How many web")


@pytest.mark.parametrize(
    ("text", "title"),
    [
        ("Hi", "Hi"),
        ("  What   are our   top products?  ", "What are our top products?"),
        ("one two three four five six seven", "one two three four five six"),
        ("Supercalifragilistic expialidocious antidisestablishmentarianism x", None),
    ],
)
def test_title_rule(text, title):
    got = session_title(text)
    assert len(got) <= 40
    assert len(got.split()) <= 6
    if title is not None:
        assert got == title


def test_messages_page_backwards_oldest_first(mem_store):
    s = mem_store.create_session(A)
    for i in range(7):
        mem_store.add_message(A, s["id"], "user", f"m{i}")
    last = mem_store.list_messages(A, s["id"], limit=3)
    assert [m["content"] for m in last] == ["m4", "m5", "m6"]
    older = mem_store.list_messages(A, s["id"], limit=3, before=last[0]["seq"])
    assert [m["content"] for m in older] == ["m1", "m2", "m3"]
    assert [m["content"] for m in mem_store.list_messages(A, s["id"], limit=3, before=2)] == ["m0"]


def test_delete_removes_session_and_messages(mem_store, a_session):
    assert mem_store.delete_session(A, a_session["id"]) is True
    assert mem_store.get_session(A, a_session["id"]) is None
    assert mem_store.list_messages(A, a_session["id"]) == []
    assert mem_store._query("SELECT count(*) AS n FROM messages")[0]["n"] == 0


def test_message_id_makes_add_idempotent(mem_store):
    s = mem_store.create_session(A)
    first = mem_store.add_message(A, s["id"], "user", "hello", message_id="msg_client_1")
    again = mem_store.add_message(A, s["id"], "user", "hello", message_id="msg_client_1")
    assert first == again
    assert mem_store.get_session(A, s["id"])["message_count"] == 1


def test_a_turn_is_two_store_calls_with_what_four_did(mem_store, a_session):
    """start_turn: the history before the question, and the question stored (once per
    message id); finish_turn: the tokens counted and the answer stored. Another org's
    session: None and no message (the tokens the model spent still count)."""
    sid = a_session["id"]
    earlier, user = mem_store.start_turn(A, sid, "And on Instagram?", message_id="q1", history=1)
    assert [m["content"] for m in earlier] == ["1,234."]
    assert user["content"] == "And on Instagram?" and user["role"] == "user"
    again = mem_store.start_turn(A, sid, "And on Instagram?", message_id="q1", history=5)
    assert again[1]["id"] == user["id"] and again[0][-1]["id"] == user["id"]
    answer = mem_store.finish_turn(A, sid, "12 of them.", tokens=40, timings={"model_ms": 5})
    assert answer["role"] == "assistant" and answer["timings"] == {"model_ms": 5}
    assert mem_store.usage_today(A) == 40
    assert mem_store.get_session(A, sid)["message_count"] == 4
    assert mem_store.start_turn(B, sid, "sneaky") is None
    assert mem_store.finish_turn(B, sid, "sneaky", tokens=7) is None
    assert mem_store.usage_today(B) == 7
    assert mem_store.get_session(A, sid)["message_count"] == 4


def test_sessions_list_newest_activity_first_with_total(mem_store):
    ids = [mem_store.create_session(A)["id"] for _ in range(4)]
    mem_store.add_message(A, ids[0], "user", "bump")
    page, total = mem_store.list_sessions(A, limit=2)
    assert total == 4
    assert page[0]["id"] == ids[0]
    rest, _ = mem_store.list_sessions(A, limit=10, offset=2)
    assert len(rest) == 2 and not {s["id"] for s in rest} & {s["id"] for s in page}


def test_keys_are_stored_as_hashes_and_checked_by_id_and_secret(mem_store, tmp_path):
    created = mem_store.create_api_key(A, "editor", name="ci")
    key = created["key"]
    assert mem_store.authenticate(key) == {"key_id": created["id"], "org_id": A, "role": "editor"}
    stored = mem_store._query("SELECT * FROM api_keys")[0]
    assert key.split("_", 2)[2] not in str(stored) and stored["secret_hash"] != key
    other = mem_store.create_api_key(B, "reader")["key"]
    forged = f"crow_{created['id']}_{other.split('_', 2)[2]}"  # A's id with B's secret
    assert mem_store.authenticate(forged) is None
    assert mem_store.revoke_api_key(created["id"], org_id=B) is False  # not B's to revoke
    assert mem_store.authenticate(key) is not None


def test_token_usage_counts_per_org_and_utc_day(mem_store, monkeypatch):
    from datetime import datetime

    import crow.store.db as store_db

    monkeypatch.setattr(store_db, "now", lambda: datetime(2026, 11, 30, 23, 59))
    mem_store.add_usage(A, 700)
    mem_store.add_usage(A, 300)
    mem_store.add_usage(B, 5)
    assert (mem_store.usage_today(A), mem_store.usage_today(B)) == (1000, 5)
    monkeypatch.setattr(store_db, "now", lambda: datetime(2026, 12, 1, 0, 0, 1))
    assert mem_store.usage_today(A) == 0  # a new UTC day: the quota is whole again
    mem_store.add_usage(A, 0)
    assert mem_store.usage_today(A) == 0


def test_one_pending_or_running_job_per_org_and_collection(mem_store):
    first = mem_store.create_job_run(A, "reindex", collections=["products", "patterns"])
    again = mem_store.create_job_run(A, "reindex", collections=["patterns"])
    assert again["already_running"] and again["id"] == first["id"]
    assert not mem_store.create_job_run(A, "reindex", collections=["org_context"]).get(
        "already_running"
    )
    mem_store.update_job_run(A, first["id"], state="failed")
    assert not mem_store.create_job_run(A, "reindex", collections=["patterns"]).get(
        "already_running"
    )
