"""Answers with nothing behind them: what an answer given with no tool run (or after calls
that all failed) claims that only a tool's result could say (crow.chat.agent.loop asks such
an answer again, once, a call required)."""

from __future__ import annotations

import re
from collections.abc import Collection

from crow.chat.agent.guidance import echoes_hint
from crow.chat.agent.step import AgentRun

_INTERACTIONS = re.compile(r"\binteractions?\b", re.I)
# A lookup announced or handed to the user instead of made: "I'll search the knowledge base
# for ...", "you can search the company's knowledge base for that".
_ANNOUNCED = re.compile(
    r"\b(?:(?:I'?ll|I will|let me|I need to|I'm going to|I am going to) (?:search|look up|check|"
    r"call|use|query|find|look (?:at|into|for))|you (?:can|could|may|should) (?:search|look up|"
    r"query) (?:the|our|in)\b|(?:you|we) (?:should|need to|would need to|must|have to|may want "
    r"to|can|could) (?:consider|consult|refer to|check|look at|look in|review) (?:the|our|your) "
    r"(?:company'?s |organi[sz]ation'?s )?(?:knowledge base|records|documents|policies))",
    re.I,
)
# A call written out as text: `get_org_context {"query": ...}` (a made-up or real tool name).
_CALL_AS_TEXT = re.compile(r"(?m)^\W{0,3}[a-z]+_[a-z_]*[a-z][ \t]*[({]")
# "Nothing there" said without a lookup: "No product named X found", "not provided in the data",
# "No information provided.", "No tools found."
_ABSENCE = re.compile(
    r"\b(?:not found|(?:could|can)(?:n[o']?t| not) find|unable to find|no (?:products?|items?|"
    r"documents?|patterns?|records?|data|information|results?|tools?) (?:named|called|matching|"
    r"found|available|about|on|provided|given)|not (?:provided|available|listed|included) in)\b",
    re.I,
)
# A fact as an answer states one: a figure with a unit or currency ("$10", "7-10 business
# days", "20%", "-18 °C", "9 pm"), a store's number ("store 1"), or a number of two or more
# digits ("14 stores"). A lone digit ("I can answer 3 kinds of questions") and a list's
# numbering are not.
_FACT_FIGURE = re.compile(
    r"[$€£]\s?\d[\d,.]*|\b(?:store|location|branch|aisle) ?#?\d+\b|\d\s*(?:%|percent\b|°|degrees?\b|(?:business |working )?(?:days?|hours?|"
    r"weeks?|months?|years?|minutes?)\b|usd\b|dollars?\b|eur\b|[ap]\.?m\b\.?)"
    r"|(?<![\w.,])\d[\d,.]*\d(?![\w])",
    re.I,
)
# A part of the question the answer leaves open: "The minimum order for free delivery is not
# specified in the given data." (a 1.5B that called the product search for "what's the top
# selling household product, and what is the minimum order for free delivery").
_LEFT_OPEN = re.compile(
    r"\b(?:is|are|was|were) not (?:specified|mentioned|stated|provided|given|included)\b", re.I
)
_LIST_NUMBER = re.compile(r"(?m)^[ \t]*\d{1,2}[.)][ \t]")


def needs_a_call(text: str, run: AgentRun, tools: Collection[str]) -> str | None:
    """Why an answer needs a tool call first, or None. After calls that found data, a part
    it says the results leave open (an answer that writes out the hint line is corrected
    instead, crow.chat.agent.checks); without data, one that writes out a hint line that
    named tools; after calls that all failed, any answer if one was refused for copying the
    hint (the model can write it again), else a fact it states; with no call, a claim of data
    with nothing behind it, or (guidance) the routing hint named tools for the question."""
    if run.found:
        said = left_open(text)
        return f"says a part {said!r} without a call for it" if said else None
    if run.hinted and echoes_hint(text):
        return "writes out the hint line instead of answering"
    if run.outputs:
        if run.refused:  # refused, a 1.5B declined: "I apologize, but I can't assist with that."
            return "answers after its query was refused, without writing it again"
        stated = stated_fact(text) or _none_claimed(text)
        return f"states {stated!r} after every call failed" if stated else None
    if problem := unsourced_answer(text, tools):
        return problem
    if run.hinted:
        return f"answers without the tools the hint named ({', '.join(run.hinted)})"
    return None


def unsourced_answer(text: str, tools: Collection[str]) -> str | None:
    """Why an answer given with no tool run for the question needs one, or None: it states a
    fact (a figure with a unit, a price, a number: a small model answers a knowledge-base
    question from nothing, or copies an earlier answer's count into a follow-up about
    another channel), says the data has nothing ("No product named X found"), announces or
    hands over a lookup it did not make ("you should consider the company's knowledge
    base"), or writes out or talks about a tool instead of
    calling it. Small talk states none of these."""
    if named := sorted(name for name in tools if name in text):
        return f"describes {named[0]} instead of calling it"
    if written := _CALL_AS_TEXT.search(text):
        return f"writes the call {written.group(0).strip()!r} as text instead of making it"
    if stated := stated_fact(text):
        return f"states {stated!r} with no tool behind it"
    plain = _LIST_NUMBER.sub(" ", text.replace("*", ""))
    if announced := _ANNOUNCED.search(plain):
        return f"says {announced.group(0)!r} but called nothing"
    if absent := _ABSENCE.search(plain):
        return f"says {absent.group(0)!r} without having looked"
    return None


# "does not have any interactions since ...": blind30, after a refused time word, an absence
# stated as a finding. Only after failed calls: small talk may say "I don't have any ...".
_NONE_CLAIMED = re.compile(
    r"(?:\bno|\bzero|(?:\bnot|n't) (?:\w+ )?any)\s+(?:\w+\s+)?(?:interactions?|products?|patterns?|"
    r"documents?|records?|data|results?|posts?|visits?)\b",
    re.I,
)


def _none_claimed(text: str) -> str | None:
    found = _NONE_CLAIMED.search(text)
    return found.group(0) if found else None


def left_open(text: str) -> str | None:
    """What an answer says the results did not give ("is not specified"), or None."""
    found = _LEFT_OPEN.search(text.replace("*", ""))
    return found.group(0) if found else None


def stated_fact(text: str) -> str | None:
    """The first fact an answer states ("$10", "7 business days", "549" of interactions), or
    None: what an answer may only state from a tool's result."""
    plain = _LIST_NUMBER.sub(" ", text.replace("*", ""))
    if figure := _FACT_FIGURE.search(plain):
        return figure.group(0)
    if _INTERACTIONS.search(plain) and (number := re.search(r"\d[\d,.]*", plain)):
        return number.group(0)
    return None
