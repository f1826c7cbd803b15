"""Job records go through the app's ChatStore only; they wait out a store that is away."""

from __future__ import annotations

from types import SimpleNamespace

import jobs.store_access as store_access
from crow.store.chat_store import ChatStore
from jobs.job_record import JobRecorder
from jobs.store_access import StoreAccess

A = "acme-outdoor"


class FlakyHandle:
    """A ChatStore deployment handle over a real store whose calls fail while `down`."""

    def __init__(self, store: ChatStore) -> None:
        self.store, self.down, self.failures = store, 0, 0

    def __getattr__(self, method: str):
        def remote(*args, **kwargs):
            if self.down > 0:
                self.down -= 1
                self.failures += 1
                raise ConnectionError("ChatStore replica restarting")
            return SimpleNamespace(
                result=lambda timeout_s: getattr(self.store, method)(*args, **kwargs)
            )

        return SimpleNamespace(remote=remote)


def test_a_running_app_is_the_only_writer_and_records_wait_for_it(settings, monkeypatch):
    monkeypatch.setattr(store_access, "BACKOFF_S", (0.01,))
    app_store = ChatStore(":memory:")  # the app's store; the job never opens the file
    handle = FlakyHandle(app_store)
    recorder = JobRecorder(settings, A, "job_1", store=StoreAccess(settings, handle=handle))
    assert app_store.get_job_run(A, "job_1")["state"] == "pending"
    handle.down = 10**6  # the store goes away for longer than a progress update waits
    monkeypatch.setattr(store_access.StoreAccess, "call", _short(store_access.StoreAccess.call))
    recorder.update(state="running", rows_done=10)
    recorder.update(rows_done=20)
    assert app_store.get_job_run(A, "job_1")["state"] == "pending"  # not yet
    handle.down = 3  # back after three more failures
    recorder.update(state="succeeded", rows_done=30, detail="done")
    recorder.close()
    job = app_store.get_job_run(A, "job_1")
    assert (job["state"], job["rows_done"], job["detail"]) == ("succeeded", 30, "done")
    assert handle.failures > 3
    assert not settings.chat_db_path.exists()  # the file was never opened


def test_the_result_is_recorded_when_the_store_comes_back_at_the_end(settings, monkeypatch):
    monkeypatch.setattr(store_access, "BACKOFF_S", (0.01,))
    app_store = ChatStore(":memory:")
    handle = FlakyHandle(app_store)
    recorder = JobRecorder(settings, A, "job_2", store=StoreAccess(settings, handle=handle))
    handle.down = 50  # away during the last update: close() keeps trying
    recorder.update(state="failed", detail="embedding failed")
    recorder.close()
    assert app_store.get_job_run(A, "job_2")["state"] == "failed"


def test_without_an_app_the_job_writes_the_file(settings):
    recorder = JobRecorder(settings, A, "job_3")  # no Ray cluster here: the app is down
    recorder.update(state="succeeded")
    recorder.close()
    store = ChatStore(settings.chat_db_path)
    assert store.get_job_run(A, "job_3")["state"] == "succeeded"
    store.close()


def _short(call):
    """StoreAccess.call with progress updates' retries cut to a few tries (fast tests)."""

    def short(self, method, *args, retry_s=None, **kwargs):
        return call(self, method, *args, retry_s=0.05 if retry_s == 5.0 else retry_s, **kwargs)

    return short
