"""The constraints handed to llama.cpp for each tool_choice (the real model obeys them in
tests/models/test_local_model_smoke.py)."""

from __future__ import annotations

import json

import pytest

from models.messages import NamedToolChoice
from models.tool_grammar import NO_CALL_GRAMMAR, call_schema, constraint
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
