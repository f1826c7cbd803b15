"""Index versions and reindex job runs in the chat database, per organization."""

from __future__ import annotations

import json
from typing import Any, Literal

from crow.ids import new_id
from crow.store import db

JobState = Literal["pending", "running", "succeeded", "failed", "stopped"]


class JobRuns(db.Database):
    # --- index versions and job runs -------------------------------------------------
    def record_index_version(
        self, org_id: str, collection: str, version: str, *, kind: str, row_count: int, model: str
    ) -> None:
        self._query(
            "INSERT OR REPLACE INTO index_versions VALUES (?, ?, ?, ?, ?, ?, ?)",
            [org_id, collection, version, kind, row_count, model, db.now()],
        )

    def list_index_versions(self, org_id: str) -> list[dict[str, Any]]:
        rows = self._query(
            "SELECT * FROM index_versions WHERE org_id = ? ORDER BY collection, created_at",
            [org_id],
        )
        return [{**r, "created_at": db.iso(r["created_at"])} for r in rows]

    def create_job_run(
        self,
        org_id: str,
        kind: str,
        *,
        job_id: str | None = None,
        collections: list[str] | None = None,
    ) -> dict[str, Any]:
        """A new pending job, or, when a pending or running job of the org already covers one
        of `collections`, that job with ``already_running: True`` (nothing is created)."""
        jid, now = job_id or new_id("job"), db.now()
        with self._lock:
            if collections:
                for row in self._con.execute(
                    "SELECT id, collections FROM job_runs WHERE org_id = ? AND kind = ? "
                    "AND state IN ('pending', 'running') ORDER BY created_at",
                    [org_id, kind],
                ).fetchall():
                    if set(json.loads(row[1] or "[]")) & set(collections):
                        running = row[0]
                        break
                else:
                    running = None
                if running is not None:
                    return {**self._seen_job_run(org_id, running), "already_running": True}
            self._con.execute(
                "INSERT INTO job_runs VALUES (?, ?, ?, 'pending', 0, NULL, NULL, ?, ?, ?, NULL)",
                [jid, org_id, kind, now, now, json.dumps(collections or [])],
            )
            return self._seen_job_run(org_id, jid)

    def update_job_run(
        self,
        org_id: str,
        job_id: str,
        *,
        state: JobState | None = None,
        rows_done: int | None = None,
        rows_total: int | None = None,
        detail: str | None = None,
        timings: dict[str, float] | None = None,
    ) -> None:
        """Set what is given; ``timings`` (seconds per stage) replaces the recorded ones."""
        self._query(
            """
            UPDATE job_runs SET state = coalesce(?, state), rows_done = coalesce(?, rows_done),
                rows_total = coalesce(?, rows_total), detail = coalesce(?, detail),
                timings = coalesce(?, timings), updated_at = ?
            WHERE id = ? AND org_id = ?
            """,
            [
                state,
                rows_done,
                rows_total,
                detail,
                None if timings is None else json.dumps(timings),
                db.now(),
                job_id,
                org_id,
            ],
        )

    def get_job_run(self, org_id: str, job_id: str) -> dict[str, Any] | None:
        with self._lock:
            return self._job_run(org_id, job_id)

    def latest_job_run(self, org_id: str, kind: str) -> dict[str, Any] | None:
        """The org's most recent job of `kind`, or None."""
        with self._lock:
            row = self._con.execute(
                "SELECT id FROM job_runs WHERE org_id = ? AND kind = ? "
                "ORDER BY created_at DESC, id DESC LIMIT 1",
                [org_id, kind],
            ).fetchone()
            return None if row is None else self._job_run(org_id, row[0])

    def _seen_job_run(self, org_id: str, job_id: str) -> dict[str, Any]:
        """A job run this call has just read or written under the lock: it is there."""
        job = self._job_run(org_id, job_id)
        if job is None:
            raise LookupError(f"job run {job_id} of {org_id} is gone")
        return job

    def _job_run(self, org_id: str, job_id: str) -> dict[str, Any] | None:
        cur = self._con.execute(
            "SELECT * FROM job_runs WHERE id = ? AND org_id = ?", [job_id, org_id]
        )
        cols = [d[0] for d in cur.description]
        row = cur.fetchone()
        if row is None:
            return None
        r = dict(zip(cols, row, strict=True))
        return {
            **r,
            "collections": json.loads(r["collections"] or "[]"),
            "timings": json.loads(r["timings"] or "{}"),
            "created_at": db.iso(r["created_at"]),
            "updated_at": db.iso(r["updated_at"]),
        }
