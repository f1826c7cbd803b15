"""Model factories for Serve tests (`llm: {backend: custom, factory: ...}`), and a helper
that runs serve_config.yaml on a private local Ray instance."""

from __future__ import annotations

import contextlib
import json
import socket
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from models.messages import AssistantTurn, Message, ModelParams, ToolCall, ToolSpec
from models.testing import ScriptedChatModel

ROOT = Path(__file__).resolve().parents[1]
APP_NAME = "crow"


def _count_then_answer(
    messages: Sequence[Message], tools: Sequence[ToolSpec], params: ModelParams
) -> AssistantTurn:
    last = messages[-1]
    if last.role == "tool":
        total = json.loads(last.content).get("total_interactions")
        return AssistantTurn(text=f"You have {total:,} interactions.")
    if tools and "how many" in last.content.lower():
        return AssistantTurn(tool_calls=(ToolCall(id="c1", name="get_interaction_summary", arguments={}),),
                             finish_reason="tool_calls")  # fmt: skip
    return AssistantTurn(text="Hello! Ask me about your retail data.")


class _Endless(ScriptedChatModel):
    """Answers every request with the same rule (a scripted model that never runs out)."""

    async def request(self, messages, tools=(), params=None):
        self.add(_count_then_answer)
        self.calls.clear()  # long runs: keep no history of requests
        return await super().request(messages, tools, params)


def rule_model() -> ScriptedChatModel:
    return _Endless(latency_s=0.0)


def rule_model_slow() -> ScriptedChatModel:
    """The same rules with a fixed 0.2 s per model call, so requests are in flight."""
    return _Endless(latency_s=0.2)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(check, timeout: float = 90.0, what: str = "the app did not come up"):
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
def serve_config_app(var: Path, factory: str | None, **args: Any) -> Iterator[str]:
    """serve_config.yaml as `serve run` deploys it (deployment options included), with its
    args pointed at `var`, the scripted model `factory` (None: the configured real model) and
    `args`; on a private local Ray instance that is shut down on exit. Yields the base URL."""
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
    app["args"] = {**app["args"], "var_dir": str(var), "reindex": {"index_missing_on_start": False}}
    if factory is not None:
        app["args"]["llm"] = {"backend": "custom", "factory": factory}
    app["args"].update(args)
    schema = ServeDeploySchema.model_validate(config)
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
             namespace="serve")  # fmt: skip
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
        serve.shutdown()
        ray.shutdown()
