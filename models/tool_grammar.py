"""Grammars that make a local model's tool calls valid by construction (llama.cpp, llguidance).

A call is written in the model's own format (Qwen: ``<tool_call>{"name", "arguments"}
</tool_call>``), its name one of the offered tools and its arguments that tool's JSON schema.

llama.cpp applies an llguidance grammar from the first token: it has no lazy mode (and its
chat endpoint overwrites a request's ``grammar_lazy`` and triggers with the template's own).
So every choice is one grammar over the whole output:

- ``tool_choice="auto"``: prose, or calls in any of the forms small models use (
  ``<tool_call>`` tags, one to a line; a ```` ```json ```` fence holding a call or a list
  of calls; or a JSON object as the whole answer), or prose followed by tagged calls. The model's first token chooses; a call, once started, is
  constrained. (An earlier lazy grammar was in fact eager: every step had to call a tool,
  greetings and answers after tool results included.)
- ``"required"`` or a named tool: the whole output is one or more tagged calls (to that one
  tool when named).
- ``"none"`` with tools: the tools stay in the prompt (its cached prefix is the same as the
  steps that may call them) and the answer is prose that cannot hold a call (NO_CALL_GRAMMAR).

Prose never holds a ``<`` (where a tag would start) and does not start with a space, ``{``,
``[`` or a backtick.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from models.messages import NamedToolChoice, ToolChoice, ToolSpec

_PROSE = r"/[^<{\[`\s][^<]*/"
"""Text that starts with neither a tag, a JSON value nor a code fence, and never opens a tag."""
NO_CALL_GRAMMAR = f"%llguidance {{}}\nstart: {_PROSE}"
CALL_TAG = "<tool_call>"
CALL_END = "</tool_call>"
_FENCE = "```json"
MAX_CALLS = 3
"""Tagged calls one output may hold (one step's calls run in parallel; repeats are dropped)."""


def _calls(most: int) -> str:
    """One to `most` tagged calls, one to a line."""
    return " | ".join(' "\\n" '.join(["one"] * n) for n in range(1, most + 1))


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


def calls_schema(tools: Sequence[ToolSpec]) -> dict[str, Any]:
    """JSON schema of a list of 1 to MAX_CALLS calls to any of `tools`."""
    return {"type": "array", "items": call_schema(tools), "minItems": 1, "maxItems": MAX_CALLS}


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
    rules = [
        # calls one to a line, at most MAX_CALLS: a 1.5B writes a second call after a newline
        # (with none allowed there it never wrote two), and may repeat its call until a bound
        f"tagged: {_calls(MAX_CALLS)}",
        f'one: {json.dumps(CALL_TAG)} "\\n" call "\\n" {json.dumps(CALL_END)}',
        f"call: %json {json.dumps(call_schema(tools))}",
    ]
    if choice == "auto":
        rules = [
            "start: tagged | fenced | call | prose",
            # a fence holds one call or a list of them: the list is how a 1.5B writes a
            # reply's calls when shown one (after one call in a fence it always stopped)
            f'fenced: {json.dumps(_FENCE)} "\\n" (call | calls) "\\n```"',
            f"calls: %json {json.dumps(calls_schema(tools))}",
            "prose: TEXT tagged?",
            f"TEXT: {_PROSE}",
            *rules,
        ]
    else:
        rules = ["start: tagged", *rules]
    return {"grammar": "\n".join(["%llguidance {}", *rules])}


def _closed(schema: dict[str, Any]) -> dict[str, Any]:
    """An object schema that also refuses properties it does not declare."""
    if schema.get("type") == "object" and "additionalProperties" not in schema:
        return {**schema, "additionalProperties": False}
    return schema
