"""Catching a small model's degenerate loops: the same lines written over and over.

With greedy decoding a 0.5B model sometimes falls into a cycle ("- 420 employees / - 180
million USD / - 55% online / - 420 employees / ...") until max_tokens: tens of seconds of
generation on a CPU for an answer that only gets worse. A loop is declared when a line is
written for the third time; the text is cut where that line came the second time, so what
stays is everything up to the first full round of the cycle.
"""

from __future__ import annotations

MIN_LINE_CHARS = 4
"""Shorter lines (blank ones, "---", "|") repeat legitimately and are not counted."""


def loop_cut(text: str, times: int = 3) -> int | None:
    """Offset where `text` should end because it has started looping, or None.

    A line (stripped, at least MIN_LINE_CHARS long) seen for the `times`-th time marks a
    loop; the offset returned is the start of that line's second occurrence. Only complete
    lines (followed by a newline) count.
    """
    seen: dict[str, list[int]] = {}
    offset = 0
    for line in text.splitlines(keepends=True):
        start, offset = offset, offset + len(line)
        if not line.endswith("\n"):
            break
        key = line.strip()
        if len(key) < MIN_LINE_CHARS:
            continue
        starts = seen.setdefault(key, [])
        starts.append(start)
        if len(starts) >= times:
            return starts[1]
    return None
