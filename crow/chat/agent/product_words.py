"""What a product search's query names: no topic ("top products": the whole catalog), one
catalog category ("most popular tents": every product of it), or a topic no product found
shares a word with ("gift card": nearest by meaning only). Read by the product tool."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

# ranking words, not a topic: "most popular product at the moment, by customer engagement"
# was searched as "most engaged" and ranked the products nearest those words
_NO_TOPIC = frozenset(
    [
        "a",
        "all",
        "any",
        "are",
        "at",
        "best",
        "best-selling",
        "bestselling",
        "by",
        "catalog",
        "catalogue",
        "cheap",
        "cheaper",
        "cheapest",
        "current",
        "currently",
        "customer",
        "customers",
        "demand",
        "do",
        "engaged",
        "engagement",
        "expensive",
        "favorite",
        "favorites",
        "favourite",
        "favourites",
        "goods",
        "highest",
        "hottest",
        "in",
        "interaction",
        "interactions",
        "interest",
        "is",
        "item",
        "items",
        "list",
        "lowest",
        "moment",
        "most",
        "now",
        "of",
        "our",
        "overall",
        "popular",
        "popularity",
        "price",
        "priced",
        "prices",
        "pricey",
        "priciest",
        "product",
        "products",
        "rank",
        "ranked",
        "right",
        "sell",
        "seller",
        "sellers",
        "selling",
        "sells",
        "shopper",
        "shoppers",
        "sold",
        "the",
        "these",
        "this",
        "today",
        "top",
        "trending",
        "viewed",
        "views",
        "we",
        "what",
        "which",
    ]
)


def names_no_topic(query: str) -> bool:
    """A product query made only of words like "top", "best selling", "our products": it asks
    for the whole catalog's ranking, not for products about something."""
    words = re.findall(r"[a-z][a-z-]*", query.lower())
    return all(w in _NO_TOPIC for w in words)


_CATEGORY_FILLER = frozenset(["and", "category", "equipment", "food", "foods", "gear", "range"])


def stems(text: str) -> set[str]:
    """The words of `text`, lowercase, a plural's "s" dropped (words longer than three)."""
    words = re.findall(r"[a-z]+", text.lower())
    return {w[:-1] if len(w) > 3 and w.endswith("s") else w for w in words}


_NO_TOPIC_STEMS = stems(" ".join(_NO_TOPIC)) | _CATEGORY_FILLER


def category_named(query: str, categories: list[str]) -> str | None:
    """The one catalog category a product query names and nothing more ("tents", "dairy
    products", "our best-selling backpack"), or None ("rain jackets", "frozen pizza")."""
    wanted = stems(query) - _NO_TOPIC_STEMS
    if not wanted:
        return None
    named = [c for c in categories if wanted <= stems(c) - _CATEGORY_FILLER]
    if not named:  # misspelled ("the top selling bakry item"): one letter off, in longer words
        named = [
            c for c in categories if all(any(_one_edit(w, v) for v in stems(c)) for w in wanted)
        ]
    return named[0] if len(named) == 1 else None


def category_asked(question: str, categories: list[str]) -> str | None:
    """The one catalog category whose every word the user's question has ("which produce item
    do customers interact with the most?": Produce), or None. Read only when the model's
    query names no topic: for "the top produce item" a 1.5B searched with an empty query and
    answered with the whole catalog's first product."""
    words = stems(question)
    named = [c for c in categories if (own := stems(c) - _CATEGORY_FILLER) and own <= words]
    return named[0] if len(named) == 1 else None


def _one_edit(a: str, b: str) -> bool:
    """`a` is `b` with at most one letter added, dropped or changed, both of 5 letters or
    more ("bakry" / "bakery")."""
    if a == b:
        return True
    if min(len(a), len(b)) < 5 or abs(len(a) - len(b)) > 1:
        return False
    if len(a) > len(b):
        a, b = b, a
    i = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), len(a))
    return a[i + (len(a) == len(b)) :] == b[i + 1 :]


def topic_words(query: str) -> tuple[str, ...]:
    """The words of a product query's topic, beyond ranking words ("most popular milks":
    milk), in a fixed order; a product named with each of them is of the topic."""
    return tuple(sorted(w for w in stems(query) - _NO_TOPIC_STEMS if len(w) >= 3))


def shares_no_word(query: str, texts: list[str]) -> bool:
    """A product query with a topic none of `texts` (the found products' titles and
    categories) has a word of: "gift card" found chocolate bars, nearest by meaning only."""
    wanted = stems(query) - _NO_TOPIC_STEMS
    return bool(wanted) and not any(wanted & stems(text) for text in texts)


MEANT_SHARE = 0.6
MEANT_SCORE = 0.35


def category_meant(query: str, nearest: list[dict[str, Any]]) -> str | None:
    """The category a topic means that no product's title or category words ("fruit or veg":
    Produce, "fish": Meat & Seafood): the one most of the products nearest by meaning are in,
    when the nearest is near enough. "gift card" (chocolate bars, 0.23) and "pet food" (four
    categories) mean none; their nearest products stay nearest by meaning, with a note."""
    if not nearest or not shares_no_word(query, [f"{h['title']} {h['category']}" for h in nearest]):
        return None
    if float(nearest[0]["score"]) < MEANT_SCORE:
        return None
    [(category, n)] = Counter(str(h["category"]) for h in nearest).most_common(1)
    return category if n >= MEANT_SHARE * len(nearest) else None
