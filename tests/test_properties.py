"""Property-based tests (hypothesis) of the text the model and the callers send us, each
example within a time bound; and odd inputs at the routes that must be 4xx, never 500.

- time words (crow/data/timewords.py): any text resolves to a sane range or raises TimeWordError;
- tool calls written by the model (models/toolparse.py, what the local llama.cpp backend and
  the OpenAI-compatible one parse their text with): any text gives valid calls, checked
  against the tools' schemas, or clean invalid ones; never an exception;
- footnotes (crow/chat/agent/sources.py): with_footnotes is idempotent, never repeats the
  footnotes the model copied, and strips what the former regexes stripped;
- a failing tool's error text (tabs, quotes, newlines) reaches the model as valid JSON;
- organization ids with a trailing newline are refused.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from pydantic import BaseModel

from crow.chat.agent.context import ToolContext
from crow.chat.agent.loop import Agent
from crow.chat.agent.runner import run_tool
from crow.chat.agent.sources import MAX_UNCITED, Source, select_sources, with_footnotes
from crow.chat.agent.tool import Tool, ToolOutput
from crow.chat.agent.tools import TOOLS
from crow.data.lake import DataLake
from crow.data.timewords import TimeWordError, resolve_range
from crow.ids import is_valid_org_id
from models.messages import AssistantTurn, Message, ToolCall
from models.testing import ScriptedChatModel
from models.toolparse import ParsedCalls, parse_tool_calls, retry_message, written_arguments
from tests.conftest import ORG_A, assert_error

FAST = timedelta(milliseconds=250)  # per example: these are all linear in the text
LONG_TEXT_OK = [HealthCheck.too_slow, HealthCheck.data_too_large]


# -- time words --------------------------------------------------------------------------------

_UNITS = ["hour", "day", "week", "month", "quarter", "year"]
_AMOUNTS = st.one_of(
    st.sampled_from(["", "a", "an", "one", "two", "three", "few", "0", "9999999"]),
    st.integers(0, 10**40).map(str),
)
_SPANS = st.builds(
    "{}{}{}{}{}".format,
    st.sampled_from(["", "last ", "past ", "in the last ", "the previous ", "recent "]),
    _AMOUNTS,
    st.sampled_from(["", " ", "   "]),
    st.sampled_from(_UNITS),
    st.sampled_from(["", "s", "s ago", " ago", "."]),
)
_ISO = st.one_of(
    st.dates().map(str),
    st.datetimes(timezones=st.none() | st.timezones()).map(lambda t: t.isoformat()),
    st.sampled_from(["9999-12-31", "0001-01-01", "9999-12-31T23:59:59+14:00", "2026-11-01Z"]),
)
_WORDS = st.sampled_from(
    [
        "",
        "all",
        "all time",
        "today",
        "yesterday",
        "recent",
        "this week",
        "this month",
        "month to date",
        "Last Week.",
        "ever",
        "null",
    ]
)
_LONG = st.builds(  # long runs where a backtracking pattern would stall
    lambda head, n, tail: head + " " * n + tail,
    st.sampled_from(["last", "past 3", "in the last", ""]),
    st.integers(0, 20_000),
    st.sampled_from(["days", "x", ""]),
)
TIME_TEXT = st.one_of(_SPANS, _ISO, _WORDS, _LONG, st.text(max_size=80), st.none())
ANCHORS = st.datetimes(
    min_value=datetime(1, 1, 1),
    max_value=datetime(9999, 12, 31, 23, 59, 59),
    timezones=st.none() | st.sampled_from([UTC, timezone(timedelta(hours=14))]),
)


@settings(deadline=FAST, max_examples=300, suppress_health_check=LONG_TEXT_OK)
@given(since=TIME_TEXT, until=TIME_TEXT, anchor=ANCHORS)
@example(since="last 9999999 years", until=None, anchor=datetime(2026, 11, 28, tzinfo=UTC))
@example(since="9999-12-31", until=None, anchor=datetime(2026, 11, 28, tzinfo=UTC))
@example(since="yesterday", until=None, anchor=datetime(1, 1, 1, tzinfo=UTC))
@example(since="last " + "9" * 5000 + " days", until=None, anchor=datetime(2026, 1, 1))
def test_time_words_resolve_to_a_sane_range_or_a_time_word_error(since, until, anchor):
    try:
        start, end = resolve_range(since, until, anchor)
    except TimeWordError as exc:
        assert len(str(exc)) < 400  # the message quotes the text, cut short
        return
    for t in (start, end):
        assert t is None or (isinstance(t, datetime) and t.tzinfo is not None)
    if start is not None and end is not None:
        assert start < end


# -- tool calls in model text ----------------------------------------------------------------

SPECS = [tool.spec for tool in TOOLS]
_NAMES = [spec.name for spec in SPECS]
_FRAGMENTS = [
    "<tool_call>",
    "</tool_call>",
    "```json\n",
    "```",
    "\n",
    " ",
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    '"name"',
    '"arguments"',
    '"parameters"',
    '"function"',
    '"id"',
    '"nope"',
    '"query"',
    '"limit"',
    '"channel"',
    '"since"',
    '"tents"',
    "1",
    "21",
    "-1",
    "null",
    "true",
    "1e999",
    "NaN",
    '"\\u0000"',
    '"\\ud800"',
    "<|python_tag|>",
    ";",
    "Sure! ",
    "\t",
    *(f'"{name}"' for name in _NAMES),
]
_ARG_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-(10**20), 10**20), st.floats(), st.text(max_size=12)
)
_CALL_JSON = st.builds(
    lambda name, key, args: json.dumps({"name": name, key: args}),
    st.sampled_from([*_NAMES, "nope", ""]),
    st.sampled_from(["arguments", "parameters", "args"]),
    st.dictionaries(
        st.sampled_from(["query", "limit", "channel", "since", "until", "x"]),
        _ARG_VALUES,
        max_size=4,
    )
    | st.text(max_size=20),
)
_WRAPPED_CALL = st.builds(
    lambda wrap, call: wrap.format(call),
    st.sampled_from(
        [
            "{}",
            "<tool_call>{}</tool_call>",
            "<tool_call>\n{}",
            "```json\n{}\n```",
            "[{}]",
            "Let me look. {}",
            "<|python_tag|>{};",
        ]
    ),
    _CALL_JSON,
)
_LONG_JUNK = st.builds(
    lambda unit, n: unit * n,
    st.sampled_from(
        ["[", "{", '{"a":', '[{"a":', '["a", ', "<tool_call>", "```json\n{", " ", "\n"]
    ),
    st.integers(0, 3000),
)
MODEL_TEXT = st.one_of(
    st.text(),
    st.lists(st.sampled_from(_FRAGMENTS) | st.text(max_size=4), max_size=80).map("".join),
    st.lists(_WRAPPED_CALL | st.text(max_size=20), max_size=5).map("\n".join),
    _LONG_JUNK,
)


@settings(deadline=timedelta(seconds=1), max_examples=400, suppress_health_check=LONG_TEXT_OK)
@given(text=MODEL_TEXT)
@example(text="[" * 20_000)  # nested deeper than the recursion limit: RecursionError before
@example(text='<tool_call>{"name": "search_products", "arguments": ' + "[" * 5000)
def test_any_model_text_gives_checked_calls_or_clean_invalid_ones(text):
    parsed = parse_tool_calls(text, SPECS)
    assert isinstance(parsed, ParsedCalls) and isinstance(parsed.text, str)
    specs = {spec.name: spec for spec in SPECS}
    for call in parsed.valid:
        assert call.name in specs and isinstance(call.arguments, dict)
        assert not list(
            Draft202012Validator(specs[call.name].parameters).iter_errors(call.arguments)
        )
    for call in parsed.invalid:
        assert isinstance(call.reason, str) and call.reason
        assert isinstance(written_arguments(call.raw), str)
    assert isinstance(retry_message(parsed.invalid, SPECS), str)


def test_a_well_formed_call_among_junk_is_found():
    text = (
        'Sure. [[[[ {"a": <tool_call>{"name": "search_products", "arguments": {"query": "tents"}}'
    )
    parsed = parse_tool_calls(text + "</tool_call>", SPECS)
    assert [(c.name, c.arguments) for c in parsed.valid] == [
        ("search_products", {"query": "tents"})
    ]


# -- footnotes -------------------------------------------------------------------------------

# The patterns with_footnotes used before (exponential, quadratic): the reference on small
# texts. The new code also drops a heading left with no footnotes under it ("...\n\nSources:"),
# repeatedly, which is what makes it idempotent.
_OLD_OWN = re.compile(
    r"\n+(?:\*\*)?(?:sources|references)(?:\*\*)?:?\s*\n(?:\s*\[\d+\].*\n?)+\s*$", re.I
)
_OLD_TRAILING = re.compile(r"(?:\n\s*\[\d+\][^\n]*)+\s*$")
_HEADING = re.compile(r"(?:\*\*)?(?:sources|references)(?:\*\*)?:?\s*", re.I)


def _old_strip(answer: str) -> str:
    text = _OLD_TRAILING.sub("", _OLD_OWN.sub("", answer.rstrip())).rstrip()
    while True:
        lines = text.split("\n")
        if len(lines) < 2 or not _HEADING.fullmatch(lines[-1]):
            return text
        text = _OLD_TRAILING.sub("", _OLD_OWN.sub("", "\n".join(lines[:-1]).rstrip())).rstrip()


_LINES = st.sampled_from(
    [
        "Answer text.",
        "",
        " ",
        "\t",
        "Sources:",
        "sources",
        "**References**:",
        "References:",
        "**Sources**",
        "[1] x",
        "  [2] y",
        "[3]",
        '[12] Product: "Tent"',
        "- item",
        "more [1].",
        "Sources: [1] x",
        "[a] not a note",
        "\r",
        "[١] arabic digit",
    ]
)
SMALL_ANSWERS = st.lists(_LINES | st.text(max_size=12), max_size=8).map("\n".join)
ANSWERS = st.one_of(
    SMALL_ANSWERS,
    st.text(),
    st.builds(  # a long block of footnote lines and a closing line: exponential before
        lambda head, n, tail: head + "[1] x\n" * n + tail,
        st.sampled_from(["", "Answer.\n\nSources:\n", "Answer.\n**References**\n"]),
        st.integers(0, 3000),
        st.sampled_from(["", "closing line", "[2] y", "\n\n"]),
    ),
)
SOURCES = st.lists(
    st.builds(
        Source,
        type=st.sampled_from(["product", "interaction", "pattern", "org_context"]),
        id=st.text(min_size=1, max_size=12),
        title=st.text(max_size=30),  # a title may hold a line break
        detail=st.text(max_size=10),
    ),
    max_size=6,
)


@settings(deadline=FAST, max_examples=300, suppress_health_check=LONG_TEXT_OK)
@given(answer=ANSWERS, sources=SOURCES)
@example(answer="Answer.\n\nSources:", sources=[Source(type="product", id="p1", title="Tent")])
@example(answer="A.", sources=[Source(type="product", id="p1", title="Two\nlines")])
def test_with_footnotes_is_idempotent_and_never_repeats_them(answer, sources):
    out = with_footnotes(answer, sources)
    assert with_footnotes(out, sources) == out
    text = with_footnotes(answer, ())
    assert with_footnotes(out, ()) == text
    if sources:
        notes = "\n".join(s.footnote(n) for n, s in enumerate(sources, start=1))
        assert out == f"{text}\n\n{notes}" and len(notes.split("\n")) == len(sources)
        # the model copied the footnotes, under a heading or not: they still appear once
        for copied in (f"{answer}\n\nSources:\n{notes}", f"{answer}\n{notes}"):
            assert with_footnotes(copied, sources) == out


@settings(deadline=FAST, max_examples=300)
@given(answer=SMALL_ANSWERS)
def test_with_footnotes_strips_what_the_former_patterns_stripped(answer):
    assert with_footnotes(answer, ()) == _old_strip(answer)


@settings(deadline=FAST, max_examples=200, suppress_health_check=LONG_TEXT_OK)
@given(answer=ANSWERS, returned=SOURCES)
def test_selected_sources_are_returned_ones_without_duplicates(answer, returned):
    chosen = select_sources(answer, returned)
    keys = [(s.type, s.id) for s in chosen]
    assert len(keys) == len(set(keys)) and set(chosen) <= set(returned)
    assert chosen or not returned
    if not any(s.id.lower() in answer.lower() for s in returned):
        assert len(chosen) <= MAX_UNCITED


# -- a failing tool's error reaches the model as JSON ------------------------------------------

ODD_ERROR = 'bad\tvalue "quoted" \\ back\nslash \x00 \u2028 end'


@dataclass
class _Boom:
    name: str = "boom"

    async def invoke(self, arguments: dict[str, Any], ctx: Any) -> ToolOutput:
        raise ValueError(ODD_ERROR)


def test_a_tool_error_with_tabs_and_quotes_is_valid_json():
    call = ToolCall(id="c1", name='boom\t"x"', arguments={})
    step, content, _ = asyncio.run(run_tool(_Boom(), call, None, 1.0))  # type: ignore[arg-type]
    error = json.loads(content)["error"]
    assert ODD_ERROR in error and step["ok"] is False
    _, content, _ = asyncio.run(run_tool(None, call, None, 1.0))  # type: ignore[arg-type]
    assert "no tool named" in json.loads(content)["error"]


def test_the_agent_loop_reads_a_tool_error_with_a_tab():
    async def boom(args: Any, ctx: Any) -> ToolOutput:
        raise RuntimeError(ODD_ERROR)

    class NoArgs(BaseModel):
        pass

    tool = Tool(name="boom", description="Fails.", args=NoArgs, fn=boom)
    model = ScriptedChatModel(
        [
            AssistantTurn(
                tool_calls=(ToolCall(id="c1", name="boom", arguments={}),),
                finish_reason="tool_calls",
            ),
            AssistantTurn(text="It failed."),
        ]
    )
    ctx = ToolContext(ORG_A, None, None, None)  # type: ignore[arg-type]
    answer = asyncio.run(
        Agent(model, tools=[tool]).run([Message.system("s"), Message.user("q")], ctx)
    )
    sent = [m.content for m in model.calls[1].messages if m.role == "tool"]
    assert ODD_ERROR in json.loads(sent[0])["error"] and answer.content == "It failed."


# -- odd inputs at the routes: 4xx, never 500 -------------------------------------------------

SUMMARY = f"/api/v1/interactions/organization/{ORG_A}/summary"


class _Analytics:
    """The summary route's analytics: data up to 2026-11-28, no interactions."""

    async def data_time_range(self, org_id: str) -> tuple[datetime | None, datetime | None]:
        return None, datetime(2026, 11, 28, 12, tzinfo=UTC)

    async def interaction_summary(self, org_id: str, **kwargs: Any) -> dict[str, Any]:
        return {"total": 0, "by_channel": {}}


@pytest.mark.parametrize(
    "params",
    [
        {"since": "last 9999999 years"},
        {"since": "last 99999999999999999999 days"},
        {"since": "9999-12-31"},
        {"until": "9999-12-31"},
        {"since": "0001-01-01", "until": "last 9999999 weeks"},
    ],
)
def test_an_out_of_range_time_is_422(client, params):
    state = client.app.state
    state.services = dataclasses.replace(state.services, analytics=_Analytics())
    assert client.get(SUMMARY, headers=client.as_org(ORG_A)).status_code == 200
    r = client.get(SUMMARY, params=params, headers=client.as_org(ORG_A))
    assert_error(r, 422, "invalid_request")


def test_an_org_id_with_a_trailing_newline_is_refused(client, tmp_path):
    assert is_valid_org_id(ORG_A) and not is_valid_org_id(ORG_A + "\n")
    assert not is_valid_org_id("\n" + ORG_A) and not is_valid_org_id(ORG_A + "\r\n")
    with pytest.raises(ValueError, match="invalid organization id"):
        DataLake(tmp_path).register_org(ORG_A + "\n", "Acme")
    r = client.get(
        f"/api/v1/interactions/organization/{ORG_A}%0A/summary", headers=client.as_org(ORG_A)
    )
    assert 400 <= r.status_code < 500, r.text


@settings(deadline=FAST, max_examples=200)
@given(org=st.text(max_size=70))
@example(org=ORG_A + "\n")
def test_org_ids_are_whole_matches(org):
    ok = is_valid_org_id(org)
    assert ok == bool(re.fullmatch(r"[a-z0-9][a-z0-9-]{1,62}", org))
    assert not ok or "\n" not in org
