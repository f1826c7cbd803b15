"""The GPU profile's LLM: vLLM through Ray Serve LLM, and the adapter the orchestrator uses.

``vllm_llm_config`` turns our settings into Ray Serve LLM's ``LLMConfig`` fields (plain data,
testable anywhere); ``build_vllm_llm`` builds the ``LLMServer`` deployment (needs vLLM);
``VLLMHandleChatModel`` sends chat-completions requests through its DeploymentHandle and
maps the answer to the shared message types, so the orchestrator's loop is unchanged; its
``stream`` forwards vLLM's chunks as they arrive (no collect-and-replay).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

from ray.serve.exceptions import BackPressureError, DeploymentUnavailableError
from ray.serve.handle import DeploymentHandle

from crow.settings import AppSettings
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


def vllm_llm_config(settings: AppSettings) -> dict[str, Any]:
    v = settings.llm.vllm
    return {
        "model_loading_config": {"model_id": settings.llm.model, "model_source": v.model_source},
        "accelerator_type": v.accelerator_type,
        "engine_kwargs": {
            "tensor_parallel_size": v.tensor_parallel_size,
            "pipeline_parallel_size": v.pipeline_parallel_size,
            "quantization": v.quantization,
            "max_model_len": v.max_model_len,
            "gpu_memory_utilization": v.gpu_memory_utilization,
            "enable_prefix_caching": True,
            "enable_auto_tool_choice": True,
            "tool_call_parser": "llama3_json",
            **v.engine_kwargs,
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


def build_vllm_llm(settings: AppSettings) -> Any:
    """The bound LLMServer deployment (Ray Serve LLM; requires vLLM on the cluster)."""
    from ray.serve.llm import LLMConfig, build_llm_deployment

    return build_llm_deployment(LLMConfig(**vllm_llm_config(settings)), name_prefix="LLM:")


class VLLMHandleChatModel:
    """ChatModel over an LLMServer handle: chat-completions requests in, AssistantTurn out.

    `stream` forwards each chunk as it arrives (TextDeltas; tool-call deltas joined into
    ToolCallDones; one TurnDone), mapped exactly as the OpenAI client backend maps its chunks.
    """

    def __init__(self, handle: DeploymentHandle, model: str) -> None:
        self._handle = handle
        self._model = model

    async def request(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec] = (),
        params: ModelParams | None = None,
    ) -> AssistantTurn:  # fmt: skip
        params = params or ModelParams()
        body = request_body(self._model, messages, tools, params, stream=False)
        final = None
        async for data in self._payloads(body, params):
            final = data
        if final is None:
            raise ModelError("vLLM answered nothing")
        return turn_from_completion(final, tools, params)

    def stream(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec] = (),
        params: ModelParams | None = None,
    ) -> AsyncIterator[StreamEvent]:  # fmt: skip
        params = params or ModelParams()
        body = request_body(self._model, messages, tools, params, stream=True)
        return events_from_chunks(self._payloads(body, params), tools, params)

    async def _payloads(
        self, body: dict[str, Any], params: ModelParams
    ) -> AsyncIterator[dict[str, Any]]:
        """What LLMServer.chat yields, as wire dicts, as it arrives. An error payload raises
        its ModelError; the Serve request is cancelled if this generator is closed or
        cancelled before the end."""
        deadline = asyncio.get_running_loop().time() + params.timeout_s
        responses = self._handle.options(stream=True).chat.remote(_chat_request(body))
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


def llm_deployment(settings: AppSettings, args: dict[str, Any]) -> Any:
    """The bound LLM deployment of the configured backend (chosen once, at build time)."""
    if settings.llm.backend == "vllm":
        return build_vllm_llm(settings)
    from deployments.llm import LLMDeployment

    return LLMDeployment.bind(args)


def chat_model_for(handle: DeploymentHandle, settings: AppSettings) -> Any:
    """The ChatModel that speaks to that deployment."""
    if settings.llm.backend == "vllm":
        return VLLMHandleChatModel(handle, settings.llm.model)
    from deployments.handles import HandleChatModel

    return HandleChatModel(handle)
