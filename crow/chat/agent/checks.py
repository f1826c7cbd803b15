"""Checks of a written answer against the tool results it rests on.

Each check must stay silent on a good answer in any style (headings, bold labels, bullet
lists, percentages, rounded numbers); it speaks only when the answer is tool data instead
of prose, states a count that no summary returned, or puts forward a name no tool returned.
A problem goes back to the model as one short correction (crow.chat.agent.loop).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from difflib import SequenceMatcher
from typing import Any

from crow.chat.agent.channel_cues import (
    asks_every_channel,
    channels_named,
    names_no_channel,
)
from crow.chat.agent.compose import ECHO_STOPS
from crow.chat.agent.cues import is_follow_up
from crow.chat.agent.guidance import echoes_hint
from crow.chat.agent.sources import Source, with_footnotes
from crow.chat.agent.unnamed import names_no_pattern
from models.messages import Message

Outputs = list[tuple[str, dict[str, Any]]]

# A figure: digits with thousands separators, an optional decimal part and unit. Years,
# percentages, decimals, times and figures under 10 are not counts.
_FIGURE = re.compile(r"(?<![\w.,])(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?\s*(%|k\b|thousand\b)?", re.I)
_YEAR = re.compile(r"^(19|20)\d\d$")
_MONTH = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?"
# Dates and times are not counts: 2026-11-29, November 29, 29th of Nov, 10:30.
_DATE = re.compile(
    rf"\b\d{{4}}-\d{{1,2}}-\d{{1,2}}\b|\b{_MONTH}\s+\d{{1,2}}(?:st|nd|rd|th)?\b"
    rf"|\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH}|\b\d{{1,2}}:\d\d\b",
    re.I,
)
_NUMBER = re.compile(r"\d[\d,.]*")
# A span of time is not a count: "the quietest channel over the last 30 days was social".
_SPAN = re.compile(
    r"\b\d+[ -]?(?:days?|d|weeks?|wks?|months?|mos?|hours?|hrs?|h|minutes?|mins?|years?|yrs?"
    r"|quarters?|fortnights?)\b",
    re.I,
)
_BOLD = re.compile(r"\*\*([^*\n]{3,80})\*\*(\s*:)?")
_WORD = re.compile(r"[a-z][a-z0-9]{2,}")
_TITLE_WORD = re.compile(r"[A-Z0-9][\w'-]*")
# Words no answer ends with: one that does was cut off ("The", "Our total is").
_UNFINISHED = frozenset({"the", "a", "an", "our", "your", "their", "its", "this", "these", "of",
                         "to", "and", "or", "but", "is", "are", "was", "were", "with", "for",
                         "in", "on", "at", "by", "from"})  # fmt: skip


def answer_problem(text: str, outputs: Outputs, question: str = "") -> str | None:
    """What is wrong with the answer, in a sentence for the model; None when nothing is."""
    if looks_unusable(text):
        return "Your answer repeated tool data instead of answering."
    if named := sorted({name for name, _ in outputs if name in text}):
        return (
            f"Your answer talks about the tool {named[0]} instead of answering with what it "
            "returned."
        )
    if echoes_hint(text):
        return "Your answer repeats the suggestion line, a note for you, instead of answering."
    summaries = [c for name, c in outputs if name == "get_interaction_summary" and "error" not in c]
    if summaries and (wrong := wrong_counts(text, summaries)):
        figures = ", ".join(f"{n:,}" for n in sorted(_allowed(summaries)))
        return (
            f"Your answer states {', '.join(f'{n:,}' for n in wrong)}, which is not a figure "
            f"the summary tool returned ({figures})."
        )
    if summaries and (misplaced := wrong_channel(text, summaries, question)):
        return misplaced
    if names := invented_names(text, outputs, question):
        return f"Your answer names {', '.join(repr(n) for n in names)}, which no tool returned."
    return None


REPEATED = 0.9
"""How alike (difflib ratio, footnotes aside, case and spacing aside) an answer and an
earlier one are when the answer repeats it."""


def earlier_answers(messages: Sequence[Message]) -> list[str]:
    """The chat's answers before its latest question; none when that question was asked
    before (the same answer is then right)."""
    asked = [i for i, m in enumerate(messages) if m.role == "user"]
    if not asked:
        return []
    before, question = messages[: asked[-1]], _plain(messages[asked[-1]].content)
    if any(m.role == "user" and _plain(m.content) == question for m in before):
        return []
    return [m.content for m in before if m.role == "assistant" and m.content.strip()]


def repeated(text: str, earlier: Sequence[str], question: str, outputs: Outputs) -> str | None:
    """The answer restates an earlier answer of the chat, the same figures in nearly the same
    words: asked "how much is it?" after "what's our most popular bakery product?", a 1.5B
    wrote its popularity answer again, though the price was in the results it had just read.
    Only a correction: a repeat after it is kept (it hides nothing), never composed. "And
    social?" after a web count reads alike but states other figures: not a repeat."""
    mine = _plain(text)
    for answer in map(_plain, earlier):
        if (
            mine
            and _NUMBER.findall(mine) == _NUMBER.findall(answer)
            and SequenceMatcher(None, mine, answer).ratio() >= REPEATED
        ):
            return (
                "Your answer repeats your earlier answer instead of answering the new "
                f"question ({question!r}).{_first_result(outputs)}"
            )
    return None


def _first_result(outputs: Outputs) -> str:
    """The lead of the latest written tool result ("1. Basecamp Daypack 3: price 49.00 ..."),
    for a correction to point at: asked "how much is it?", a 1.5B repeated its popularity
    answer though the price led the result it had read, also when told it repeated itself."""
    lines = [c["in_words"] for _, c in outputs if isinstance(c.get("in_words"), str)]
    if not lines:
        return ""
    lead = lines[-1].split("; ")[0]
    return f" The tool result for it begins: {lead[:300]!r}."


def _plain(text: str) -> str:
    return " ".join(with_footnotes(text, ()).casefold().split())


def for_correction(messages: Sequence[Message], problem: str, hint: str = "") -> list[Message]:
    """The conversation the model answers again from: the questions, the calls and their
    results, then the correction; not the answer it corrects, nor the chat's earlier answers
    (shown either, a 1.5B wrote it again: a one-channel count for two channels, 3 times of
    3; its popularity answer to "how much is it?", told it repeated itself and given the
    price), nor the hint line after the question (it was for the calls, made by now;
    corrected, a 1.5B wrote "Suggested (may be wrong; ...): call get_interaction_summary."
    as its answer, 3 times in 80 spent questions)."""
    asked = max((i for i, m in enumerate(messages) if m.role == "user"), default=0)
    kept = [
        m
        for i, m in enumerate(messages)
        if not (i < asked and m.role == "assistant" and not m.tool_calls)
        and not (hint and m.role == "system" and m.content == hint)
    ]
    return [*kept, Message.user(correction(problem))]


def correction(problem: str) -> str:
    """What the model reads after the tool results in place of the answer it wrote."""
    return (
        f"A draft answer was not kept. {problem} Answer the question again from the tool "
        "results above only, stating figures and names exactly as the tools gave them."
    )


def looks_unusable(text: str) -> bool:
    """Empty, or structured data / a tool call instead of prose, or cut off in its first
    words (blind29: a 1.5B wrote "The" and then a tool result, where generation stops; a
    short reply such as "Yes" or "Done." is not cut off)."""
    stripped = text.strip().strip("`").removeprefix("json").strip()
    if not stripped or any(stop in text for stop in ECHO_STOPS):
        return True
    words = stripped.casefold().split()
    if len(words) <= 3 and words[-1] in _UNFINISHED:
        return True
    if stripped[0] in "{[":
        try:
            json.loads(stripped)
            return True
        except json.JSONDecodeError:
            return stripped.count('":') >= 2
    return False


def wrong_counts(text: str, summaries: list[dict[str, Any]]) -> list[int]:
    """The counts the answer states when none of them is a figure a summary returned (a
    rounded figure within 2% of one, like "about 12,300" or "12.3k", counts as stated)."""
    allowed = _allowed(summaries)
    stated = _counts_stated(text)
    if not stated or any(_close(v, allowed) for v in stated):
        return []
    return [int(v) for v in stated]


def wrong_channel(text: str, summaries: list[dict[str, Any]], question: str = "") -> str | None:
    """An answer that names one channel and states one count, the count of another channel
    in the same results: asked "and on the web?" after a camera count, a 1.5B gave the
    cameras' 3,342 (the summary's comparison line) as the web's figure. When the figure is
    the channel asked about (named in the question or counted by the call), the name is what
    is wrong: asked "what about social" after a camera count, a 1.5B wrote the social figure
    as the cameras', and told the cameras' figure, answered with it. An answer naming two
    channels or stating two counts is left alone (which figure belongs to which channel is not
    read), and so is a figure that is also the named channel's or a total."""
    named, stated = channels_named(text), _counts_stated(text)
    if len(named) != 1 or len(stated) != 1:
        return None
    channel, value = named[0], stated[0]
    own: set[int] = set()
    other: dict[int, str] = {}
    totals: set[int] = set()  # every channel together
    for summary in summaries:
        every = summary.get("every_channel_same_period") or {}
        totals.add(sum(every.values()))
        if not summary.get("channel"):
            totals.add(int(summary.get("total_interactions") or 0))
        for counts in (summary.get("by_channel") or {}, every):
            for ch, n in counts.items():
                if ch == channel:
                    own.add(int(n))
                else:
                    other.setdefault(int(n), ch)
    theirs = other.get(int(value)) if value == int(value) else None
    if theirs is None or not own or _close(value, own | totals):
        return None
    asked = {*channels_named(question), *(s["channel"] for s in summaries if s.get("channel"))}
    if theirs in asked and channel not in asked:
        return (
            f"Your answer calls {int(value):,} the {channel} figure, but {int(value):,} is the "
            f"{theirs} figure, the channel the question asks about."
        )
    return (
        f"Your answer gives {int(value):,} for {channel}, but that is the {theirs} figure; "
        f"the summary tool's {channel} figure is {', '.join(f'{n:,}' for n in sorted(own))}."
    )


LEAST_COUNT = 10
"""A smaller figure in an answer is not read as a count ("2 channels", "top 3")."""


def _counts_stated(text: str) -> list[float]:
    stated = []
    for whole, decimals, unit in _FIGURE.findall(_SPAN.sub(" ", _DATE.sub(" ", text))):
        unit = unit.lower()
        if unit == "%" or (decimals and not unit) or _YEAR.match(whole):
            continue
        value = float(whole.replace(",", "") + (decimals or ""))
        value *= 1000 if unit in ("k", "thousand") else 1
        if value >= LEAST_COUNT:
            stated.append(value)
    return stated


def short_of_question(
    text: str,
    outputs: Outputs,
    messages: Sequence[Message],
    question: str,
    returned: Sequence[Source] = (),
) -> str | None:
    """What an answer that is not wrong leaves of the question (it repeats an earlier answer,
    gives one side of a comparison, or one channel's count for all of them, or names none of
    the patterns it rests on): worth one correction; only one side of a comparison given
    again is composed (crow.chat.agent.loop)."""
    return (
        repeated(text, earlier_answers(messages), question, outputs)
        or half_compared(text, outputs, question)
        or one_channel_for_all(text, outputs, messages, question)
        or names_no_pattern(text, outputs, returned)
    )


def one_channel_for_all(
    text: str, outputs: Outputs, messages: Sequence[Message], question: str
) -> str | None:
    """The question names no channel ("How many interactions did we have on November 30th?"),
    the model counted one anyway, and the answer states that channel's figure, not the total:
    a 1.5B counted the web and answered "94" for a day of 174. A follow-up keeps the channel
    of the question before ("and last week?" after a web count) and is left alone, and so is
    a question with a word that may stand for a channel ("store visitors")."""
    if not names_no_channel(question):
        return None
    asked = [m.content for m in messages if m.role == "user"]
    if len(asked) >= 2 and is_follow_up(question) and not names_no_channel(asked[-2]):
        return None
    stated = _counts_stated(text)
    for name, content in outputs:
        channel, every = content.get("channel"), content.get("every_channel_same_period")
        if name != "get_interaction_summary" or "error" in content or not (channel and every):
            continue
        total, own = sum(every.values()), content["total_interactions"]
        gives_own = any(_close(v, {own}) for v in stated)
        if total != own and gives_own and not any(_close(v, {total}) for v in stated):
            return (
                f"The question names no channel: all channels together had {total:,} "
                f"interactions in that period; your answer gives the {channel} channel's "
                f"{own:,} only."
            )
    return None


def half_compared(text: str, outputs: Outputs, question: str) -> str | None:
    """The question sets channels side by side ("compare web and cctv, I need both counts"),
    or asks for every channel ("break down interactions by channel, with the count for
    each"), and the answer states the summary's figure for some of them only: given every
    channel's count, a 1.5B stated the one it had called for, or the busiest and the
    quietest of three. An answer that states no channel's figure (a total and shares), or
    every one, is left alone. A correction first; given one side again, the answer is
    composed from the results (crow.chat.agent.loop): it answers half the question. A
    channel's figure from any of the summaries called counts as given (one per channel and
    day, say), and a channel whose figure is too small to read as a count is not asked for."""
    named = channels_named(question)
    every = asks_every_channel(question)
    if len(named) < 2 and not every:
        return None
    figures: dict[str, list[int]] = {}  # each asked channel's figures, over every summary
    for name, content in outputs:
        if name != "get_interaction_summary" or "error" in content:
            continue
        counts = content.get("every_channel_same_period") or content.get("by_channel") or {}
        for ch in named if len(named) >= 2 else counts:
            if int(counts.get(ch, 0)) >= LEAST_COUNT:
                figures.setdefault(ch, []).append(int(counts[ch]))
    stated = _counts_stated(text)
    given = [ch for ch, ns in figures.items() if any(_close(v, set(ns)) for v in stated)]
    if len(figures) < 2 or not given or len(given) == len(figures):
        return None
    listed = " and ".join(f"{ch} ({ns[0]:,})" for ch, ns in figures.items())
    return (
        f"The question asks about {listed}; your answer gives the figure for "
        f"{', '.join(given)} only."
    )


def invented_names(text: str, outputs: Outputs, question: str = "") -> list[str]:
    """Bold names the answer puts forward (Title Case, not a label before a colon) whose words
    are mostly in neither the tools' results nor the question: a product, pattern or
    document made up."""
    found = [c for _, c in outputs if "error" not in c]
    if not found:
        return []
    data = json.dumps(found, ensure_ascii=False).lower().replace("_", " ")
    known = set(_WORD.findall(data)) | set(_WORD.findall(question.lower()))
    invented = []
    for name, colon in _BOLD.findall(text):
        name = name.strip()
        words = _WORD.findall(name.lower())
        if colon or name.endswith(":") or len(words) < 2 or not _is_title(name):
            continue  # a label ("**Busiest channel:**"), a single word, or a sentence
        if sum(w not in known for w in words) * 2 > len(words):
            invented.append(name)
    return invented


def _allowed(summaries: list[dict[str, Any]]) -> set[int]:
    out: set[int] = set()
    for summary in summaries:
        out.add(int(summary.get("total_interactions") or 0))
        for key in ("by_channel", "every_channel_same_period"):
            out.update(int(n) for n in (summary.get(key) or {}).values())
        out.add(sum((summary.get("every_channel_same_period") or {}).values()))  # "in all"
    return {n for n in out if n}


def _close(value: float, allowed: set[int]) -> bool:
    return any(abs(value - a) <= 0.02 * a for a in allowed)


def _is_title(name: str) -> bool:
    words = [w for w in re.findall(r"[\w'-]+", name) if len(w) >= 3]
    return bool(words) and all(_TITLE_WORD.fullmatch(w) for w in words)
