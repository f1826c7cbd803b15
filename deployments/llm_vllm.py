"""The GPU profile's LLM: vLLM through Ray Serve LLM, and the adapter the orchestrator uses.

``vllm_llm_config`` turns our settings into Ray Serve LLM's ``LLMConfig`` fields (plain data,
testable anywhere; tests/deployments/test_vllm_config.py checks them against Ray 2.60 and vLLM 0.29's
argument names); ``build_vllm_llm`` builds the ``LLMServer`` deployment (needs vLLM);
``VLLMHandleChatModel`` sends chat-completions requests through its DeploymentHandle and
maps the answer to the shared message types, so the orchestrator's loop is unchanged; its
``stream`` forwards vLLM's chunks as they arrive (no collect-and-replay).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

from ray.serve.exceptions import BackPressureError, DeploymentUnavailableError
from ray.serve.handle import DeploymentHandle

from crow.settings import AppSettings
from deployments.handles import HandleChatModel, as_deployment, streamed
from models.errors import ModelError, ModelOverloaded, ModelUnavailable
from models.messages import AssistantTurn, Message, ModelParams, StreamEvent, ToolSpec
from models.openai_backend import (
    events_from_chunks,
    mapped_errors,
    raise_for_error_payload,
    turn_from_completion,
    within,
)
from models.openai_wire import request_body

CHAT_TEMPLATES = Path(__file__).parent / "chat_templates"
"""The chat templates shipped with the package (package data)."""


def chat_template_path(name: str) -> Path:
    """The file llm.vllm.chat_template names: a file name in CHAT_TEMPLATES or an absolute
    path. FileNotFoundError when there is no such file (at build time, not on the GPU node)."""
    path = Path(name) if Path(name).is_absolute() else CHAT_TEMPLATES / name
    if not path.is_file():
        shipped = sorted(p.name for p in CHAT_TEMPLATES.glob("*.jinja"))
        raise FileNotFoundError(
            f"llm.vllm.chat_template {name!r}: no such file {path} (shipped: {shipped})"
        )
    return path


def vllm_llm_config(settings: AppSettings) -> dict[str, Any]:
    """The keyword arguments of Ray Serve LLM's LLMConfig (Ray 2.60, vLLM 0.29).

    * engine_kwargs holds vLLM's engine args and its frontend args alike: Ray sends a name
      of vLLM's FrontendArgs (chat_template, tool_call_parser, enable_auto_tool_choice) to
      FrontendArgs and any other to AsyncEngineArgs, and refuses an unknown name.
    * placement_group_config: one {"GPU": 1} bundle per TP x PP rank, STRICT_PACK by default,
      so a replica's GPUs are on one node (Ray's default, PACK, may split them). No CPU in
      the bundles: Ray adds the replica actor's CPU to the first; vLLM's workers take none.
    * accelerator_type only when set: Ray then adds `accelerator_type:<X>` to every bundle.
    """
    v = settings.llm.vllm
    ranks = v.tensor_parallel_size * v.pipeline_parallel_size
    frontend: dict[str, Any] = {}
    if v.tool_call_parser is not None:  # vLLM requires a parser for auto tool choice
        frontend |= {"enable_auto_tool_choice": True, "tool_call_parser": v.tool_call_parser}
    if v.chat_template is not None:
        frontend["chat_template"] = str(chat_template_path(v.chat_template))
    config: dict[str, Any] = {
        "model_loading_config": {"model_id": settings.llm.model, "model_source": v.model_source},
        "engine_kwargs": {
            "tensor_parallel_size": v.tensor_parallel_size,
            "pipeline_parallel_size": v.pipeline_parallel_size,
            "quantization": v.quantization,
            "max_model_len": v.max_model_len,
            "gpu_memory_utilization": v.gpu_memory_utilization,
            "enable_prefix_caching": True,
            **frontend,
            **v.engine_kwargs,
        },
        "placement_group_config": {
            "bundles": [{"GPU": 1} for _ in range(ranks)],
            "strategy": v.placement_strategy,
        },
        "deployment_config": {
            "autoscaling_config": {
                "min_replicas": v.min_replicas,
                "max_replicas": v.max_replicas,
                "target_ongoing_requests": v.target_ongoing_requests,
            },
            "max_ongoing_requests": v.max_ongoing_requests,
        },
    }
    if v.accelerator_type is not None:
        config["accelerator_type"] = v.accelerator_type
    return config


def build_vllm_llm(settings: AppSettings) -> Any:
    """The bound LLMServer deployment (Ray Serve LLM; requires vLLM on the cluster)."""
    from ray.serve.llm import LLMConfig, build_llm_deployment

    return build_llm_deployment(LLMConfig(**vllm_llm_config(settings)), name_prefix="LLM:")


class VLLMHandleChatModel:
    """ChatModel over an LLMServer handle: chat-completions requests in, AssistantTurn out.

    `stream` forwards each chunk as it arrives (TextDeltas; tool-call deltas joined into
    ToolCallDones; one TurnDone), mapped exactly as the OpenAI client backend maps its chunks.
    """

    def __init__(self, handle: DeploymentHandle[Any], model: str) -> None:
        self._handle = handle
        self._model = model

    async def request(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] = (),
        params: ModelParams | None = None,
    ) -> AssistantTurn:
        params = params or ModelParams()
        body = self._body(messages, tools, params, stream=False)
        final = None
        async for data in self._payloads(body, params):
            final = data
        if final is None:
            raise ModelError("vLLM answered nothing")
        return turn_from_completion(final, tools, params)

    def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] = (),
        params: ModelParams | None = None,
    ) -> AsyncIterator[StreamEvent]:
        params = params or ModelParams()
        body = self._body(messages, tools, params, stream=True)
        return events_from_chunks(self._payloads(body, params), tools, params)

    def _body(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        params: ModelParams,
        *,
        stream: bool,
    ) -> dict[str, Any]:
        body = request_body(self._model, messages, tools, params, stream=stream)
        body["messages"] = one_call_per_message(body["messages"])
        return body

    async def _payloads(
        self, body: dict[str, Any], params: ModelParams
    ) -> AsyncIterator[dict[str, Any]]:
        """What LLMServer.chat yields, as wire dicts, as it arrives. An error payload raises
        its ModelError; the Serve request is cancelled if this generator is closed or
        cancelled before the end."""
        deadline = asyncio.get_running_loop().time() + params.timeout_s
        responses = streamed(self._handle.options(stream=True).chat.remote(_chat_request(body)))
        finished = False
        try:
            with mapped_errors(params.timeout_s):
                async for item in within(deadline, responses):
                    for data in wire_payloads(item):
                        raise_for_error_payload(data)
                        yield data
            finished = True
        except BackPressureError as exc:
            raise ModelOverloaded(f"vLLM deployment is at capacity: {exc}") from exc
        except DeploymentUnavailableError as exc:
            raise ModelUnavailable(f"vLLM deployment unavailable: {exc}") from exc
        finally:
            if not finished and (cancel := getattr(responses, "cancel", None)) is not None:
                cancel()


def one_call_per_message(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Wire messages where an assistant message with several tool calls becomes one message
    per call, each followed by its result. The Llama 3.1 JSON template fails a request whose
    history has an assistant message with more than one call ("This model only supports
    single tool-calls at once!"), though the llama3_json parser may return several."""
    out: list[dict[str, Any]] = []
    i = 0
    while i < len(messages):
        message, i = messages[i], i + 1
        calls = message.get("tool_calls") or []
        if message.get("role") != "assistant" or len(calls) < 2:
            out.append(message)
            continue
        results = []
        while i < len(messages) and messages[i].get("role") == "tool":
            results.append(messages[i])
            i += 1
        for n, call in enumerate(calls):
            out.append(
                {
                    **message,
                    "content": message.get("content") if n == 0 else None,
                    "tool_calls": [call],
                }
            )
            out += [r for r in results if r.get("tool_call_id") == call.get("id")]
        ids = {call.get("id") for call in calls}
        out += [r for r in results if r.get("tool_call_id") not in ids]
    return out


def _chat_request(body: dict[str, Any]) -> Any:
    """The request object LLMServer.chat takes (imported lazily: needs ray[llm] and vLLM)."""
    from ray.serve.llm.openai_api_models import ChatCompletionRequest

    return ChatCompletionRequest(**body)


def wire_payloads(item: Any) -> Iterator[dict[str, Any]]:
    """The chat-completion payloads in one item that LLMServer.chat yields.

    Depending on the Ray version and on streaming, an item is a batch (list) of items, an
    SSE string ("data: {...}\\n\\n", possibly several, possibly "data: [DONE]"), a dict, or
    a pydantic model (ChatCompletionResponse, ChatCompletionStreamResponse, ErrorResponse).
    """
    if isinstance(item, list | tuple):
        for part in item:
            yield from wire_payloads(part)
    elif isinstance(item, str | bytes):
        text = item.decode() if isinstance(item, bytes) else item
        for line in text.splitlines():
            line = line.strip()
            if not line.startswith("data:"):
                continue
            payload = line[len("data:") :].strip()
            if payload == "[DONE]":
                continue
            try:
                data = json.loads(payload)
            except ValueError:
                raise ModelError(f"malformed stream chunk from vLLM: {payload[:200]}") from None
            if isinstance(data, dict):
                yield data
    elif isinstance(item, dict):
        yield item
    elif hasattr(item, "model_dump"):
        yield item.model_dump()
    else:
        raise ModelError(f"unexpected item from vLLM: {type(item).__name__}")


def llm_deployment(settings: AppSettings) -> Any:
    """The bound LLM deployment of the configured backend (chosen once, at build time)."""
    if settings.llm.backend == "vllm":
        return build_vllm_llm(settings)
    from deployments.llm import LLMDeployment

    return as_deployment(LLMDeployment).bind(settings)


def chat_model_for(handle: DeploymentHandle[Any], settings: AppSettings) -> Any:
    """The ChatModel that speaks to that deployment."""
    if settings.llm.backend == "vllm":
        return VLLMHandleChatModel(handle, settings.llm.model)
    return HandleChatModel(handle)
