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
        """One line, whatever the title holds (a line break would split the footnote)."""
        return _one_line(self._footnote(number))

    def _footnote(self, number: int) -> str:
        if self.type == "product":
            return f'[{number}] Product: "{self.title}"'
        if self.type == "interaction":
            return f"[{number}] Interaction #{self.id} ({self.detail})"
        if self.type == "pattern":
            return f'[{number}] Pattern: "{self.title}" ({self.detail})'
        return f'[{number}] Org context: "{self.title}" ({self.detail})'


def _one_line(text: str) -> str:
    return " ".join(text.split())


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


# A footnote line the model wrote: "[3] ...", maybe indented; and the heading it puts above
# them ("Sources:", "**References**"). Both are matched one line at a time, anchored at the
# line's start, so their cost is linear in the text (a pattern over the whole block was
# exponential in its number of lines).
_REF_LINE = re.compile(r"\[\d+\]")
_REF_HEADING = re.compile(r"(?:\*\*)?(?:sources|references)(?:\*\*)?:?\s*", re.I)


def _strip_own_footnotes(answer: str) -> str:
    """`answer` without the footnotes the model wrote at its end: the trailing lines that are
    "[n] ..." references, blank, or a "Sources:"/"References:" heading. The first line always
    stays (a reference block follows something)."""
    lines = answer.rstrip().split("\n")
    end = len(lines)
    while end > 1:
        line = lines[end - 1]
        if line.strip() and not _REF_LINE.match(line.lstrip()) and not _REF_HEADING.fullmatch(line):
            break
        end -= 1
    return "\n".join(lines[:end]).rstrip()


def with_footnotes(answer: str, sources: Sequence[Source]) -> str:
    """The answer with its numbered footnotes appended (any the model wrote are replaced).

    Idempotent: the footnotes appended are exactly what is stripped again.
    """
    text = _strip_own_footnotes(answer)
    if not sources:
        return text
    notes = "\n".join(s.footnote(n) for n, s in enumerate(sources, start=1))
    return f"{text}\n\n{notes}"
