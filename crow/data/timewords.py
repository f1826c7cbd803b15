"""Relative time words a model passes ("last week", "recent", "past 3 days", "2026-11-01").

They resolve against an anchor, the latest time in the organization's data, so "last week"
means the last week the data covers, whatever today's date is.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

_UNITS = {"hour": 1 / 24, "day": 1, "week": 7, "fortnight": 14, "month": 30, "quarter": 91,
          "year": 365, "wk": 7, "mo": 30, "yr": 365, "hr": 1 / 24, "h": 1 / 24,
          "d": 1}  # fmt: skip
# The spaces after "last" and after the number are one run each: `\s+(?P<n>...)?\s*` let both
# share a long run, quadratic in its length. A number in words needs its space ("two weeks").
_SPAN = re.compile(
    r"^(?:(?:over|in|during|within|for|since|from) )?(?:(?:the|this|these) )?"
    r"(?:(?:last|past|previous|recent)\s+)?(?:(?P<n>\d+)\s*|(?P<w>(?:a )?[a-z]+(?: of)?)\s+)?"
    r"(?P<unit>hour|day|week|fortnight|month|quarter|year|wk|mo|yr|hr|(?<=\d)[hd])s?"
    r"(?: ago)?$"
)
_NUMBER_WORDS = ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
                 "ten", "eleven", "twelve")  # fmt: skip
_WORDS_N: dict[str, int] = {w: n for n, w in enumerate(_NUMBER_WORDS, start=1)} | {
    "a": 1, "an": 1, "few": 3, "couple of": 2, "a couple of": 2, "fourteen": 14,
    "fifteen": 15, "twenty": 20, "thirty": 30, "sixty": 60, "ninety": 90,
}  # fmt: skip
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_MONTH = (
    r"(?P<{}>jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
    r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
)
_DAY = r"(?P<{}>\d{{1,2}})(?:st|nd|rd|th)?"
# A calendar day or month in words: "November 30th", "nov 30, 2026", "30th of November",
# "November", "november 2026" (a day or month without a year: its latest before the anchor).
# "(since) the start of November" starts there and runs on: a 1.5B wrote it as it was asked.
# "over October": the hint of a follow-up ("and over October?") quotes the user's words.
_CALENDAR = re.compile(
    r"^(?:(?P<open>since|from|after) |(?:on|in|during|for|of|over) )?(?:the )?"
    r"(?P<start>(?:start|beginning) of )?(?:"
    + f"{_MONTH.format('m1')} {_DAY.format('d1')}|{_DAY.format('d2')} (?:of )?{_MONTH.format('m2')}"
    + f"|{_MONTH.format('m3')})"
    + r"(?:,? (?P<year>\d{4}))?$"
)
# The month before the anchor's, as a whole: "how many last month?" asks for November, not
# the last 30 days (blind28 and blind29: three questions, two writers). With "the" or "past"
# it is a span up to now: "over the last month", "the past month" (_SPAN: 30 days).
_PREVIOUS_MONTH = re.compile(
    r"^(?:(?P<open>since|from|after) |(?:in|during|for|of) )?"
    r"(?:last|previous|prior) (?:calendar )?month$"
)
# This month or year up to the latest data: "this month", "since the start of the month",
# "from the beginning of this year".
_THIS = re.compile(
    r"^(?:(?:since|from|in|during|for) )?(?:(?:the )?(?:start|beginning) of (?:the |this )"
    r"|this )(?P<unit>month|year)$"
)
_TO_DATE = {"year to date": "year", "ytd": "year", "month to date": "month"}
# A whole day before the anchor's: "yesterday", "the day before yesterday".
_DAYS_BACK = {"yesterday": 1, "day before yesterday": 2, "the day before yesterday": 2}
_RECENT = {"recent", "recently", "lately", "latest", "new", "newest", "this week"}
_ALL = {"", "all", "all time", "ever", "any", "anytime", "none", "null"}
# The end of the data, an instant: a 1.5B counting "web interactions past 7 days?" wrote
# since "7 days ago", until "now", and relayed the error it got for "now" as its answer.
_NOW = {"now", "right now", "present", "the present", "to date", "so far", "until now",
        "till now", "up to now", "up to date"}  # fmt: skip


# "so far" around a span repeats what the span says ("so far this month", "this year to
# date"); alone it names the present (_NOW).
_SO_FAR = re.compile(r"^so far,? (?=\S)|(?<=\S),? (?:so far|to date)$")


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
    normal = _normal(expr)
    text = _SO_FAR.sub("", normal)  # "month to date" is looked up whole, in _TO_DATE
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
    end = _end(anchor)
    if text in _NOW:
        return end, end
    if text in _RECENT:
        return anchor - timedelta(days=7), end
    if text == "today":
        return _start_of_day(anchor), end
    if back := _DAYS_BACK.get(text):
        midnight = _start_of_day(anchor) - timedelta(days=back)
        return midnight, midnight + timedelta(days=1)
    if re.fullmatch(r"(?:in )?\d{4}", text):  # a year names all of it: "2025", "in 2025"
        year = int(text[-4:])
        return datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC)
    this = _TO_DATE.get(normal) or ((named := _THIS.match(text)) and named["unit"])
    if this == "year":
        return datetime(anchor.year, 1, 1, tzinfo=UTC), end
    if this == "month":
        return anchor.replace(day=1, hour=0, minute=0, second=0, microsecond=0), end
    if day := _calendar(text, anchor):
        return day
    if _PREVIOUS_MONTH.match(text):
        this_month = anchor.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
        return (this_month - timedelta(days=1)).replace(day=1), this_month
    span = _SPAN.match(text)
    if span and (span["n"] or (span["w"] or "one") in _WORDS_N):
        n = int(span["n"]) if span["n"] else _WORDS_N[span["w"] or "one"]
        return anchor - timedelta(days=n * _UNITS[span["unit"]]), end
    raise TimeWordError(
        f"could not understand the time {_cut(expr)!r}: use an ISO date such as 2026-11-01, "
        "or words such as 'last week', 'past 30 days', 'yesterday', 'November 30th', 'recent' "
        "(the week before last: since '2 weeks ago', until '1 week ago')"
    )


def resolve_range(
    since: str | None, until: str | None, anchor: datetime
) -> tuple[datetime | None, datetime | None]:
    """`since` gives the start of its span, `until` the end of its own (an instant: itself).
    With no `until` (or one that bounds nothing: "all time"), a calendar day or month in
    words, "last month" or "yesterday", is the whole of it: "November 30th" is that day
    ("since November 30th" runs to the latest data). Asked "during October", a 1.5B wrote
    since "october", until "all time"; asked "yesterday", since "yesterday" alone (counted
    up to the latest data, it also counted today).

    A `since` that names the present ("now", "so far") starts nothing: asked "most popular
    product right now?", a 1.5B wrote since and until "right now", a window with no time in
    it. As of now is all the data, and so is an `until` of now with nothing before it."""
    if _present(since):
        since = None
    if not since and _present(until):
        until = None
    start, since_end = resolve(since, anchor)
    until_start, until_end = resolve(until, anchor)
    end = until_end or until_start
    if until_start and until_end and until_start < until_end == _end(anchor):
        # a span up to the latest data ends where it starts: until "1 week ago" is that
        # instant (with since "2 weeks ago", the week before last), not the latest data
        end = until_start if _normal(until) != "today" else until_end
    if end is None and since_end and _names_one_span(since):
        end = since_end
    if start and end and end <= start:
        raise TimeWordError(f"'until' ({_cut(until)}) must come after 'since' ({_cut(since)})")
    return start, end


def _end(anchor: datetime) -> datetime:
    """The end of the data: just after its latest time."""
    return (anchor if anchor.tzinfo else anchor.replace(tzinfo=UTC)) + timedelta(microseconds=1)


def _normal(expr: str | None) -> str:
    """`expr` lower-cased, its spaces single, without a final full stop."""
    return " ".join((expr or "").strip().lower().rstrip(".").split())


def _present(expr: str | None) -> bool:
    return _normal(expr) in _NOW


def _names_one_span(expr: str | None) -> bool:
    text = _normal(expr)
    if (m := _CALENDAR.match(text)) is not None:
        return not (m["open"] or m["start"])
    m = _PREVIOUS_MONTH.match(text)
    return text in _DAYS_BACK or (m is not None and not m["open"])


def _calendar(text: str, anchor: datetime) -> tuple[datetime, datetime] | None:
    """The day or month a calendar phrase names ("November 30th" is a day, "november" a
    month); without a year, the latest one that starts at or before the anchor (asked about
    "November 30th" with data up to December 2, a small model wrote 2023-11-30)."""
    m = _CALENDAR.match(text)
    if m is None:
        return None
    month = _MONTHS.index((m["m1"] or m["m2"] or m["m3"])[:3]) + 1
    day = int(m["d1"] or m["d2"]) if (m["d1"] or m["d2"]) else None
    year = int(m["year"]) if m["year"] else anchor.year
    try:
        start = datetime(year, month, day or 1, tzinfo=UTC)
    except ValueError:
        raise TimeWordError(f"{_cut(text)!r} is not a day of the calendar") from None
    if not m["year"] and start > anchor:
        start = start.replace(year=year - 1)
    if day:
        return start, start + timedelta(days=1)
    after = datetime(start.year + month // 12, month % 12 + 1, 1, tzinfo=UTC)
    return start, after
