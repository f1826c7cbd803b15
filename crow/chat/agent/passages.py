"""The knowledge base's sentences: the one that answers a question, and how closely the
org's knowledge base restates a question (read by the knowledge-base tool and the guidance)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from itertools import pairwise

import numpy as np

from crow.chat.agent.context import ToolContext

MATCH_CHARS = 800  # of each document, what the guidance's match reads (KB_MATCH was calibrated so)
# Not at a semicolon: its clauses belong together ("Open 7:00-22:00 daily; Downtown Market
# open 24 hours."): split there, a 1.5B asked whether a store is open around the clock read
# only "Open 7:00-22:00 daily;".
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9])")
_CLAUSE_END = re.compile(r"(?<=;)\s+")


async def closest(ctx: ToolContext, text: str, candidates: list[str]) -> tuple[int, float]:
    """Which of `candidates` is closest to `text`, and its cosine similarity (one embedding
    batch; `text`'s vector comes from the request's cache)."""
    vectors = await ctx.embedder.embed(candidates)
    scores = vectors @ await ctx.embed(text)
    best = int(scores.argmax())
    return best, float(scores[best])


async def closest_sentence(ctx: ToolContext, text: str, bodies: list[str]) -> tuple[str, float]:
    """The sentence of `bodies` closest to `text`, and its cosine similarity."""
    sentences = sentences_of(bodies)
    best, score = await closest(ctx, text, sentences)
    return sentences[best], score


NEAR_TIE = 0.05
"""A second sentence this close (cosine) to the best is given too: asked "what do we charge
for overnight shipping?", MiniLM put "Standard shipping is free ..." (0.575) just before
"Expedited (2 days) costs 14.95 USD and overnight 29.95 USD." (0.527), and a 1.5B answered
with the free shipping."""


async def closest_sentences(
    ctx: ToolContext, texts: Sequence[str | tuple[str, ...]], bodies: list[str]
) -> list[str]:
    """For each of `texts`, the sentence of `bodies` closest to it, each sentence once (one
    embedding batch of the sentences); for texts in a tuple, the closest to all of them (the
    mean cosine: a follow-up and the question it follows). The user's question, not only a
    small model's topic query ("return policy" for "how long do I have to return a kayak?"):
    it otherwise often states the wrong fact of the right document ("3-6 days" for freight).
    And each part of a question in two ("can we refund the difference, and is there a time
    limit?"): the one sentence closest to the whole answered its first part, and the 1.5B
    said there was no time limit. A near tie gives both sentences (NEAR_TIE). A sentence is
    as close as its closest clause (its parts between semicolons) and is given whole: MiniLM
    put the loyalty program's "5% back" before "Typical turnaround is 10 business days;
    members get 20% off repairs." for a member's repair discount; its second clause alone is
    closer (on the spent sets' 119 knowledge-base questions, the first sentence given
    states the fact for 96 instead of 94; titles or word overlap added to it did no better)."""
    sentences = sentences_of(bodies)
    clauses = [(i, c) for i, s in enumerate(sentences) for c in _clauses_of(s)]
    vectors = await ctx.embedder.embed(sentences + [c for _, c in clauses])
    owner = np.array([i for i, _ in clauses], dtype=np.int64)
    found: list[str] = []
    for text in texts:
        parts = (text,) if isinstance(text, str) else text
        cosines = sum([vectors @ await ctx.embed(t) for t in parts]) / len(parts)
        scores = cosines[: len(sentences)].copy()
        np.maximum.at(scores, owner, cosines[len(sentences) :])  # a clause speaks for its sentence
        ranked = scores.argsort()[::-1][:2]
        for i in ranked:
            if scores[i] >= scores[ranked[0]] - NEAR_TIE and sentences[i] not in found:
                found.append(sentences[i])
    return found


def with_next_sentences(found: list[str], bodies: list[str]) -> list[str]:
    """Each of `found` followed by the sentence after it in its document (unless given
    already): the closest sentence is often the one that names the topic, the next one its
    figure ("Our Denver and Seattle repair shops fix zippers, ..." / "Typical turnaround is
    10 business days; ..."). On the spent sets' 46 knowledge-base questions, the text given
    states the fact for 44 instead of 41, and a 1.5B answered 38 right instead of 36 (3
    gained, 1 lost to a figure of the next sentence)."""
    following: dict[str, str] = {}
    for body in bodies:
        sentences = [s for s in _SENTENCE_END.split(body) if s.strip()]
        for sentence, after in pairwise(sentences):
            following.setdefault(sentence, after)
    out: list[str] = []
    for sentence in found:
        for part in (sentence, following.get(sentence)):
            if part and part not in out and (part == sentence or part not in found):
                out.append(part)
    return out


def _clauses_of(sentence: str) -> list[str]:
    """The clauses of a sentence joined by semicolons (none for a sentence of one)."""
    parts = [p.strip() for p in _CLAUSE_END.split(sentence) if p.strip()]
    return parts if len(parts) >= 2 else []


def sentences_of(bodies: list[str]) -> list[str]:
    """The sentences of `bodies`, in order."""
    return [s for body in bodies for s in _SENTENCE_END.split(body) if s.strip()]


async def knowledge_base_match(ctx: ToolContext, text: str, k: int = 3) -> float:
    """How closely a sentence of the org's knowledge base restates `text` (cosine, 0 when
    it has no documents): read by the guidance, never by a tool."""
    hits = await ctx.retriever.search(ctx.org_id, "org_context", await ctx.embed(text), k=k)
    bodies = [h["body"][:MATCH_CHARS] for h in hits]
    return (await closest_sentence(ctx, text, bodies))[1] if bodies else 0.0
