"""The GPU profile's LLM: vLLM through Ray Serve LLM, and the adapter the orchestrator uses.

``vllm_llm_config`` turns our settings into Ray Serve LLM's ``LLMConfig`` fields (plain data,
testable anywhere); ``build_vllm_llm`` builds the ``LLMServer`` deployment (needs vLLM);
``VLLMHandleChatModel`` sends chat-completions requests through its DeploymentHandle and
maps the answer to the shared message types, so the orchestrator's loop is unchanged.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

from ray.serve.handle import DeploymentHandle

from crow.settings import AppSettings
from models.chat import stream_turn
from models.errors import ModelError
from models.messages import AssistantTurn, Message, ModelParams, StreamEvent, ToolSpec
from models.openai_backend import turn_from_completion
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
    """ChatModel over an LLMServer handle: chat-completions requests in, AssistantTurn out."""

    def __init__(self, handle: DeploymentHandle, model: str) -> None:
        self._handle = handle
        self._model = model

    async def request(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec] = (),
        params: ModelParams | None = None,
    ) -> AssistantTurn:  # fmt: skip
        from ray.serve.llm.openai_api_models import ChatCompletionRequest

        params = params or ModelParams()
        body = request_body(self._model, messages, tools, params, stream=False)
        response = None
        async for item in self._handle.options(stream=True).chat.remote(
            ChatCompletionRequest(**body)
        ):
            response = item
        data = response.model_dump() if hasattr(response, "model_dump") else response
        if not isinstance(data, dict) or "choices" not in data:
            raise ModelError(f"vLLM answered with an error: {str(data)[:300]}")
        return turn_from_completion(data, tools, params)

    async def stream(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec] = (),
        params: ModelParams | None = None,
    ) -> AsyncIterator[StreamEvent]:  # fmt: skip
        async for event in stream_turn(await self.request(messages, tools, params)):
            yield event


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
