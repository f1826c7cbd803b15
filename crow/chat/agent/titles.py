"""Whether a text states a title (a pattern's, a product's) as written: its words in order,
one after another, whatever the markdown, quotes, hyphens or entities around them."""

from __future__ import annotations

import html
import re
import unicodedata

_TOKEN = re.compile(r"[a-z0-9]+")


def states_title(text: str, title: str) -> bool:
    """The title's words, in order and one after another, are words of the text: markdown
    ("**Out-of-stock spike** in Health & Beauty"), other hyphens (U+2011), "&" for "and" or
    "&amp;", quotes and line breaks aside; a word put in between ("at the shipping step" for
    "at shipping step") is not the title."""
    said, wanted = _title_words(text), _title_words(title)
    n = len(wanted)
    return n > 0 and any(said[i : i + n] == wanted for i in range(len(said) - n + 1))


def _title_words(text: str) -> list[str]:
    plain = unicodedata.normalize("NFKC", html.unescape(text)).casefold().replace("&", " and ")
    return _TOKEN.findall(plain)
