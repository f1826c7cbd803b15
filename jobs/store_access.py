"""The chat store from a job or a command: the running app's ChatStore deployment when there
is one (the store file has exactly one writer), else the chat-state file itself (app down)."""

from __future__ import annotations

import contextlib
import logging
from typing import Any

from crow.settings import AppSettings
from crow.store.chat_store import ChatStore

log = logging.getLogger(__name__)


class StoreAccess:
    """``call(method, *args)`` on the ChatStore deployment of `app`, or on the file.

    `connect`: join a Ray cluster already running on this machine (a command run next to
    `make run`); inside a Ray job the cluster is joined already.
    """

    def __init__(self, settings: AppSettings, *, app: str = "crow", connect: bool = False) -> None:
        self._handle: Any = None
        self._store: ChatStore | None = None
        self._joined = False
        try:
            self._handle = self._deployment(app, connect)
        except Exception as exc:  # no cluster, or no app in it: the app is down
            log.debug("no running ChatStore (%s); opening the file", exc)
            self._leave()
            self._store = ChatStore(settings.chat_db_path)

    def _deployment(self, app: str, connect: bool) -> Any:
        import ray
        from ray import serve

        if not ray.is_initialized():
            if not connect:
                raise RuntimeError("not in a Ray cluster")
            ray.init(address="auto", log_to_driver=False, logging_level="ERROR")
            self._joined = True
        handle = serve.get_deployment_handle("ChatStore", app_name=app)
        handle.check_health.remote().result(timeout_s=30)
        return handle

    @property
    def through_app(self) -> bool:
        return self._handle is not None

    def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        if self._handle is not None:
            return getattr(self._handle, method).remote(*args, **kwargs).result(timeout_s=30)
        return getattr(self._store, method)(*args, **kwargs)

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
