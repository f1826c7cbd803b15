"""Grammars that make a local model's tool calls valid by construction (llama.cpp, llguidance).

A call is written in the model's own format (Qwen: ``<tool_call>{"name", "arguments"}
</tool_call>``), its name one of the offered tools and its arguments that tool's JSON schema.

- ``tool_choice="auto"``: the grammar is lazy. The model writes freely; once it starts a call
  in any of the forms small models use (the ``<tool_call>`` tag, a ```` ```json ```` fence, or
  or a JSON object as the whole answer), the rest of the call is constrained.
- ``"required"`` or a named tool: the whole output is one or more tagged calls (to that one
  tool when named).
- ``"none"`` with tools: the tools stay in the prompt (its cached prefix is the same as the
  steps that may call them) and the answer is prose that cannot hold a call (NO_CALL_GRAMMAR).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from models.messages import NamedToolChoice, ToolChoice, ToolSpec

NO_CALL_GRAMMAR = r"%llguidance {}" "\n" r"start: /[^<{\[`\s][^<]*/"
"""Prose: it starts with neither a tag, a JSON value nor a code fence, and never opens a tag."""
CALL_TAG = "<tool_call>"
CALL_END = "</tool_call>"
_FENCE = "```json"
# llama.cpp's trigger kinds (common_grammar_trigger_type): a word (a one-token word, like the
# tag, must also be a preserved token), a regex that must match the whole output so far (its
# first group is where the grammar starts).
_TRIGGER_WORD, _TRIGGER_PATTERN_FULL = 1, 3


def call_schema(tools: Sequence[ToolSpec]) -> dict[str, Any]:
    """JSON schema of one call to any of `tools`: {"name": <tool>, "arguments": {...}}."""
    options = [
        {
            "type": "object",
            "properties": {"name": {"const": tool.name}, "arguments": _closed(tool.parameters)},
            "required": ["name", "arguments"],
            "additionalProperties": False,
        }
        for tool in tools
    ]
    return options[0] if len(options) == 1 else {"anyOf": options}


def constraint(tools: Sequence[ToolSpec], choice: ToolChoice) -> dict[str, Any]:
    """The llama.cpp request fields that constrain tool calls for `choice` ({} without tools)."""
    if not tools:
        return {}
    if choice == "none":
        return {"grammar": NO_CALL_GRAMMAR}
    if isinstance(choice, NamedToolChoice):
        named = [t for t in tools if t.name == choice.name]
        if not named:
            raise ValueError(f"tool_choice names {choice.name!r}, which is not offered")
        tools = named
    call = f"call: %json {json.dumps(call_schema(tools))}"
    tagged = f'tagged: ({json.dumps(CALL_TAG)} "\\n" call "\\n" {json.dumps(CALL_END)})+'
    if choice != "auto":
        grammar = "\n".join(["%llguidance {}", "start: tagged", tagged, call])
        return {"grammar": grammar, "preserved_tokens": [CALL_TAG, CALL_END]}
    fenced = f'fenced: {json.dumps(_FENCE)} "\\n" call "\\n```"'
    grammar = "\n".join(["%llguidance {}", "start: tagged | fenced | call", tagged, fenced, call])
    return {
        "grammar": grammar,
        "grammar_lazy": True,
        "grammar_triggers": [
            {"type": _TRIGGER_WORD, "value": CALL_TAG},
            {"type": _TRIGGER_WORD, "value": _FENCE},
            {"type": _TRIGGER_PATTERN_FULL, "value": r"\s*(\{[\s\S]*)"},
        ],
        "preserved_tokens": [CALL_TAG, CALL_END],
    }


def _closed(schema: dict[str, Any]) -> dict[str, Any]:
    """An object schema that also refuses properties it does not declare."""
    if schema.get("type") == "object" and "additionalProperties" not in schema:
        return {**schema, "additionalProperties": False}
    return schema
