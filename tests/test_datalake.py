"""Atomic writes: a failure mid-batch leaves the previous data, and readers never see a mix."""

import pytest

from crow.datalake import DataLake, UnknownOrganization
from crow.ingest import validate_rows
from tests.conftest import ORG_A

ROWS = validate_rows("patterns", [
    {"id": f"pat-{i}", "type": "trend", "title": f"T{i}", "detected_at": "2026-11-01T00:00:00Z",
     "confidence": 0.5} for i in range(4)
])  # fmt: skip


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
