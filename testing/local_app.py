"""serve_config.yaml deployed as `serve run` deploys it, on a private local Ray instance.

For the Serve tests and the benchmarks: the real application graph (deployment options
included) with its args pointed at a scratch var dir and, optionally, a scripted model
factory; Serve and Ray are shut down on exit, even on failure. It deploys through Ray
Serve's private API (``ray.serve._private``), which production code never uses.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parents[1]
APP_NAME = "crow"
T = TypeVar("T")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]  # (host, port) of an AF_INET socket
        return port


def wait_until(
    check: Callable[[], T], timeout: float = 90.0, what: str = "the app did not come up"
) -> T:
    """Poll ``check`` until it returns something truthy (HTTP errors count as not yet)."""
    import httpx

    deadline = time.monotonic() + timeout
    while True:
        try:
            if result := check():
                return result
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.25)


@contextlib.contextmanager
def serve_config_app(
    var: Path, factory: str | None, *, app_options: dict[str, Any] | None = None, **args: Any
) -> Iterator[str]:
    """serve_config.yaml as `serve run` deploys it, with its args pointed at `var`, the
    scripted model `factory` ('module:callable'; None: the configured real model) and `args`
    (top-level app args, applied last; a section given as a dict is merged into the
    config's); `app_options` are application options of the config (e.g.
    ``logging_config``). Indexes missing at start are not built unless `args` says
    ``reindex={"index_missing_on_start": True}``. On a private local Ray instance that is
    shut down on exit. Yields the base URL."""
    import httpx
    import ray
    import yaml
    from ray import serve
    from ray.serve._private import api as serve_api
    from ray.serve.schema import ServeDeploySchema

    config = yaml.safe_load((ROOT / "serve_config.yaml").read_text())
    port = free_port()
    config["http_options"] = {**config["http_options"], "port": port}
    app = config["applications"][0]
    given = app["args"]
    given["var_dir"] = str(var)
    given["reindex"] = {**given.get("reindex", {}), "index_missing_on_start": False}
    if factory is not None:
        given["llm"] = {"backend": "custom", "factory": factory}
    for name, value in args.items():
        section = given.get(name)
        merge = isinstance(value, dict) and isinstance(section, dict)
        given[name] = {**section, **value} if merge else value
    app.update(app_options or {})
    schema = ServeDeploySchema.model_validate(config)
    ray.init(
        address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, namespace="serve"
    )
    try:
        client = serve_api.serve_start(
            http_options=schema.http_options.model_dump(), proxy_location=schema.proxy_location
        )
        client.deploy_apps(schema, _blocking=False)
        url = f"http://127.0.0.1:{port}"
        wait_until(lambda: serve.status().applications[APP_NAME].status == "RUNNING", 180)
        wait_until(lambda: httpx.get(f"{url}/ready", timeout=10).status_code == 200)
        yield url
    finally:
        serve.shutdown()  # type: ignore[no-untyped-call]  # ray leaves it unannotated
        ray.shutdown()
