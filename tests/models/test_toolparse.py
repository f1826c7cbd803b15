"""Tool-call parsing: recorded real outputs of the local model, plus documented formats."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from models.toolparse import parse_tool_calls, retry_message
from tests.models.tools_fixture import TOOLS
from tests.repo import ROOT

RECORDED = ROOT / "tests" / "fixtures" / "local_model_outputs"


def names(text: str, **kwargs: object) -> tuple[list[str], list[str]]:
    parsed = parse_tool_calls(text, TOOLS, **kwargs)  # type: ignore[arg-type]
    return [c.name for c in parsed.valid], [c.reason for c in parsed.invalid]


# -- recorded outputs of Qwen2.5-Coder-0.5B-Instruct (unconstrained, transformers runtime) --

# What the parser must make of each recording. The 0.5B model answers in ```json fences, not
# <tool_call> tags, and often picks a wrong or made-up tool: parsing still must not fail.
EXPECTED_RECORDED: dict[str, tuple[list[str], list[str]]] = {
    "greeting": ([], []),
    "org_values": ([], []),
    "count_social": (["search_interactions"], []),
    "interactions_sizing": (["search_interactions"], []),
    "products_popular": (["search_products"], []),
    "multi_count_and_search": ([], ["unknown tool 'search_feedback'"]),
    "patterns_anomaly": ([], ["invalid arguments: Additional properties are not allowed"]),
}


def _recorded() -> list[Path]:
    return sorted(RECORDED.glob("*.json"))


@pytest.mark.parametrize("path", _recorded(), ids=lambda p: p.stem)
def test_recorded_output_parses_without_error(path: Path) -> None:
    record = json.loads(path.read_text())
    parsed = parse_tool_calls(record["raw_output"], TOOLS)
    valid, reasons = EXPECTED_RECORDED[path.stem]
    assert [c.name for c in parsed.valid] == valid
    assert len(parsed.invalid) == len(reasons)
    for call, reason in zip(parsed.invalid, reasons, strict=True):
        assert call.reason.startswith(reason)
    if valid or reasons:  # the call markup is gone from the answer text
        assert "```" not in parsed.text and '"name"' not in parsed.text
    else:
        assert parsed.text == record["raw_output"].strip()


# -- Qwen / Hermes tags --------------------------------------------------------------------


def test_qwen_tag() -> None:
    text = (
        '<tool_call>\n{"name": "get_interaction_summary", "arguments": {"channel": "web"}}\n'
        "</tool_call>"
    )
    parsed = parse_tool_calls(text, TOOLS)
    assert [(c.name, c.arguments) for c in parsed.valid] == [
        ("get_interaction_summary", {"channel": "web"})
    ]
    assert parsed.text == "" and parsed.invalid == ()
    assert parsed.valid[0].id.startswith("call_")


def test_several_tags_with_text_around() -> None:
    text = (
        "Let me check.\n"
        '<tool_call>\n{"name": "get_interaction_summary", "arguments": {}}\n</tool_call>\n'
        '<tool_call>\n{"name": "search_interactions", "arguments": {"query": "returns"}}\n'
        "</tool_call>"
    )
    parsed = parse_tool_calls(text, TOOLS)
    assert [c.name for c in parsed.valid] == ["get_interaction_summary", "search_interactions"]
    assert parsed.text == "Let me check."


def test_unclosed_tag_cut_by_max_tokens_is_still_read() -> None:
    text = '<tool_call>\n{"name": "search_products", "arguments": {"query": "tents"}}'
    assert names(text) == (["search_products"], [])


def test_garbage_inside_a_tag_is_invalid_not_an_exception() -> None:
    valid, reasons = names('<tool_call>\n{"name": "search_products", "arguments": {</tool_call>')
    assert valid == [] and reasons == ["tool call is not valid JSON"]


# -- vLLM llama3_json / Llama 3 bare JSON, fenced JSON ------------------------------------


def test_llama3_json_parameters_key() -> None:
    text = '{"name": "search_products", "parameters": {"query": "tents", "sort": "popularity"}}'
    assert names(text) == (["search_products"], [])


def test_llama3_python_tag_and_several_calls() -> None:
    text = (
        '<|python_tag|>{"name": "get_interaction_summary", "parameters": {"channel": "cctv"}}; '
        '{"name": "search_patterns", "parameters": {"query": "dwell time"}}'
    )
    parsed = parse_tool_calls(text, TOOLS)
    assert [c.name for c in parsed.valid] == ["get_interaction_summary", "search_patterns"]


def test_fenced_json_block() -> None:
    text = 'Sure:\n```json\n{"name": "search_org_context", "arguments": {"query": "mission"}}\n```'
    parsed = parse_tool_calls(text, TOOLS)
    assert [c.name for c in parsed.valid] == ["search_org_context"]
    assert parsed.text == "Sure:"


def test_json_list_of_calls() -> None:
    text = json.dumps(
        [
            {"name": "get_interaction_summary", "arguments": {}},
            {"name": "search_products", "arguments": {"query": "stoves"}},
        ]
    )
    assert names(text) == (["get_interaction_summary", "search_products"], [])


def test_arguments_as_json_string() -> None:
    text = json.dumps({"name": "search_products", "arguments": json.dumps({"query": "tents"})})
    parsed = parse_tool_calls(text, TOOLS)
    assert parsed.valid[0].arguments == {"query": "tents"}


def test_native_openai_calls() -> None:
    native = [
        {
            "id": "call_9",
            "type": "function",
            "function": {"name": "search_patterns", "arguments": '{"query": "peaks"}'},
        }
    ]
    parsed = parse_tool_calls("", TOOLS, native=native)
    assert [(c.id, c.name, c.arguments) for c in parsed.valid] == [
        ("call_9", "search_patterns", {"query": "peaks"})
    ]


def test_null_optional_arguments_are_dropped() -> None:
    text = json.dumps(
        {"name": "get_interaction_summary", "arguments": {"channel": None, "since": None}}
    )
    assert parse_tool_calls(text, TOOLS).valid[0].arguments == {}


# -- invalid calls -------------------------------------------------------------------------


def test_schema_echo_is_invalid() -> None:
    echo = {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}
    valid, reasons = names(json.dumps({"name": "search_products", "arguments": echo}))
    assert valid == [] and "schema" in reasons[0]


def test_property_schema_as_value_is_invalid() -> None:
    args = {"query": {"type": "string", "description": "What to look for"}}
    valid, reasons = names(json.dumps({"name": "search_products", "arguments": args}))
    assert valid == [] and "schema" in reasons[0]


def test_unknown_tool_is_invalid() -> None:
    valid, reasons = names('<tool_call>{"name": "drop_tables", "arguments": {}}</tool_call>')
    assert valid == [] and reasons == ["unknown tool 'drop_tables'"]


@pytest.mark.parametrize(
    ("arguments", "fragment"),
    [
        ({"query": "tents", "limit": "ten"}, "limit"),
        ({"query": "tents", "sort": "newest"}, "sort"),
        ({"limit": 3}, "query"),
        ({"query": "tents", "colour": "red"}, "colour"),
    ],
)
def test_arguments_are_validated_against_the_schema(
    arguments: dict[str, object], fragment: str
) -> None:
    text = json.dumps({"name": "search_products", "arguments": arguments})
    valid, reasons = names(text)
    assert valid == []
    assert reasons[0].startswith("invalid arguments") and fragment in reasons[0]


def test_valid_and_invalid_calls_in_one_turn() -> None:
    text = (
        '<tool_call>{"name": "get_interaction_summary", "arguments": {}}</tool_call>'
        '<tool_call>{"name": "search_products", "arguments": {"limit": 0}}</tool_call>'
    )
    parsed = parse_tool_calls(text, TOOLS)
    assert [c.name for c in parsed.valid] == ["get_interaction_summary"]
    assert [c.name for c in parsed.invalid] == ["search_products"]
    message = retry_message(parsed.invalid, TOOLS)
    assert "search_products" in message and "get_interaction_summary" in message


# -- plain answers stay text ---------------------------------------------------------------


def test_plain_answer_has_no_calls() -> None:
    text = "Hello! I can count interactions or search products for you."
    parsed = parse_tool_calls(text, TOOLS)
    assert (parsed.text, parsed.valid, parsed.invalid) == (text, (), ())


def test_json_data_in_an_answer_is_not_a_call() -> None:
    text = 'Top product:\n```json\n{"name": "Trail Runner 2", "price": 120}\n```'
    parsed = parse_tool_calls(text, TOOLS)
    assert parsed.text == text and parsed.valid == () and parsed.invalid == ()
