"""A small semantic router: which tools a request needs, from labeled examples and cue words.

The request is embedded with the app's own embedder and compared with the examples of
``intent_examples`` (embedded once per router): the intent with the largest
similarity-weighted vote of the nearest examples wins. A request made of two questions
("how many X, and what Y?") is routed clause by clause. Two cue words then refine what
embeddings blur: a count question about interactions is a count, not a search (the spec's
"COUNT questions: get_interaction_summary first"), and a question naming detected patterns
or trends asks for patterns, also when it is about products. When the nearest example is
not similar enough the router abstains and the model chooses as usual.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import numpy as np

from crow.chat.agent.cues import is_count_question
from crow.chat.agent.intent_examples import EXAMPLES, INTENT_TOOLS

Embed = Callable[[list[str]], Awaitable[np.ndarray]]

_CLAUSES = re.compile(
    r"(?:[,;]\s*(?:and\s+|but\s+|also\s+|plus\s+)?|(?<!\s)\s+(?:and|but|also|plus)\s+|\?\s+)"
    r"(?=(?:what|which|how|who|where|when|why|show|list|find|give|tell|are|is|do|does|did|can)\b)",
    re.I,
)
_PATTERN_CUE = re.compile(
    r"\b(patterns?|trends?|anomal(y|ies)|segments?|behaviou?ral|churn(ing)?|affinit(y|ies))\b", re.I
)
_POPULAR = re.compile(r"\b(most popular|best[- ]?sell\w*|top[- ]sell\w*|top sellers?)\b", re.I)
_LOOKUP = re.compile(r"^\W*(find|show|list|pull up|look up|search|give me (some|a few))\b", re.I)
ORDER = ("chat", *INTENT_TOOLS)


@dataclass(frozen=True)
class Route:
    intents: tuple[str, ...]  # in call order; ("chat",) for small talk; () when abstaining
    confidence: float  # similarity of the nearest example, 0..1

    @property
    def abstained(self) -> bool:
        return not self.intents

    @property
    def tools(self) -> tuple[str, ...]:
        return tuple(INTENT_TOOLS[i] for i in self.intents if i in INTENT_TOOLS)

    @property
    def small_talk(self) -> bool:
        return self.intents == ("chat",)


@dataclass(frozen=True)
class RouterConfig:
    k: int = 7
    min_similarity: float = 0.35  # nearest example below this: the router abstains


class IntentRouter:
    """Routes a request to intents; the examples' vectors are computed on first use."""

    def __init__(
        self, examples: Sequence[tuple[str, str]] = EXAMPLES, config: RouterConfig | None = None
    ) -> None:
        self.texts = [text for text, _ in examples]
        self.labels = [label for _, label in examples]
        self.config = config or RouterConfig()
        self._vectors: np.ndarray | None = None
        self._lock = asyncio.Lock()

    async def route(self, question: str, embed: Embed) -> Route:
        clauses = split_clauses(question)
        examples = await self._examples(embed)
        queries = _normalize(np.asarray(await embed([question, *clauses])))
        votes = [self._nearest(examples, q) for q in queries]
        clause_votes = votes[1:]  # each clause is a question of its own, if all are clear
        votes = clause_votes if clause_votes and all(v[0] for v in clause_votes) else votes[:1]
        if not votes[0][0]:
            return Route((), votes[0][1])
        intents = {label for label, _ in votes}
        confidence = min(similarity for _, similarity in votes)
        return Route(refine(question, intents, clauses), confidence)

    async def _examples(self, embed: Embed) -> np.ndarray:
        async with self._lock:
            if self._vectors is None:
                self._vectors = _normalize(np.asarray(await embed(self.texts)))
        return self._vectors

    def _nearest(self, examples: np.ndarray, query: np.ndarray) -> tuple[str, float]:
        """The intent with the largest similarity-weighted vote ("" when too far from all)."""
        sims = examples @ query
        nearest = np.argsort(-sims)[: self.config.k]
        top = float(sims[nearest[0]])
        if top < self.config.min_similarity:
            return "", top
        votes: dict[str, float] = {}
        for idx in nearest:
            votes[self.labels[idx]] = votes.get(self.labels[idx], 0.0) + max(float(sims[idx]), 0)
        return max(votes, key=votes.__getitem__), top


def refine(question: str, intents: set[str], clauses: Sequence[str]) -> tuple[str, ...]:
    """Cue words over what the examples voted: counts count, lookups look up, patterns are searched."""
    intents = set(intents)
    if len(intents) > 1:
        intents.discard("chat")  # data wins over small talk
    counted = [c for c in clauses or [question] if is_count_question(c)]
    if counted and "org" not in intents:
        if not clauses:  # one question, asking for a number: the summary answers it
            intents.discard("interactions")
        intents.add("count")
        intents.discard("chat")
    elif intents == {"count"} and _LOOKUP.match(question):
        intents = {"interactions"}  # "find ... events" asks for the events, not their number
    if _PATTERN_CUE.search(question) and "org" not in intents:
        intents -= {"interactions", "count", "chat"}  # patterns *in* a channel are patterns
        intents.add("patterns")
        if _POPULAR.search(question):
            intents.add("products")  # popularity is what the product search ranks by
    return tuple(sorted(intents, key=ORDER.index))


def split_clauses(question: str) -> list[str]:
    """The questions inside a request ("how many X, and what Y?" -> two), if more than one."""
    parts = [p.strip(" ,;?!.") for p in _CLAUSES.split(question)]
    parts = [p for p in parts if len(p.split()) >= 3]
    return parts if len(parts) >= 2 else []


def _normalize(matrix: np.ndarray) -> np.ndarray:
    matrix = matrix.astype(np.float32)
    if matrix.ndim == 1:
        matrix = matrix[None, :]
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    normalized: np.ndarray = matrix / np.clip(norms, 1e-12, None)
    return normalized
