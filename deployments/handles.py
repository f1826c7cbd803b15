"""An async facade over a DeploymentHandle, the same shape as crow.services.ThreadProxy."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from ray.serve.handle import DeploymentHandle


class HandleProxy:
    """``await proxy.method(*args)`` calls ``handle.method.remote(*args)`` and awaits it."""

    def __init__(self, handle: DeploymentHandle) -> None:
        self._handle = handle

    def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]:
        method = getattr(self._handle, name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            return await method.remote(*args, **kwargs)

        return call
