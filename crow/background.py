"""Work that outlives the request that started it: a stopped answer's storing, an in-process
reindex."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Coroutine
from typing import Any


class Background:
    """Tasks run in a context of their own, held until they end (the event loop keeps only
    weak references). Not in the starting request's context: a server that cancels the calls
    a cancelled request made (Ray Serve cancels its child requests, found by context) would
    cancel this work with it."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    def start(self, work: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(work, context=contextvars.Context())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def __bool__(self) -> bool:
        """Whether any task still runs."""
        return bool(self._tasks)
