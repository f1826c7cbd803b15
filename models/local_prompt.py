"""Render the shared messages into a prompt with the model's own (Hugging Face) chat template."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from models.messages import Message, ModelParams, NamedToolChoice, ToolSpec
from models.openai_wire import tool_to_wire


def render_prompt(
    tokenizer: Any, messages: Sequence[Message], tools: Sequence[ToolSpec], params: ModelParams
) -> str:
    """The full prompt text up to the assistant's turn (tools omitted when tool_choice=none:
    shown its tools, the 0.5B model writes a call as its answer even when told not to)."""
    offered = [tool_to_wire(t) for t in tools] if params.tool_choice != "none" else []
    return str(
        tokenizer.apply_chat_template(
            [template_message(m) for m in messages],
            tools=offered or None,
            add_generation_prompt=True,
            tokenize=False,
        )
    )


def forced_prefix(tools: Sequence[ToolSpec], params: ModelParams) -> str:
    """Start of the answer written for the model when a tool call is forced (Qwen format)."""
    if not tools:
        return ""
    if isinstance(params.tool_choice, NamedToolChoice):
        return f'<tool_call>\n{{"name": "{params.tool_choice.name}", "arguments": '
    if params.tool_choice == "required":
        return '<tool_call>\n{"name": "'
    return ""


def template_message(message: Message) -> dict[str, Any]:
    """The dict shape Hugging Face chat templates expect (arguments as objects)."""
    item: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        item["tool_calls"] = [
            {"type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in message.tool_calls
        ]
    if message.tool_call_id is not None:
        item["tool_call_id"] = message.tool_call_id
    if message.name is not None:
        item["name"] = message.name
    return item
