"""Mapping between the shared messages and the OpenAI chat-completions wire format.

Used by the OpenAI client backend and by the small OpenAI-compatible server, and nowhere
else: the rest of the code base only sees `models.messages`.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, cast

from models.messages import (
    AssistantTurn,
    FinishReason,
    Message,
    ModelParams,
    NamedToolChoice,
    Role,
    ToolCall,
    ToolChoice,
    ToolSpec,
)
from models.toolparse import written_arguments

_FINISH: dict[str, FinishReason] = {"stop": "stop", "length": "length", "tool_calls": "tool_calls"}
_TOOL_FIELDS = ("name", "description", "parameters")


class WireFormatError(ValueError):
    """A wire payload that cannot be mapped (bad role, bad arguments JSON, ...)."""


# -- requests ------------------------------------------------------------------------------


def request_body(
    model: str,
    messages: Sequence[Message],
    tools: Sequence[ToolSpec],
    params: ModelParams,
    *,
    stream: bool,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": model,
        "messages": [message_to_wire(m) for m in messages],
        "temperature": params.temperature,
        "max_tokens": params.max_tokens,
        "stream": stream,
    }
    if params.stop:
        body["stop"] = list(params.stop)
    if tools:
        body["tools"] = [tool_to_wire(t) for t in tools]
        body["tool_choice"] = tool_choice_to_wire(params.tool_choice)
    if stream:
        body["stream_options"] = {"include_usage": True}
    return body


def message_to_wire(message: Message) -> dict[str, Any]:
    wire: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        wire["content"] = message.content or None
        wire["tool_calls"] = [call_to_wire(c) for c in message.tool_calls]
    if message.tool_call_id is not None:
        wire["tool_call_id"] = message.tool_call_id
    if message.name is not None:
        wire["name"] = message.name
    return wire


def call_to_wire(call: ToolCall) -> dict[str, Any]:
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
    }


def tool_to_wire(tool: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
        },
    }


def tool_choice_to_wire(choice: ToolChoice) -> str | dict[str, Any]:
    if isinstance(choice, NamedToolChoice):
        return {"type": "function", "function": {"name": choice.name}}
    return choice


def params_from_wire(body: Mapping[str, Any], *, default: ModelParams) -> ModelParams:
    """Read generation options from a request body; absent fields keep `default`'s values."""
    updates: dict[str, Any] = {}
    if body.get("temperature") is not None:
        updates["temperature"] = body["temperature"]
    limit = body.get("max_completion_tokens") or body.get("max_tokens")
    if limit is not None:
        updates["max_tokens"] = limit
    choice = body.get("tool_choice")
    if isinstance(choice, Mapping):
        name = (choice.get("function") or {}).get("name")
        if not isinstance(name, str):
            raise WireFormatError("tool_choice object needs function.name")
        updates["tool_choice"] = NamedToolChoice(name=name)
    elif choice is not None:
        updates["tool_choice"] = choice
    stop = body.get("stop")
    if stop:
        updates["stop"] = (stop,) if isinstance(stop, str) else tuple(stop)
    try:
        return ModelParams.model_validate({**default.model_dump(), **updates})
    except ValueError as exc:
        raise WireFormatError(str(exc)) from None


def messages_from_wire(items: Sequence[Mapping[str, Any]]) -> list[Message]:
    messages = []
    for item in items:
        content = item.get("content")
        if isinstance(content, list):  # content parts: keep the text ones
            content = "".join(p.get("text", "") for p in content if isinstance(p, Mapping))
        calls = tuple(call_from_wire(c) for c in item.get("tool_calls") or ())
        try:
            messages.append(
                Message(
                    role=cast(Role, item.get("role")),  # untrusted: Message validates it
                    content=content or "",
                    tool_calls=calls,
                    tool_call_id=item.get("tool_call_id"),
                    name=item.get("name"),
                )
            )
        except ValueError as exc:
            raise WireFormatError(f"bad message: {exc}") from None
    return messages


def call_from_wire(item: Mapping[str, Any]) -> ToolCall:
    function = item.get("function") or {}
    args = function.get("arguments") or {}
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except ValueError:
            raise WireFormatError("tool call arguments are not valid JSON") from None
    if not isinstance(args, dict) or not isinstance(function.get("name"), str):
        raise WireFormatError("tool call needs function.name and an arguments object")
    return ToolCall(id=item.get("id") or _new_id("call"), name=function["name"], arguments=args)


def tools_from_wire(items: Sequence[Mapping[str, Any]]) -> list[ToolSpec]:
    tools = []
    for item in items:
        function = item.get("function") or {}
        # OpenAI's function object may also carry `strict` (schema-constrained decoding), which
        # this server does not do; the model's calls are validated against the schema anyway.
        fields = {k: function[k] for k in _TOOL_FIELDS if function.get(k) is not None}
        try:
            tools.append(ToolSpec.model_validate(fields))
        except ValueError as exc:
            raise WireFormatError(f"bad tool: {exc}") from None
    return tools


# -- responses -----------------------------------------------------------------------------


def completion_response(turn: AssistantTurn, model: str) -> dict[str, Any]:
    text, wrong = attempted_calls_to_wire(turn)
    calls = [call_to_wire(c) for c in turn.tool_calls] + wrong
    message: dict[str, Any] = {"role": "assistant", "content": _join(turn.text, text) or None}
    if calls:
        message["tool_calls"] = calls
    finish = finish_reason_to_wire(turn, has_calls=bool(calls))
    return {
        "id": _new_id("chatcmpl"),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": usage_to_wire(turn),
    }


def attempted_calls_to_wire(turn: AssistantTurn) -> tuple[str, list[dict[str, Any]]]:
    """The calls the model got wrong, as an OpenAI server returns them: as written.

    OpenAI does not validate a model's calls (its clients do): a call to an unknown tool or
    with bad arguments is still a tool call, its arguments as the model wrote them. A call
    without a readable name is no call on the wire; it goes back as the text it was.
    """
    text, calls = "", []
    for bad in turn.invalid_tool_calls:
        if bad.name:
            arguments = written_arguments(bad.raw)
            calls.append(
                {
                    "id": bad.id,
                    "type": "function",
                    "function": {"name": bad.name, "arguments": arguments},
                }
            )
        else:
            text = _join(text, f"<tool_call>\n{bad.raw}\n</tool_call>")
    return text, calls


def finish_reason_to_wire(turn: AssistantTurn, *, has_calls: bool) -> str:
    """ "tool_calls" exactly when the message carries tool calls, as clients expect."""
    if has_calls:
        return "tool_calls"
    return "length" if turn.finish_reason == "length" else "stop"


def _join(*texts: str) -> str:
    return "\n".join(t for t in texts if t)


def usage_to_wire(turn: AssistantTurn) -> dict[str, int]:
    prompt, completion = turn.usage.prompt_tokens, turn.usage.completion_tokens
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def chunk(
    chunk_id: str,
    model: str,
    delta: Mapping[str, Any],
    *,
    finish_reason: str | None = None,
) -> dict[str, Any]:
    return {
        "id": chunk_id,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "delta": dict(delta), "finish_reason": finish_reason}],
    }


def finish_reason_from_wire(value: Any, *, has_calls: bool) -> FinishReason:
    if has_calls:
        return "tool_calls"
    return _FINISH.get(value, "stop")


def _new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:16]}"


def new_chunk_id() -> str:
    return _new_id("chatcmpl")
