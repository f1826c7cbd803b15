"""The job-run record a reindex keeps up to date (state, rows done / total).

Through the running app's ChatStore deployment when there is one in this Ray cluster (the
store file has one writer), else straight in the chat-state file (the app is down).
"""

from __future__ import annotations

import logging
from typing import Any

from crow.settings import AppSettings
from crow.store.chat_store import ChatStore

log = logging.getLogger(__name__)


class JobRecorder:
    def __init__(
        self, settings: AppSettings, org_id: str, job_id: str, *, app: str = "crow"
    ) -> None:
        self.org_id, self.job_id = org_id, job_id
        self._handle: Any = None
        self._store: ChatStore | None = None
        try:
            from ray import serve

            self._handle = serve.get_deployment_handle("ChatStore", app_name=app)
            self._call("get_job_run", org_id, job_id)
        except Exception:
            self._handle = None
            self._store = ChatStore(settings.chat_db_path)
        if self._call("get_job_run", org_id, job_id) is None:
            self._call("create_job_run", org_id, "reindex", job_id=job_id)

    def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        if self._handle is not None:
            return getattr(self._handle, method).remote(*args, **kwargs).result(timeout_s=30)
        return getattr(self._store, method)(*args, **kwargs)

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
        if self._store is not None:
            self._store.close()
