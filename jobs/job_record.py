"""The job-run record a reindex keeps up to date (state, rows done / total).

Through the running app's ChatStore deployment when there is one in this Ray cluster (the
store file has one writer), else straight in the chat-state file (the app is down).
"""

from __future__ import annotations

import logging
from typing import Any

from crow.settings import AppSettings
from jobs.store_access import StoreAccess

log = logging.getLogger(__name__)


class JobRecorder:
    def __init__(
        self, settings: AppSettings, org_id: str, job_id: str, *, app: str = "crow"
    ) -> None:
        self.org_id, self.job_id = org_id, job_id
        self._store = StoreAccess(settings, app=app)
        if self._call("get_job_run", org_id, job_id) is None:
            self._call("create_job_run", org_id, "reindex", job_id=job_id)

    def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return self._store.call(method, *args, **kwargs)

    def update(self, **fields: Any) -> None:
        try:
            self._call("update_job_run", self.org_id, self.job_id, **fields)
        except Exception:  # progress reporting must never fail the job
            log.exception("could not record job progress")

    def record_index(self, collection: str, meta: Any) -> None:
        self.update()
        try:
            self._call(
                "record_index_version", self.org_id, collection, meta.version,
                kind=meta.kind, row_count=meta.count, model=meta.model,
            )  # fmt: skip
        except Exception:
            log.exception("could not record the index version")

    def close(self) -> None:
        self._store.close()
