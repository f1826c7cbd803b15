"""Atomic writes: a failure mid-batch leaves the previous data, and readers never see a mix."""

import json
import threading
import types
from contextlib import contextmanager, suppress

import pytest

import crow.data.lake as datalake
from crow.data import duck
from crow.data.ingest import ingest, validate_rows
from crow.data.lake import DataLake, IdsAlreadyExist, UnknownOrganization
from crow.data.upload import IngestRejected
from tests.conftest import ORG_A

ROWS = validate_rows(
    "patterns",
    [
        {
            "id": f"pat-{i}",
            "type": "trend",
            "title": f"T{i}",
            "detected_at": "2026-11-01T00:00:00Z",
            "confidence": 0.5,
        }
        for i in range(4)
    ],
)


def failing_batches():
    yield ROWS[:2]
    raise RuntimeError("disk full")


@pytest.mark.parametrize("mode", ["append", "replace", "upsert"])
def test_failure_mid_write_changes_nothing(lake, mode):
    lake.write(ORG_A, "patterns", [ROWS[2:]], mode="replace")
    before = sorted(p.name for p in lake.org_dir(ORG_A).rglob("*") if not p.name.endswith(".lock"))
    with pytest.raises(RuntimeError):
        lake.write(ORG_A, "patterns", failing_batches(), mode=mode)
    after = sorted(p.name for p in lake.org_dir(ORG_A).rglob("*") if not p.name.endswith(".lock"))
    assert after == before
    assert sorted(r["id"] for r in lake.read_table(ORG_A, "patterns").to_pylist()) == [
        "pat-2",
        "pat-3",
    ]


def test_replace_keeps_one_previous_version_for_in_flight_readers(lake):
    for _ in range(4):
        lake.write(ORG_A, "patterns", [ROWS], mode="replace")
    versions = sorted(p.name for p in lake.org_dir(ORG_A).glob(".patterns.v*"))
    assert versions == [".patterns.v3", ".patterns.v4"]
    assert (lake.org_dir(ORG_A) / "patterns").resolve().name == ".patterns.v4"


def test_orgs_must_exist_and_ids_cannot_escape_the_root(lake, tmp_path):
    with pytest.raises(UnknownOrganization):
        lake.write("no-such-org", "patterns", [ROWS])
    with pytest.raises(ValueError):
        lake.org_dir("../etc")
    assert not DataLake(tmp_path / "empty").org_exists("../../x")
    assert [o["id"] for o in lake.list_orgs()] == ["acme-outdoor", "fresh-mart"]


def test_concurrent_appends_of_the_same_rows_write_them_once(lake, monkeypatch):
    """A client's retry after a proxy timeout: the same batch twice at once. After its id
    check, each append waits (up to 2 s) for the other to have checked too: both pass the
    check and write unless the check is made under the write lock."""
    lake.write(ORG_A, "patterns", [ROWS[:2]], mode="replace")
    checked = threading.Barrier(2)

    @contextmanager
    def query_then_meet():
        with duck.cursor() as con:
            yield con
        with suppress(threading.BrokenBarrierError):
            checked.wait(timeout=2)

    monkeypatch.setattr(datalake, "duck", types.SimpleNamespace(cursor=query_then_meet))
    body = "\n".join(
        json.dumps({**r, "detected_at": r["detected_at"].isoformat()}) for r in ROWS[2:]
    ).encode()
    start, outcomes = threading.Barrier(2), []

    def append() -> None:
        start.wait()
        try:
            outcomes.append(ingest(lake, ORG_A, "patterns", body, "jsonl"))
        except IngestRejected as exc:
            outcomes.append(exc)

    threads = [threading.Thread(target=append) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    monkeypatch.undo()
    assert [o for o in outcomes if not isinstance(o, IngestRejected)] == [2]  # one wrote both
    (rejected,) = [o for o in outcomes if isinstance(o, IngestRejected)]
    assert [(e.row, e.field) for e in rejected.errors] == [(1, "id"), (2, "id")]
    assert "already exists" in rejected.errors[0].reason
    assert sorted(r["id"] for r in lake.read_table(ORG_A, "patterns").to_pylist()) == [
        "pat-0",
        "pat-1",
        "pat-2",
        "pat-3",
    ]


def test_an_append_of_existing_ids_writes_nothing(lake):
    lake.write(ORG_A, "patterns", [ROWS[:2]], mode="append")
    before = sorted(p.name for p in lake.org_dir(ORG_A).rglob("*"))
    with pytest.raises(IdsAlreadyExist) as caught:
        lake.write(ORG_A, "patterns", [ROWS[2:], ROWS[1:2]], mode="append")
    assert caught.value.ids == {"pat-1"}
    assert sorted(p.name for p in lake.org_dir(ORG_A).rglob("*")) == before
    assert lake.write(ORG_A, "patterns", [ROWS[2:3], ROWS[3:]], mode="append") == 2
    assert lake.count(ORG_A, "patterns") == 4
    assert len(list((lake.org_dir(ORG_A) / "patterns").glob("part-*.parquet"))) == 2


def test_recover_at_start_cleans_what_a_dead_writer_left(tmp_path):
    lake = DataLake(tmp_path / "data")
    lake.register_org("acme-outdoor", "Acme")
    org_dir = lake.org_dir("acme-outdoor")
    (org_dir / ".patterns.v7.staging").mkdir()  # an upsert killed before it published
    lake.recover()
    assert not (org_dir / ".patterns.v7.staging").exists()
