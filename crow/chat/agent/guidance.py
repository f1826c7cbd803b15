"""Help a small model reads (``agent.guidance: hints``); it never decides anything for it.

Two aids: worked examples of questions and the tool calls that answer them, appended to the
system prompt (fixed text, so a prompt cache keeps covering it), and a one-line routing hint
from the intent router (crow.chat.agent.intent) after the question. The model still chooses
every call and may ignore both. The examples are written for this module; none comes from an
evaluation file.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

import numpy as np

from crow.chat.agent.context import ToolContext
from crow.chat.agent.cues import (
    asks_again,
    counts_a_channel,
    is_follow_up,
    is_small_talk,
    ranks_products,
    split_clauses,
    substitute,
)
from crow.chat.agent.intent import IntentRouter, Route
from crow.chat.agent.nearest import nearer_tools, nearest_scores
from crow.chat.agent.passages import knowledge_base_match
from crow.chat.agent.product_words import stems
from models.messages import Message, ToolSpec

log = logging.getLogger(__name__)

EXAMPLES = """\
Examples of questions and the tool calls that answer them; X stands for whatever the \
question names (take it from the question, never from here), and arguments appear only \
when the question names them:
- "which channel has the most traffic?" -> get_interaction_summary {"channel": "all"}
- "is X bigger on the web or in store?" -> get_interaction_summary {"channel": "all"} (one \
call gives every channel to compare)
- "how many visits did the site get?" -> get_interaction_summary {"channel": "web"}
- "total interactions from Instagram and TikTok last week" -> get_interaction_summary \
{"channel": "social", "since": "last week"}
- "store camera traffic over the past 6 months?" -> get_interaction_summary \
{"channel": "cctv", "since": "past 6 months"} (a time is copied from the question, word for word)
- "our best-selling X" -> search_products {"query": "X", "sort": "popularity"}
- "which product do people talk about most on social?" -> search_products {"query": "", \
"sort": "popularity", "channel": "social"} (a channel is no kind of product)
- "what do people post about X?" -> search_interactions {"query": "X", "channel": "social"}
- "what did site visitors say about X?" -> search_interactions {"query": "X", "channel": "web"}
- "how much does X cost?" -> search_products {"query": "X"}; answer with its price
- "our cheapest X", "the most expensive X" -> search_products {"query": "X", "sort": \
"cheapest"} or {"query": "X", "sort": "priciest"}
- "any unusual X lately?" -> search_patterns {"query": "unusual X"}
- "the most recent X we detected?" -> search_patterns {"query": "X", "sort": "newest"}
- "what is our policy on X?" -> search_org_context {"query": "X policy"}
- "how long does X take?", "how much notice for X?" -> \
search_org_context {"query": "X"} (how the company works is in its knowledge base, not in \
the detected patterns)
- after "how many X interactions over T?", "and for social?" -> get_interaction_summary \
{"channel": "social", "since": "T"} (a follow-up asks something new: call the tool for it; \
an earlier answer's figure answers only the earlier question)
- after "how many X interactions over T?", "and over U?" -> get_interaction_summary \
{"channel": "X", "since": "U"} (what the follow-up names takes the place of what the earlier \
question named; the rest is kept)
- after a search for X, "which of those mention Y?" -> search_interactions {"query": "X Y"}
- after "what is our policy on X?", "and for Y?" -> search_org_context {"query": "X policy \
for Y"} (a follow-up's query keeps what the earlier question asked)
- after "our most popular X?", "and in Y?" -> search_products {"query": "Y", "sort": \
"popularity"} (Y takes X's place; the ranking is kept)
- "good morning!", "thank you!" -> no tool; reply briefly.
A question that asks two things gets a call for each, both in one reply, as a list; e.g. \
"how many store camera events this month, and what is our return policy?":
```json
[
  {"name": "get_interaction_summary", "arguments": {"channel": "cctv", "since": "this month"}},
  {"name": "search_org_context", "arguments": {"query": "return policy"}}
]
```
When a tool result answers the question, answer it: the figure or names it asks for, first, \
in a sentence. A question that asks for two things (a start and an end, a fee and a limit, \
how long and how much) is answered with both, each from the result."""


KB_MATCH = 0.66
"""A knowledge-base sentence at least this close to the question (cosine, all-MiniLM-L6-v2,
the CPU profile's embedder) makes the hint the knowledge base. On 209 questions of the
spent evaluation sets, 24 of 49 knowledge-base questions reach 0.65 (among them every one
the router sent to products or counts) and no other question does (the highest, 0.647:
"Which patterns relate to our best-selling tents?")."""
KB_PART_MATCH = 0.60
"""The same for one question of a request of two ("what's the top selling household product,
and remind me what the minimum order is for free delivery"): a clause is short, its nearest
sentence less close. On the 120 split requests of the spent sets, the clauses of questions
that ask the knowledge base reach up to 0.91, those of no other question 0.57 at most."""
KB_HINT = (
    "call search_org_context (the company's knowledge base has a passage that matches this "
    "question)."
)


NOT_OFFERED: dict[str, tuple[str, ...]] = {"search_patterns": ("type", "since")}
"""Arguments the small model is not offered. A pattern's type is part of the text its search
embeds, so "churn risk" in the query finds churn risks; as a filter, the 1.5B set a wrong
type on 3 of 5 pattern questions (`seasonal` for long checkout queues, `segment` for churn
risk) and read only patterns that could not answer. The time words of pattern questions
mostly tell what a pattern found ("an upward trend over the last four weeks", "late orders
in the last month"), not when it was detected, and the 1.5B wrote `since: last week` for "in
the run-up to holidays": read as a detection date, they left out the pattern that answers.
Every pattern's detection day is in the results."""


def offered(specs: Sequence[ToolSpec]) -> list[ToolSpec]:
    """The tools as the small model sees them: without the arguments of NOT_OFFERED."""
    out = []
    for spec in specs:
        if drop := NOT_OFFERED.get(spec.name):
            params = dict(spec.parameters)
            params["properties"] = {
                k: v for k, v in params.get("properties", {}).items() if k not in drop
            }
            if "required" in params:
                params["required"] = [r for r in params["required"] if r not in drop]
            spec = spec.model_copy(update={"parameters": params})
        out.append(spec)
    return out


def question_of(messages: Sequence[Message]) -> str:
    """The user's latest message."""
    return next((m.content for m in reversed(messages) if m.role == "user"), "")


def earlier_question(messages: Sequence[Message]) -> str | None:
    """The user's message before the latest, if any."""
    asked = [m.content for m in messages if m.role == "user"]
    return asked[-2] if len(asked) >= 2 else None


# Its label is no noun phrase: labelled "Routing hint", it was a 1.5B's query twice ("which
# navigation product ...", a follow-up naming no topic), refused, and then declined.
_HINT = "Suggested (may be wrong; follow the question): "


def echoes_hint(text: str) -> bool:
    """An answer that writes out the hint line (blind42: after a refused time word, a 1.5B
    answered "Suggested (may be wrong; follow the question): call search_interactions.")."""
    return "may be wrong; follow the question" in text.casefold()


def _calls(tools: Sequence[str]) -> str:
    """The hint's tools; two or more, as calls of one reply. Only a verb and the tools' names:
    a 1.5B wrote the words around them as its query when the question named no topic
    ("likely" from "likely tools: search_patterns", 4 times in the spent and blind sets)."""
    if len(tools) < 2:
        return f"call {', '.join(tools)}."
    return (
        f"call {' and '.join(tools)} (it asks {len(tools)} things: call each of them, in this "
        "reply)."
    )


SWAPPED_CHARS = 60


def _asked_again(question: str) -> str:
    """For a follow-up that asks the question before it again about something else, what it
    asks about, in the user's words. Told only that it was a follow-up, a 1.5B kept the
    earlier question's argument: last month's window for "and in May?" after last month's
    count, the earlier answer's product for "and in bakery?" after the top frozen product."""
    swapped = " ".join((substitute(question) or "").split()).replace('"', "'")
    if not swapped or len(swapped) > SWAPPED_CHARS or not swapped.isprintable():
        return ""  # the hint quotes a few of the user's words, never a paragraph of them
    return f'it asks that question again, about "{swapped}" in place of what it asked; '


@dataclass(frozen=True)
class Hint:
    """The line the model reads after the question, and the tools it names (none for small
    talk)."""

    text: str
    tools: tuple[str, ...] = ()


@dataclass(frozen=True)
class Guided:
    messages: list[Message]
    hinted: tuple[str, ...]  # the tools the hint names, none for a greeting: asked again for
    hint: str = ""  # the hint's line


def copies_the_hint(query: str, hint: str, asked: Sequence[str]) -> bool:
    """A search query made of the hint's own words and none of the user's: a 1.5B searched the
    patterns for "Routing hint" after "and which one has the lowest confidence?". Told so
    (crow.chat.agent.runner), it writes the query again. Plurals count as their singular:
    "likely patterns" after "the pattern we're most confident about" is the user's word.
    The tools' names are not the hint's words: "product" for "most popular prodcut in
    october" names no topic (the whole catalog ranked), and refused, a 1.5B declined."""
    words = _long_stems(query)
    said = set().union(*map(_long_stems, asked))
    prose = " ".join(w for w in hint.split() if "_" not in w)  # search_products, ...
    return bool(words) and words <= _long_stems(prose) and not words & said


def _long_stems(text: str) -> set[str]:
    return {w for w in stems(text) if len(w) >= 3}


class Guidance:
    def __init__(self, timeout_s: float, kb_match: float = KB_MATCH) -> None:
        self.router = IntentRouter()
        self.timeout_s = timeout_s
        self.kb_match = kb_match

    async def apply(self, messages: list[Message], ctx: ToolContext) -> Guided:
        """The conversation with the examples in its system prompt and the hint after it."""
        out = list(messages)
        if out and out[0].role == "system":
            out[0] = out[0].model_copy(update={"content": f"{out[0].content}\n{EXAMPLES}"})
        question = question_of(out)
        hint = await self.hint(question, ctx, earlier=earlier_question(out))
        if hint is None:
            return Guided(out, ())
        out.append(Message.system(hint.text))
        # what the loop asks again for: never a greeting, whatever the router read
        return Guided(out, () if is_small_talk(question) else hint.tools, hint.text)

    async def hint(
        self, question: str, ctx: ToolContext, *, earlier: str | None = None
    ) -> Hint | None:
        """The intent router's reading of the question as a line the model reads, or None.
        A follow-up ("And on the web?") is routed with the question it follows: alone, the
        router would route words that have lost their topic. The hint does not quote that
        question: a 1.5B then copied its filters ("cctv") into the follow-up's call."""
        if not question.strip():
            return None
        if earlier and is_follow_up(question):
            both = f"{earlier} {question}"
            # "what about kayaks?" after a return-policy question asks that question again:
            # routed with both, its new topic pulled the hint to products (and "and on
            # social?" after a count, to a search); "what does it cost?" asks about the
            # subject of the question before
            route = await self._route(earlier if asks_again(question) else both, ctx)
            if route is None or route.abstained or route.small_talk:
                return None
            tools = await self._nearer_in_data(route.tools, both, ctx)
            return Hint(
                f"{_HINT}a follow-up to the previous question; {_asked_again(question)}call "
                f"a tool for it, earlier figures answer only earlier questions; "
                f"{_calls(tools)}",
                tools,
            )
        route = await self._route(question, ctx)
        if (
            (route is None or not route.small_talk)
            and not ranks_products(question)
            and not counts_a_channel(question)
            and await self._in_knowledge_base(question, ctx, self.kb_match)
        ):
            return Hint(f"{_HINT}{KB_HINT}", ("search_org_context",))
        if route is None or route.abstained:
            return None
        if route.small_talk:
            return Hint(f"{_HINT}this reads as small talk; reply briefly without calling a tool.")
        tools = await self._nearer_in_data(route.tools, question, ctx)
        if "search_org_context" not in tools and await self._part_in_knowledge_base(question, ctx):
            tools = (*tools, "search_org_context")
        return Hint(f"{_HINT}{_calls(tools)}", tools)

    async def _part_in_knowledge_base(self, question: str, ctx: ToolContext) -> bool:
        """A request of two questions one of which the knowledge base answers ("what's our
        most popular bakery item, and how much notice do custom cakes need?"): the router
        reads the whole, where the ranking's cues win."""
        for part in split_clauses(question):
            if await self._in_knowledge_base(part, ctx, KB_PART_MATCH):
                return True
        return False

    async def _in_knowledge_base(self, question: str, ctx: ToolContext, least: float) -> bool:
        """Whether a sentence of the org's own knowledge base restates the question (cosine
        ≥ `least`: "How many local farms do we buy from?" / "We buy from over 180 local farms"): the
        router's examples know how questions are worded, the knowledge base what it holds."""
        try:
            async with asyncio.timeout(self.timeout_s):
                match = await knowledge_base_match(ctx, question)
        except Exception as exc:  # a hint only helps (an index still being built, say)
            log.warning("knowledge-base match failed (%s); no hint from it", exc)
            return False
        return match >= least

    async def _nearer_in_data(
        self, tools: tuple[str, ...], question: str, ctx: ToolContext
    ) -> tuple[str, ...]:
        """The router's tools, checked against the org's own data (crow.chat.agent.nearest)."""
        if not tools:
            return tools
        try:
            async with asyncio.timeout(self.timeout_s):
                scores = await nearest_scores(ctx, question)
        except Exception as exc:  # a hint only helps
            log.warning("nearest-data check failed (%s); the router's tools stand", exc)
            return tools
        return nearer_tools(tools, scores, question)

    async def _route(self, question: str, ctx: ToolContext) -> Route | None:
        try:
            async with asyncio.timeout(self.timeout_s):
                route = await self.router.route(question, partial(_embed, ctx))
        except Exception as exc:  # a hint only helps; the model chooses without it
            log.warning("intent router failed (%s); no hint", exc)
            return None
        return route


async def _embed(ctx: ToolContext, texts: list[str]) -> np.ndarray:
    """The router's texts: questions through the request's cache (a search of the question
    reuses the vector), the router's examples in one batch."""
    if len(texts) > 4:
        return await ctx.embedder.embed(texts)
    return np.stack(await asyncio.gather(*(ctx.embed(t) for t in texts)))
