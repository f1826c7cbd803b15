"""The constraints handed to llama.cpp for each tool_choice (the real model obeys them in
tests/models/test_local_model_smoke.py)."""

from __future__ import annotations

import json

import pytest

from models.messages import NamedToolChoice
from models.tool_grammar import MAX_CALLS, NO_CALL_GRAMMAR, call_schema, constraint
from tests.models.tools_fixture import TOOLS


def test_auto_is_one_grammar_where_prose_and_every_call_form_may_start() -> None:
    # llama.cpp runs an llguidance grammar from the first token (no lazy mode), so "auto"
    # must let prose start too, or every step is forced to call a tool.
    fields = constraint(TOOLS, "auto")
    assert set(fields) == {"grammar"}
    lines = fields["grammar"].splitlines()
    assert lines[0] == "%llguidance {}"
    assert "start: tagged | fenced | call | prose" in lines
    assert "prose: TEXT tagged?" in lines  # "Let me check." then a tagged call


def test_a_reply_may_hold_several_calls_up_to_a_bound() -> None:
    # a 1.5B writes a reply's calls as a list in a fence, or as tags one to a line; with one
    # call per fence and no newline between tags it never wrote two
    lines = constraint(TOOLS, "auto")["grammar"].splitlines()
    assert 'fenced: "```json" "\\n" (call | calls) "\\n```"' in lines
    [calls] = [line for line in lines if line.startswith("calls: %json ")]
    schema = json.loads(calls.removeprefix("calls: %json "))
    assert schema == {
        "type": "array",
        "items": call_schema(TOOLS),
        "minItems": 1,
        "maxItems": MAX_CALLS,
    }
    [tagged] = [line for line in lines if line.startswith("tagged: ")]
    options = tagged.removeprefix("tagged: ").split(" | ")
    assert options == [' "\\n" '.join(["one"] * n) for n in range(1, MAX_CALLS + 1)]


def test_required_and_named_constrain_the_whole_output() -> None:
    required = constraint(TOOLS, "required")
    assert "start: tagged" in required["grammar"].splitlines()
    assert "prose" not in required["grammar"]
    named = constraint(TOOLS, NamedToolChoice(name="search_patterns"))
    schema = json.loads(named["grammar"].split("call: %json ", 1)[1])
    assert schema["properties"]["name"] == {"const": "search_patterns"}


def test_a_call_names_an_offered_tool_with_closed_arguments() -> None:
    schema = call_schema(TOOLS)
    names = {option["properties"]["name"]["const"] for option in schema["anyOf"]}
    assert names == {t.name for t in TOOLS}
    for option in schema["anyOf"]:
        assert option["properties"]["arguments"]["additionalProperties"] is False


def test_none_keeps_the_tools_but_no_call_can_start_and_no_tools_add_nothing() -> None:
    assert constraint(TOOLS, "none") == {"grammar": NO_CALL_GRAMMAR}
    assert constraint((), "required") == {}
    with pytest.raises(ValueError, match="not offered"):
        constraint(TOOLS, NamedToolChoice(name="search_competitors"))
