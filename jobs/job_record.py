"""The job-run record a reindex keeps up to date (state, rows done / total).

Through the running app's ChatStore deployment (jobs.store_access: the chat database has one
writer); while the store is away, records wait and go in when it is back, and the job's
result is recorded at its end, however long the store was away (up to FINAL_RETRY_S).
"""

from __future__ import annotations

import logging
from typing import Any

from crow.settings import AppSettings
from jobs.store_access import StoreAccess

log = logging.getLogger(__name__)


FINAL_RETRY_S = 600.0


class JobRecorder:
    def __init__(
        self,
        settings: AppSettings,
        org_id: str,
        job_id: str,
        *,
        app: str = "crow",
        store: StoreAccess | None = None,
    ) -> None:
        self.org_id, self.job_id = org_id, job_id
        self._store = store or StoreAccess(settings, app=app)
        self._fields: dict[str, Any] = {}  # progress not recorded yet
        self._versions: list[tuple[str, Any]] = []  # index versions not recorded yet
        job = self._store.call("get_job_run", org_id, job_id)
        if job is None:
            job = self._store.call("create_job_run", org_id, "reindex", job_id=job_id)
        self.created_at: str | None = job.get("created_at") if job else None

    def update(self, **fields: Any) -> None:
        """Record progress now if the store answers soon, else with the next record."""
        self._fields.update(fields)
        self._flush(retry_s=5.0)

    def record_index(self, collection: str, meta: Any) -> None:
        self._versions.append((collection, meta))
        self._flush(retry_s=5.0)

    def _flush(self, *, retry_s: float) -> bool:
        try:
            while self._versions:
                collection, meta = self._versions[0]
                self._store.call(
                    "record_index_version",
                    self.org_id,
                    collection,
                    meta.version,
                    kind=meta.kind,
                    row_count=meta.count,
                    model=meta.model,
                    retry_s=retry_s,
                )
                self._versions.pop(0)
            if self._fields:
                fields, self._fields = self._fields, {}
                try:
                    self._store.call(
                        "update_job_run", self.org_id, self.job_id, retry_s=retry_s, **fields
                    )
                except Exception:
                    self._fields = {**fields, **self._fields}
                    raise
        except Exception:  # recording must never fail the job; it is tried again
            log.exception("could not record job progress yet")
            return False
        return True

    def close(self) -> None:
        """The job's result, recorded however long the store takes to come back."""
        if not self._flush(retry_s=FINAL_RETRY_S):
            log.error("job %s: the result could not be recorded", self.job_id)
        self._store.close()
