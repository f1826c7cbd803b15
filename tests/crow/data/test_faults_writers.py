"""Writers of the data lake that are really killed (SIGKILL) mid-write, or that really race.

A child process starts a write and stops at a chosen step (a patched step in the child only:
mid-way through writing its parts, just before the rename that publishes them, or between
that rename and the symlink switch); the test kills it there with SIGKILL. The next writer
must then succeed, remove what the dead one left, and neither lose nor duplicate a row.
Two processes appending the same rows at once (a client's retry after a proxy timeout)
must write them once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

import pytest

from crow.data.ingest import validate_rows
from crow.data.lake import DataLake
from tests.repo import ROOT

pytestmark = pytest.mark.faults

REPO = ROOT
ORG = "acme-outdoor"


def pattern_rows(ids, title="T"):
    return validate_rows(
        "patterns",
        [
            {
                "id": i,
                "type": "trend",
                "title": title,
                "detected_at": "2026-11-01T00:00:00Z",
                "confidence": 0.5,
            }
            for i in ids
        ],
    )


OLD = [f"old-{i}" for i in range(6)]
NEW = [f"new-{i}" for i in range(4)]

# Runs in the child: patches one step of crow.data.lake there, then writes NEW in two batches.
WRITER = textwrap.dedent(
    """
    import os, sys, time
    from pathlib import Path

    import pyarrow
    import crow.data.lake as dl
    from tests.crow.data.test_faults_writers import NEW, ORG, pattern_rows

    root, mode, stop_at, marker = sys.argv[1:5]

    def stop_here():
        Path(marker).write_text(str(os.getpid()))
        time.sleep(600)  # killed here

    class Table:
        calls = 0

        @staticmethod
        def from_pylist(*args, **kwargs):
            Table.calls += 1
            if stop_at == "mid-write" and Table.calls == 2:  # the first batch is written
                stop_here()
            return pyarrow.Table.from_pylist(*args, **kwargs)

    class PyArrow:
        def __getattr__(self, name):
            return Table if name == "Table" else getattr(pyarrow, name)

    real_rename, real_replace = os.rename, os.replace

    def rename(src, dst, *args, **kwargs):
        if stop_at == "before-publish" and str(src).endswith(".staging"):
            stop_here()
        return real_rename(src, dst, *args, **kwargs)

    def replace(src, dst, *args, **kwargs):
        name = Path(src).name
        if stop_at == "before-publish" and name.endswith(".parquet.tmp"):
            stop_here()
        if stop_at == "before-link" and ".link-" in name:
            stop_here()
        return real_replace(src, dst, *args, **kwargs)

    dl.pa = PyArrow()
    os.rename, os.replace = rename, replace
    rows = pattern_rows(NEW, title="from the killed writer")
    dl.DataLake(Path(root)).write(ORG, "patterns", [rows[:2], rows[2:]], mode=mode)
    print("the write finished: it was not stopped", file=sys.stderr)
    sys.exit(3)
    """
)


def child_env() -> dict[str, str]:
    path = [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(path)}


def wait_for(path: Path, proc: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"the child exited {proc.returncode} before its stop:\n{out}\n{err}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail("the child did not reach its stop")
        time.sleep(0.02)


def leftovers(org_dir: Path) -> list[str]:
    """What a dead writer could leave: staging dirs, temp parts, temp links."""
    return sorted(
        str(p.relative_to(org_dir))
        for p in org_dir.rglob("*")
        if p.name.endswith((".staging", ".parquet.tmp")) or ".link-" in p.name
    )


def ids(lake: DataLake) -> list[str]:
    return sorted(r["id"] for r in lake.read_table(ORG, "patterns").to_pylist())


def kill_a_writer(tmp_path: Path, lake: DataLake, mode: str, stop_at: str) -> None:
    marker = tmp_path / "stopped"
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(lake.root), mode, stop_at, str(marker)],
        cwd=REPO,
        env=child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(marker, proc)
        # it really is mid-write: something unpublished is on disk, and it holds the lock
        org_dir = lake.org_dir(ORG)
        if stop_at == "before-link":
            assert any(".link-" in p for p in leftovers(org_dir))
        else:
            assert leftovers(org_dir), sorted(p.name for p in org_dir.rglob("*"))
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=30)
        assert proc.returncode == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


CASES = [
    ("upsert", "mid-write"),
    ("upsert", "before-publish"),
    ("upsert", "before-link"),
    ("replace", "mid-write"),
    ("replace", "before-publish"),
    ("append", "mid-write"),
    ("append", "before-publish"),
]


@pytest.mark.parametrize(("mode", "stop_at"), CASES)
def test_a_killed_writer_leaves_nothing_that_blocks_the_next(lake, tmp_path, mode, stop_at):
    lake.write(ORG, "patterns", [pattern_rows(OLD)], mode="replace")
    kill_a_writer(tmp_path, lake, mode, stop_at)
    org_dir = lake.org_dir(ORG)
    assert ids(lake) == sorted(OLD)  # readers still see the data from before the killed write

    # the next upsert succeeds, and cleans up after the dead writer
    lake.write(ORG, "patterns", [pattern_rows([*OLD[:2], *NEW], title="upserted")], mode="upsert")
    got = lake.read_table(ORG, "patterns").to_pylist()
    assert Counter(r["id"] for r in got) == Counter(OLD + NEW)  # none lost, none twice
    assert {r["id"] for r in got if r["title"] == "upserted"} == {*OLD[:2], *NEW}
    assert leftovers(org_dir) == []
    versions = sorted(p.name for p in org_dir.glob(".patterns.v*"))
    assert len(versions) == 2 and (org_dir / "patterns").resolve().name == versions[-1]

    # and so do a replace (a knowledge-base reindex) and an append
    lake.write(ORG, "patterns", [pattern_rows(OLD)], mode="replace")
    assert lake.write(ORG, "patterns", [pattern_rows(NEW)], mode="append") == len(NEW)
    assert ids(lake) == sorted(OLD + NEW)
    assert lake.count(ORG, "patterns") == len(OLD + NEW)


def test_a_writer_killed_before_its_first_version_is_linked(settings, tmp_path):
    """A collection's first write, killed before the link exists: nothing is published."""
    lake = DataLake(settings.data_dir)
    lake.register_org(ORG, "Acme Outdoor")
    kill_a_writer(tmp_path, lake, "replace", "before-link")
    assert ids(lake) == []
    assert lake.write(ORG, "patterns", [pattern_rows(OLD)], mode="upsert") == len(OLD)
    assert ids(lake) == sorted(OLD)
    assert leftovers(lake.org_dir(ORG)) == []
    assert [p.name for p in lake.org_dir(ORG).glob(".patterns.v*")] == [
        (lake.org_dir(ORG) / "patterns").resolve().name
    ]


# Runs in the child: `python -m jobs.ingest` of the same file, started with another child at
# once. After its id check, each waits (up to 3 s) for the other to have checked too: both
# pass the check and write unless it is made under a lock that holds across processes.
APPENDER = textwrap.dedent(
    """
    import sys, time, types
    from contextlib import contextmanager
    from pathlib import Path

    import duckdb
    import crow.data.lake as dl
    from jobs.ingest import main

    go, ready, me, other, *args = sys.argv[1:]

    @contextmanager
    def connect_then_meet(*a, **k):
        with duckdb.connect(*a, **k) as con:
            yield con
        Path(me).write_text("")
        deadline = time.monotonic() + 3
        while not Path(other).exists() and time.monotonic() < deadline:
            time.sleep(0.005)

    dl.duckdb = types.SimpleNamespace(connect=connect_then_meet)
    Path(ready).write_text("")
    while not Path(go).exists():
        time.sleep(0.005)
    sys.exit(main(args))
    """
)


def test_two_processes_appending_the_same_rows_write_them_once(lake, tmp_path):
    lake.write(ORG, "patterns", [pattern_rows(OLD)], mode="replace")
    upload = tmp_path / "retry.jsonl"
    upload.write_text(
        "\n".join(
            f'{{"id": "{i}", "type": "trend", "title": "T", '
            f'"detected_at": "2026-11-01T00:00:00Z", "confidence": 0.5}}'
            for i in NEW
        )
    )
    go = tmp_path / "go"
    args = [upload, "--org", ORG, "--collection", "patterns", "--data-root", lake.root]
    procs, ready = [], []
    for n in range(2):
        ready.append(tmp_path / f"ready-{n}")
        checked = [tmp_path / f"checked-{n}", tmp_path / f"checked-{1 - n}"]
        command = [sys.executable, "-c", APPENDER, go, ready[-1], *checked, *args]
        command = [str(c) for c in command]
        procs.append(
            subprocess.Popen(
                command,
                cwd=REPO,
                env=child_env(),
                text=True,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
        )
    try:
        for path, proc in zip(ready, procs, strict=True):
            wait_for(path, proc)
        go.write_text("")
        outputs = [p.communicate(timeout=120) for p in procs]
        results = [(p.returncode, *out) for p, out in zip(procs, outputs, strict=True)]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate()
    assert sorted(code for code, _, _ in results) == [0, 2], results
    rejected = next(err for code, _, err in results if code == 2)
    assert "already exists; send it with mode=upsert" in rejected
    assert Counter(ids(lake)) == Counter(OLD + NEW)
