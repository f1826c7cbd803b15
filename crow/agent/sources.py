"""Typed source references and their numbered footnotes.

[1] Product: "Trail Runner 2"
[2] Interaction #int-0000042 (web)
[3] Pattern: "Weekend CCTV dwell spike" (trend)
[4] Org context: "Target market" (market)
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict

SourceType = Literal["product", "interaction", "pattern", "org_context"]
MAX_UNCITED = 5  # sources listed when the answer names none of them


class Source(BaseModel):
    model_config = ConfigDict(frozen=True)

    type: SourceType
    id: str
    title: str
    detail: str = ""  # channel, pattern type or context type

    def footnote(self, number: int) -> str:
        if self.type == "product":
            return f'[{number}] Product: "{self.title}"'
        if self.type == "interaction":
            return f"[{number}] Interaction #{self.id} ({self.detail})"
        if self.type == "pattern":
            return f'[{number}] Pattern: "{self.title}" ({self.detail})'
        return f'[{number}] Org context: "{self.title}" ({self.detail})'


def _mentioned(source: Source, text: str) -> bool:
    lowered = text.lower()
    return source.id.lower() in lowered or (
        len(source.title) > 3 and source.type != "interaction" and source.title.lower() in lowered
    )


def select_sources(answer: str, returned: Sequence[Source]) -> list[Source]:
    """The sources to footnote: those the answer names, else the first few the tools returned.

    Only sources a tool returned in this answer are ever listed; duplicates are dropped.
    """
    unique = list({(s.type, s.id): s for s in returned}.values())
    cited = [s for s in unique if _mentioned(s, answer)]
    return cited or unique[:MAX_UNCITED]


_OWN_FOOTNOTES = re.compile(
    r"\n+(?:\*\*)?(?:sources|references)(?:\*\*)?:?\s*\n(?:\s*\[\d+\].*\n?)+\s*$", re.I
)
_TRAILING_REFS = re.compile(r"(?:\n\s*\[\d+\][^\n]*)+\s*$")


def with_footnotes(answer: str, sources: Sequence[Source]) -> str:
    """The answer with its numbered footnotes appended (any the model wrote are replaced)."""
    text = _TRAILING_REFS.sub("", _OWN_FOOTNOTES.sub("", answer.rstrip())).rstrip()
    if not sources:
        return text
    notes = "\n".join(s.footnote(n) for n, s in enumerate(sources, start=1))
    return f"{text}\n\n{notes}"
