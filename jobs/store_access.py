"""The chat store from a job or a command, with one writer for the chat database, always.

When the app runs (its Serve application is in reach), every call goes to its ChatStore
deployment, retried with backoff while the store is away (a restarting replica), and never
to the file. Only when no app runs (no Ray cluster, or none with the application) does the
caller open the chat-state file itself: then it is the only writer.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import time
from typing import Any

from crow.settings import AppSettings
from crow.store.chat_store import ChatStore

log = logging.getLogger(__name__)
BACKOFF_S = (0.5, 1.0, 2.0, 4.0, 8.0)  # then 8 s between tries


class StoreAccess:
    """``call(method, *args)`` on the ChatStore deployment of `app`, or on the file.

    `connect`: join a Ray cluster already running on this machine (a command run next to
    `make run`); inside a Ray job the cluster is joined already. `handle`: a ChatStore
    deployment handle to use (tests). `retry_s`: how long a call keeps retrying.
    """

    def __init__(
        self,
        settings: AppSettings,
        *,
        app: str = "crow",
        connect: bool = False,
        handle: Any = None,
        retry_s: float = 60.0,
    ) -> None:
        self.retry_s = retry_s
        self._joined = False
        self._store: ChatStore | None = None
        self._handle = handle if handle is not None else self._running_app(app, connect)
        if self._handle is not None and handle is None and not self._writes(settings):
            self._leave()
            self._handle = None
        if self._handle is None:  # no app: this process is the chat database's only writer
            self._store = ChatStore(settings.chat_db_path)

    def _running_app(self, app: str, connect: bool) -> Any:
        """The app's ChatStore handle, or None when no app runs in reach."""
        try:
            import ray
            from ray import serve

            if not ray.is_initialized():
                if not connect:
                    return None
                # Ray annotates logging_level as int; it takes a level name too (its default).
                ray.init(address="auto", log_to_driver=False, logging_level="ERROR")  # type: ignore[arg-type]
                self._joined = True
            if app not in serve.status().applications:
                self._leave()
                return None
        except Exception as exc:  # no cluster, or no Serve in it
            log.debug("no running app (%s): the chat-state file it is", exc)
            self._leave()
            return None
        return serve.get_deployment_handle("ChatStore", app_name=app)

    def _writes(self, settings: AppSettings) -> bool:
        """Whether the running app writes the chat database `settings` names (a job given
        another var_dir must not change the app's keys or records)."""
        try:
            served = self._handle.file.remote().result(timeout_s=min(self.retry_s, 30.0))
        except Exception as exc:  # not ready yet: the app it is, as calls will retry
            log.debug("could not ask the app for its chat database (%s)", exc)
            return True
        mine = str(settings.chat_db_path.resolve())
        if served != mine:
            log.info("the running app writes %s, not %s: using the file", served, mine)
        return bool(served == mine)

    def call(self, method: str, *args: Any, retry_s: float | None = None, **kwargs: Any) -> Any:
        if self._handle is None:
            return getattr(self._store, method)(*args, **kwargs)
        deadline = time.monotonic() + (self.retry_s if retry_s is None else retry_s)
        for attempt in itertools.count():
            try:
                return getattr(self._handle, method).remote(*args, **kwargs).result(timeout_s=30)
            except Exception as exc:
                wait = BACKOFF_S[min(attempt, len(BACKOFF_S) - 1)]
                if time.monotonic() + wait > deadline:
                    raise
                log.warning("chat store %s failed (%s); retrying in %g s", method, exc, wait)
                time.sleep(wait)

    def _leave(self) -> None:
        if self._joined:
            import ray

            with contextlib.suppress(Exception):
                ray.shutdown()
            self._joined = False

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
        self._leave()
