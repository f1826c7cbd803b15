"""The first start: how long after ``/ready`` each organization's data is searchable.

serve_config.yaml as `make run` deploys it (``testing.local_app.serve_config_app``), over
the demo data with no indexes at all and ``reindex.index_missing_on_start`` on, as on a
fresh clone; the LLM is the scripted model (the real one loads before ``/ready`` and does
not index). From ``/ready`` on, ``GET /api/v1/qna/indexing`` is polled for every
organization until all its collections are searchable; each organization's reindex job
record gives the time of each stage.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

from benchmarks.bench_graph import api_key_headers

FACTORY = "testing.rule_model:rule_model"
POLL_S = 1.0


def bench_first_start(
    work: Path, data_root: Path, orgs: tuple[str, ...], *, timeout_s: float = 900.0
) -> dict[str, Any]:
    import httpx

    from testing.local_app import serve_config_app

    var = work / "first-start"
    shutil.rmtree(var, ignore_errors=True)
    headers = {org: api_key_headers(var, org) for org in orgs}
    rows = {org: _rows(data_root / org) for org in orgs}
    started = time.perf_counter()
    with serve_config_app(
        var,
        FACTORY,
        data_root=str(data_root.resolve()),
        index_root=str(var / "indexes"),
        reindex={"index_missing_on_start": True},
    ) as url:
        ready = time.perf_counter()
        searchable: dict[str, float] = {}
        last: dict[str, Any] = {}
        with httpx.Client(base_url=url, timeout=30) as http:
            # An org is searchable a moment before its job record says it ended: keep
            # polling it until then, for the record's final state and timings.
            pending = set(orgs)
            while pending and time.perf_counter() - ready < timeout_s:
                for org in sorted(pending):
                    r = http.get("/api/v1/qna/indexing", headers=headers[org])
                    if r.status_code == 200:
                        last[org] = r.json()
                        if last[org]["searchable"]:
                            searchable.setdefault(org, time.perf_counter() - ready)
                        if org in searchable and _job_state(last[org]) in _ENDED:
                            pending.discard(org)
                time.sleep(POLL_S)
    per_org = {
        org: {
            "searchable_after_ready_s": round(searchable[org], 1) if org in searchable else None,
            "rows": rows[org],
            "job_timings": ((last.get(org) or {}).get("job") or {}).get("timings"),
            "job_state": _job_state(last.get(org) or {}),
        }
        for org in orgs
    }
    done = [searchable[o] for o in orgs if o in searchable]
    all_rows = sum(sum(counts.values()) for counts in rows.values())
    return {
        "model": f"{FACTORY} (scripted; the real LLM loads before /ready)",
        "ready_s": round(ready - started, 1),
        "orgs": per_org,
        "all_searchable_after_ready_s": (round(max(done), 1) if len(done) == len(orgs) else None),
        "rows_total": all_rows,
        "rows_per_s": round(all_rows / max(done), 1) if len(done) == len(orgs) else None,
        "timed_out": len(done) < len(orgs),
        "poll_s": POLL_S,
    }


_ENDED = ("succeeded", "failed", "stopped")


def _job_state(indexing: dict[str, Any]) -> str | None:
    return (indexing.get("job") or {}).get("state")


def _rows(org_dir: Path) -> dict[str, int]:
    """Rows of each dataset of an organization's Parquet data."""
    import pyarrow.parquet as pq

    out: dict[str, int] = {}
    for dataset in sorted(p for p in org_dir.iterdir() if p.is_dir() and p.name[0] != "."):
        files = sorted(dataset.rglob("*.parquet"))
        out[dataset.name] = sum(pq.ParquetFile(f).metadata.num_rows for f in files)
    return out
