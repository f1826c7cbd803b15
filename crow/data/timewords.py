"""Relative time words a model passes ("last week", "recent", "past 3 days", "2026-11-01").

They resolve against an anchor, the latest time in the organization's data, so "last week"
means the last week the data covers, whatever today's date is.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

_UNITS = {"hour": 1 / 24, "day": 1, "week": 7, "fortnight": 14, "month": 30, "quarter": 91,
          "year": 365, "wk": 7, "mo": 30, "yr": 365}  # fmt: skip
# The spaces after "last" and after the number are one run each: `\s+(?P<n>...)?\s*` let both
# share a long run, quadratic in its length. A number in words needs its space ("two weeks").
_SPAN = re.compile(
    r"^(?:(?:over|in|during|within|for|since|from) )?(?:(?:the|this|these) )?"
    r"(?:(?:last|past|previous|recent)\s+)?(?:(?P<n>\d+)\s*|(?P<w>(?:a )?[a-z]+(?: of)?)\s+)?"
    r"(?P<unit>hour|day|week|fortnight|month|quarter|year|wk|mo|yr)s?(?: ago)?$"
)
_NUMBER_WORDS = ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
                 "ten", "eleven", "twelve")  # fmt: skip
_WORDS_N: dict[str, int] = {w: n for n, w in enumerate(_NUMBER_WORDS, start=1)} | {
    "a": 1, "an": 1, "few": 3, "couple of": 2, "a couple of": 2, "fourteen": 14,
    "fifteen": 15, "twenty": 20, "thirty": 30, "sixty": 60, "ninety": 90,
}  # fmt: skip
_RECENT = {"recent", "recently", "lately", "latest", "new", "newest", "this week"}
_ALL = {"", "all", "all time", "ever", "any", "anytime", "none", "null"}


class TimeWordError(ValueError):
    pass


def _cut(expr: str | None) -> str | None:
    """`expr` for an error message, cut short: a tool's argument can be any length."""
    return expr if expr is None or len(expr) <= 60 else expr[:57] + "..."


def _start_of_day(t: datetime) -> datetime:
    return t.replace(hour=0, minute=0, second=0, microsecond=0)


def resolve(expr: str | None, anchor: datetime) -> tuple[datetime | None, datetime | None]:
    """The (start, end) that `expr` names; (None, None) for no restriction.

    Raises TimeWordError, and nothing else, for any text it cannot resolve: also for one
    past the calendar ("last 9999999 years", "9999-12-31" whose day ends after year 9999).
    """
    anchor = anchor if anchor.tzinfo else anchor.replace(tzinfo=UTC)
    try:
        return _resolve(expr, anchor)
    except TimeWordError:
        raise
    except (OverflowError, ValueError):  # datetime arithmetic past year 1 or 9999, huge ints
        raise TimeWordError(
            f"the time {_cut(expr)!r} is out of range: name a time between the years 1 and 9999"
        ) from None


def _resolve(expr: str | None, anchor: datetime) -> tuple[datetime | None, datetime | None]:
    text = (expr or "").strip().lower().rstrip(".")
    if text in _ALL:
        return None, None
    try:
        parsed = datetime.fromisoformat(text.upper().replace("Z", "+00:00"))
    except ValueError:
        parsed = None
    if parsed is not None:
        parsed = parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
        # A bare date names the whole day.
        return parsed, (parsed + timedelta(days=1) if len(text) == 10 else None)
    end = anchor + timedelta(microseconds=1)
    if text in _RECENT:
        return anchor - timedelta(days=7), end
    if text == "today":
        return _start_of_day(anchor), end
    if text == "yesterday":
        today = _start_of_day(anchor)
        return today - timedelta(days=1), today
    if re.fullmatch(r"(?:in )?\d{4}", text):  # a year names all of it: "2025", "in 2025"
        year = int(text[-4:])
        return datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC)
    if text in {"this year", "year to date", "ytd"}:
        return datetime(anchor.year, 1, 1, tzinfo=UTC), end
    if text in {"this month", "month to date"}:
        return anchor.replace(day=1, hour=0, minute=0, second=0, microsecond=0), end
    m = _SPAN.match(" ".join(text.split()))
    if m and (m["n"] or (m["w"] or "one") in _WORDS_N):
        n = int(m["n"]) if m["n"] else _WORDS_N[m["w"] or "one"]
        return anchor - timedelta(days=n * _UNITS[m["unit"]]), end
    raise TimeWordError(
        f"could not understand the time {_cut(expr)!r}: use an ISO date such as 2026-11-01, "
        "or words such as 'last week', 'past 30 days', 'yesterday', 'recent'"
    )


def resolve_range(
    since: str | None, until: str | None, anchor: datetime
) -> tuple[datetime | None, datetime | None]:
    """`since` gives the start of its span, `until` the end of its own (an instant: itself)."""
    start, _ = resolve(since, anchor)
    until_start, until_end = resolve(until, anchor)
    end = until_end or until_start
    if start and end and end <= start:
        raise TimeWordError(f"'until' ({_cut(until)}) must come after 'since' ({_cut(since)})")
    return start, end
