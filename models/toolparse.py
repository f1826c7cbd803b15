"""Turn what a model actually emitted into validated tool calls.

Handles native (OpenAI-style) tool calls and tool calls written into the text:
`<tool_call>{...}</tool_call>` tags (Qwen, Hermes), ```json fenced blocks, and bare JSON
(Llama 3 `{"name": ..., "parameters": ...}`), one or several per turn, arguments as a JSON
object or a JSON string. Every call is checked against the offered tools' JSON schemas.
Nothing here raises on bad model output: a bad call becomes an `InvalidToolCall` whose
`reason` can be sent back to the model as a retry hint.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from models.messages import InvalidToolCall, ToolCall, ToolSpec

_TAG = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)
_FENCE = re.compile(r"```[ \t]*(?:json|JSON|tool_call|tool_code)?[ \t]*\n(.*?)\n?```", re.DOTALL)
_ARG_KEYS = ("arguments", "parameters", "args", "input")
_DECODER = json.JSONDecoder()
# What decoding model text may raise: ValueError for bad JSON, RecursionError for JSON nested
# deeper than the interpreter's recursion limit ("[[[[..." in a model's output).
_BAD_JSON = (ValueError, RecursionError)
_JSON_SPACE = re.compile(r"[ \t\n\r]*")


@dataclass(frozen=True)
class ParsedCalls:
    text: str
    """The model's text with every tool-call span removed."""
    valid: tuple[ToolCall, ...]
    invalid: tuple[InvalidToolCall, ...]


def parse_tool_calls(
    text: str,
    tools: Sequence[ToolSpec],
    *,
    native: Sequence[Mapping[str, Any]] = (),
) -> ParsedCalls:
    """Extract and validate tool calls from `native` (wire format) and from `text`."""
    by_name = {tool.name: tool for tool in tools}
    known = frozenset(by_name)
    raw_calls: list[tuple[Any, str]] = [(call, _dump(call)) for call in native]
    remaining = text
    for pattern in (_TAG, _FENCE):
        remaining, found = _take_spans(remaining, pattern, known)
        raw_calls.extend(found)
    remaining, found = _take_bare_json(remaining, known)
    raw_calls.extend(found)

    valid: list[ToolCall] = []
    invalid: list[InvalidToolCall] = []
    for obj, raw in raw_calls:
        result = _check(obj, raw, by_name)
        if isinstance(result, ToolCall):
            valid.append(result)
        else:
            invalid.append(result)
    return ParsedCalls(text=_tidy(remaining), valid=tuple(valid), invalid=tuple(invalid))


def retry_message(invalid: Sequence[InvalidToolCall], tools: Sequence[ToolSpec]) -> str:
    """A short message telling the model what was wrong and how to call tools correctly."""
    lines = [f"- {call.name or 'unnamed call'}: {call.reason}" for call in invalid]
    names = ", ".join(tool.name for tool in tools) or "none"
    return (
        "Some tool calls could not be run:\n"
        + "\n".join(lines)
        + f"\nAvailable tools: {names}. Call a tool with concrete argument values that match "
        'its parameters, e.g. <tool_call>{"name": "<tool>", "arguments": {...}}</tool_call>, '
        "or answer without tools."
    )


def written_arguments(raw: str) -> str:
    """The arguments part of a call as the model wrote it (`raw` of an InvalidToolCall).

    A JSON text, or the raw text itself when it holds no call object; for clients that
    validate calls themselves, as OpenAI-compatible ones do.
    """
    try:
        obj = json.loads(raw)
    except _BAD_JSON:
        return raw
    body = obj.get("function") if isinstance(obj, dict) else None
    body = body if isinstance(body, dict) else obj
    if not isinstance(body, dict):
        return raw
    args: object = next((body[key] for key in _ARG_KEYS if key in body), {})
    return args if isinstance(args, str) else _dump(args)


# -- finding candidate calls in text -------------------------------------------------------


def _take_spans(
    text: str, pattern: re.Pattern[str], known: frozenset[str]
) -> tuple[str, list[tuple[Any, str]]]:
    """Remove every span of `pattern` whose body holds call-shaped JSON; return the calls."""
    found: list[tuple[Any, str]] = []

    def replace(match: re.Match[str]) -> str:
        body = match.group(1)
        calls = [(obj, raw) for obj, raw in _json_values(body) if _looks_like_calls(obj, known)]
        if not calls:
            if pattern is _TAG:  # a tag is an unambiguous attempt, even if unparseable
                found.append((None, body.strip()))
                return ""
            return match.group(0)
        for obj, raw in calls:
            found.extend(_flatten(obj, raw))
        return ""

    return pattern.sub(replace, text), found


def _take_bare_json(text: str, known: frozenset[str]) -> tuple[str, list[tuple[Any, str]]]:
    """Find call-shaped JSON objects/arrays written straight into the text."""
    found: list[tuple[Any, str]] = []
    kept: list[str] = []
    pos = 0
    for start, end, obj in _scan_json(text):
        if _looks_like_calls(obj, known):
            kept.append(text[pos:start])
            found.extend(_flatten(obj, text[start:end]))
            pos = end
    kept.append(text[pos:])
    return "".join(kept), found


def _scan_json(text: str) -> Iterator[tuple[int, int, Any]]:
    """The JSON objects, and the arrays that start with one, in `text`: (start, end, value)."""
    i = 0
    while i < len(text):
        if _opens_calls(text, i):
            try:
                obj, end = _DECODER.raw_decode(text, i)
            except _BAD_JSON:
                i += 1
                continue
            yield i, end, obj
            i = end
        else:
            i += 1


def _opens_calls(text: str, i: int) -> bool:
    """Whether a call, or a list of calls, may start at `i`: an object, or an array whose first
    item is one. Other arrays are not parsed: "[[[[..." would have each of its brackets parsed
    ~1,000 levels deep before the decoder gives up, quadratic in the text's length."""
    if text[i] == "{":
        return True
    if text[i] != "[":
        return False
    space = _JSON_SPACE.match(text, i + 1)  # always matches (it may be empty)
    j = space.end() if space else i + 1
    return text[j : j + 1] == "{"


def _json_values(body: str) -> list[tuple[Any, str]]:
    """JSON values in a tag/fence body: usually one, sometimes several or with junk around."""
    body = body.strip()
    try:
        return [(json.loads(body), body)]
    except _BAD_JSON:
        return [(obj, body[s:e]) for s, e, obj in _scan_json(body)]


def _looks_like_calls(obj: Any, known: frozenset[str]) -> bool:
    if isinstance(obj, list):
        return bool(obj) and all(_looks_like_call(item, known) for item in obj)
    return _looks_like_call(obj, known)


def _looks_like_call(obj: Any, known: frozenset[str]) -> bool:
    """{"name": ..., "arguments"|"parameters": ...}, {"function": {...}}, or a bare known name."""
    if not isinstance(obj, dict):
        return False
    if isinstance(obj.get("function"), dict):
        return isinstance(obj["function"].get("name"), str)
    name = obj.get("name")
    return isinstance(name, str) and (
        any(key in obj for key in _ARG_KEYS) or (set(obj) <= {"name", "id"} and name in known)
    )


def _flatten(obj: Any, raw: str) -> list[tuple[Any, str]]:
    if isinstance(obj, list):
        return [(item, _dump(item)) for item in obj]
    return [(obj, raw)]


# -- validating one call -------------------------------------------------------------------


def _check(obj: Any, raw: str, tools: Mapping[str, ToolSpec]) -> ToolCall | InvalidToolCall:
    call_id = obj.get("id") if isinstance(obj, dict) else None
    if not isinstance(call_id, str) or not call_id:
        call_id = f"call_{uuid.uuid4().hex[:12]}"
    if not isinstance(obj, dict):
        return InvalidToolCall(id=call_id, name=None, raw=raw, reason="tool call is not valid JSON")
    body = obj["function"] if isinstance(obj.get("function"), dict) else obj
    name = body.get("name")
    if not isinstance(name, str) or not name:
        return InvalidToolCall(id=call_id, name=None, raw=raw, reason="tool call has no name")

    def bad(reason: str) -> InvalidToolCall:
        return InvalidToolCall(id=call_id, name=name, raw=raw, reason=reason)

    tool = tools.get(name)
    if tool is None:
        return bad(f"unknown tool {name!r}")
    args: object = next((body[key] for key in _ARG_KEYS if key in body), {})
    if args is None or args == "":
        args = {}
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except _BAD_JSON:
            return bad("arguments are not valid JSON")
    if not isinstance(args, dict):
        return bad("arguments must be a JSON object")
    if _is_schema_echo(args, tool.parameters):
        return bad("arguments repeat the parameter schema; give concrete values instead")
    args = _drop_null_optionals(args, tool.parameters)
    problem = _validate(args, tool.parameters)
    if problem:
        return bad(problem)
    return ToolCall(id=call_id, name=name, arguments=args)


def _is_schema_echo(args: dict[str, Any], schema: Mapping[str, Any]) -> bool:
    props = schema.get("properties") or {}
    if "properties" in args and "properties" not in props:
        return True
    if args.get("type") == "object" and "type" not in props:
        return True
    # {"query": {"type": "string", "description": ...}}: a property schema as the value
    return any(
        isinstance(value, dict)
        and "type" in value
        and ("description" in value or "enum" in value)
        and props.get(key, {}).get("type") != "object"
        for key, value in args.items()
    )


def _drop_null_optionals(args: dict[str, Any], schema: Mapping[str, Any]) -> dict[str, Any]:
    """Small models write `"since": null` for omitted optional arguments; omit them."""
    required = set(schema.get("required") or ())
    return {k: v for k, v in args.items() if v is not None or k in required}


def _validate(args: dict[str, Any], schema: Mapping[str, Any]) -> str | None:
    try:
        errors = sorted(Draft202012Validator(schema).iter_errors(args), key=lambda e: e.path)
    except SchemaError as exc:  # the tool's own schema is broken: not the model's fault
        return f"tool schema is invalid: {exc.message}"
    if not errors:
        return None
    parts = []
    for error in errors[:3]:
        where = ".".join(str(p) for p in error.absolute_path)
        parts.append(f"{where}: {error.message}" if where else error.message)
    return "invalid arguments: " + "; ".join(parts)


def _dump(obj: Any) -> str:
    try:
        return json.dumps(obj, ensure_ascii=False)
    except (TypeError, *_BAD_JSON):
        return repr(obj)


def _tidy(text: str) -> str:
    text = text.replace("<|python_tag|>", "")
    text = text.strip().strip(";").strip()  # separators left between removed bare calls
    return re.sub(r"\n{3,}", "\n\n", text)
