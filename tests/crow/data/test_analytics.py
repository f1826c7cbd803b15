from datetime import UTC, datetime, timedelta

import pytest

from crow.data.analytics import Analytics
from crow.data.ingest import validate_rows
from crow.data.timewords import TimeWordError, resolve, resolve_range
from tests.conftest import ORG_A, ORG_B

ANCHOR = datetime(2026, 11, 28, 22, 0, tzinfo=UTC)


@pytest.fixture
def analytics(lake):
    rows = [
        {
            "id": f"i{n}",
            "channel": ch,
            "occurred_at": f"2026-11-{day:02d}T12:00:00Z",
            "text": "x",
            "product_id": pid,
        }
        for n, (ch, day, pid) in enumerate(
            [
                ("web", 1, "p1"),
                ("web", 20, "p1"),
                ("cctv", 21, "p2"),
                ("social", 25, "p1"),
                ("cctv", 28, None),
            ]
        )
    ]
    lake.write(ORG_A, "interactions", [validate_rows("interactions", rows)], mode="replace")
    return Analytics(lake)


def test_summary_counts_per_channel_and_span(analytics):
    s = analytics.interaction_summary(ORG_A)
    assert s["total"] == 5 and s["by_channel"] == {"web": 2, "cctv": 2, "social": 1}
    assert (s["first_at"], s["last_at"]) == ("2026-11-01T12:00:00Z", "2026-11-28T12:00:00Z")


def test_summary_filters(analytics):
    since = datetime(2026, 11, 20, tzinfo=UTC)
    until = datetime(2026, 11, 25, tzinfo=UTC)
    assert analytics.interaction_summary(ORG_A, since=since, until=until)["total"] == 2
    cctv = analytics.interaction_summary(ORG_A, channel="cctv")
    assert cctv["total"] == 2 and cctv["by_channel"]["web"] == 0


def test_summary_of_an_org_without_data_is_zero(analytics):
    s = analytics.interaction_summary(ORG_B)
    assert s["total"] == 0 and s["first_at"] is None


def test_popularity(analytics):
    assert analytics.top_products(ORG_A, limit=1) == [("p1", 3)]
    counts = analytics.interaction_counts(ORG_A, ["p1", "p9"])
    assert counts["p1"] == {"total": 3, "web": 2, "cctv": 0, "social": 1}
    assert counts["p9"]["total"] == 0
    assert analytics.data_time_range(ORG_A)[1] == datetime(2026, 11, 28, 12, tzinfo=UTC)


def test_popularity_of_one_channel_and_period(analytics):
    """p1 leads overall (3) and on the web; p2 leads in-store cameras; after Nov 21 only p1's
    social one and p2's camera one count, tied and ranked by id."""
    assert analytics.top_products(ORG_A, channel="cctv") == [("p2", 1)]
    since = datetime(2026, 11, 21, tzinfo=UTC)
    assert analytics.top_products(ORG_A, since=since) == [("p1", 1), ("p2", 1)]
    until = datetime(2026, 11, 21, tzinfo=UTC)
    assert analytics.top_products(ORG_A, channel="web", until=until) == [("p1", 2)]
    counts = analytics.interaction_counts(ORG_A, ["p1", "p2"], channel="social")
    assert counts["p1"] == {"total": 1, "web": 0, "cctv": 0, "social": 1}
    assert counts["p2"]["total"] == 0


@pytest.mark.parametrize(
    ("expr", "days"),
    [
        ("last week", 7),
        ("past week", 7),
        ("recent", 7),
        ("last 30 days", 30),
        ("past 3 days", 3),
        ("over the last month", 30),
        ("in the last 24 hours", 1),
        ("Last Quarter", 91),
        ("past three weeks", 21),
        ("over the past two weeks", 14),
        ("this past week", 7),
        ("the past month", 30),
        ("the last ten days", 10),
        ("a couple of weeks", 14),
        ("past fortnight", 14),
        ("last 3 wks", 21),
        ("last 24h", 1),  # blind42: refused, the 1.5B then wrote its hint line as the answer
        ("past 48 hrs", 2),
        ("last 7d", 7),
    ],
)
def test_relative_words_resolve_against_the_anchor(expr, days):
    start, end = resolve(expr, ANCHOR)
    assert ANCHOR - start == timedelta(days=days)
    assert end > ANCHOR


@pytest.mark.parametrize("expr", ["past d", "this h", "last hs"])
def test_a_one_letter_unit_needs_its_number(expr):
    with pytest.raises(TimeWordError):
        resolve(expr, ANCHOR)


def test_last_month_alone_is_the_calendar_month_before_the_anchors_and_this_month_its_own():
    """Two set writers meant November by "last month"; "over the last month" stays 30 days."""
    october = (datetime(2026, 10, 1, tzinfo=UTC), datetime(2026, 11, 1, tzinfo=UTC))
    assert resolve_range("last month", None, ANCHOR) == october
    assert resolve_range("Previous month", "all time", ANCHOR) == october
    assert resolve_range("in last month", None, ANCHOR) == october
    assert resolve_range("since last month", None, ANCHOR) == (october[0], None)
    november = datetime(2026, 11, 1, tzinfo=UTC)
    for words in ("since the start of the month", "month to date", "beginning of this month"):
        assert resolve(words, ANCHOR)[0] == november, words
    # blind30: "since the start of November", written as "start of November", was refused
    for words in ("start of November", "since the beginning of november"):
        assert resolve_range(words, None, ANCHOR) == (november, None), words
    january = datetime(2027, 1, 15, 9, tzinfo=UTC)
    assert resolve("last month", january) == (
        datetime(2026, 12, 1, tzinfo=UTC),
        datetime(2027, 1, 1, tzinfo=UTC),
    )


def test_words_that_name_no_number_are_refused_and_this_year_is_the_calendar_year():
    with pytest.raises(TimeWordError):
        resolve("past bogus weeks", ANCHOR)
    assert resolve("this year", ANCHOR)[0] == datetime(ANCHOR.year, 1, 1, tzinfo=UTC)


def test_dates_and_ranges():
    assert resolve("yesterday", ANCHOR) == (
        datetime(2026, 11, 27, tzinfo=UTC),
        datetime(2026, 11, 28, tzinfo=UTC),
    )
    assert resolve_range("2026-11-01", "2026-11-10", ANCHOR) == (
        datetime(2026, 11, 1, tzinfo=UTC),
        datetime(2026, 11, 11, tzinfo=UTC),
    )
    assert (
        resolve("2025", ANCHOR)
        == resolve("in 2025", ANCHOR)
        == (
            datetime(2025, 1, 1, tzinfo=UTC),
            datetime(2026, 1, 1, tzinfo=UTC),
        )
    )
    assert resolve_range(None, None, ANCHOR) == (None, None)
    assert resolve_range("all time", "", ANCHOR) == (None, None)
    # "now" ends a span at the latest data
    week = (ANCHOR - timedelta(days=7), ANCHOR + timedelta(microseconds=1))
    assert (
        resolve_range("7 days ago", "now", ANCHOR)
        == resolve_range("last week", "Up to now", ANCHOR)
        == week
    )
    # "yesterday" alone is that day, not yesterday and today (blind25: three counts)
    day_before = (datetime(2026, 11, 27, tzinfo=UTC), datetime(2026, 11, 28, tzinfo=UTC))
    assert resolve_range("Yesterday", None, ANCHOR) == day_before
    assert resolve_range("yesterday", "all time", ANCHOR) == day_before
    assert resolve_range("yesterday", "now", ANCHOR)[1] == ANCHOR + timedelta(microseconds=1)
    # "and the day before that?" after yesterday's count: that day alone (blind36)
    two_back = (datetime(2026, 11, 26, tzinfo=UTC), datetime(2026, 11, 27, tzinfo=UTC))
    assert resolve_range("the day before yesterday", None, ANCHOR) == two_back
    assert resolve_range("Day before yesterday.", "all time", ANCHOR) == two_back
    # a `since` that names the present starts nothing: all the data up to the latest
    assert resolve_range("right now", "right now", ANCHOR) == (None, None)
    assert resolve_range("Now", None, ANCHOR) == resolve_range("so far", "now", ANCHOR)
    assert resolve_range(None, "to date", ANCHOR) == (None, None)
    with pytest.raises(TimeWordError, match="ISO date"):
        resolve("the other day-ish", ANCHOR)
    with pytest.raises(TimeWordError, match="after"):
        resolve_range("2026-11-10", "2026-11-01", ANCHOR)


def test_an_until_of_a_span_ends_where_the_span_starts_and_so_far_repeats_the_span():
    # blind27: "the week before that" is since 2 weeks ago, until 1 week ago, not two weeks
    week_before_last = (ANCHOR - timedelta(days=14), ANCHOR - timedelta(days=7))
    assert resolve_range("2 weeks ago", "1 week ago", ANCHOR) == week_before_last
    assert resolve_range("past 14 days", "past 7 days", ANCHOR) == week_before_last
    month_start = datetime(2026, 11, 1, tzinfo=UTC)
    assert resolve_range("2026-10-01", "this month", ANCHOR)[1] == month_start
    # "today" as the end keeps today
    assert resolve_range("last week", "today", ANCHOR)[1] == ANCHOR + timedelta(microseconds=1)
    # "so far this month" is this month; "so far" alone is still the present
    assert resolve("so far this month", ANCHOR) == resolve("This month so far.", ANCHOR)
    assert resolve("so far this month", ANCHOR)[0] == month_start
    assert resolve("this year to date", ANCHOR) == resolve("this year", ANCHOR)
    assert resolve("past 2 weeks so far", ANCHOR) == resolve("past  2 weeks", ANCHOR)
    assert resolve("so far in November", ANCHOR) == resolve("November", ANCHOR)
    assert resolve_range("so far", None, ANCHOR) == (None, None)
    with pytest.raises(TimeWordError, match="1 week ago"):
        resolve_range("2 weeks ago", "last week - 1 week", ANCHOR)


def test_calendar_words_name_a_day_or_month_the_latest_before_the_anchor_without_a_year():
    nov_27 = (datetime(2026, 11, 27, tzinfo=UTC), datetime(2026, 11, 28, tzinfo=UTC))
    assert resolve("November 27th", ANCHOR) == resolve("on the 27th of Nov", ANCHOR) == nov_27
    assert resolve("nov 27, 2026", ANCHOR) == nov_27
    # a day past the anchor's, with no year, is last year's; a month is the whole month
    assert resolve("December 25", ANCHOR)[0] == datetime(2025, 12, 25, tzinfo=UTC)
    assert resolve("over November", ANCHOR) == resolve("in november", ANCHOR)
    assert resolve("in november", ANCHOR) == (
        datetime(2026, 11, 1, tzinfo=UTC),
        datetime(2026, 12, 1, tzinfo=UTC),
    )
    assert resolve("december 2025", ANCHOR)[1] == datetime(2026, 1, 1, tzinfo=UTC)
    # one day as both ends of a range is that day
    assert resolve_range("Nov 27", "Nov 27", ANCHOR) == nov_27
    # alone, a calendar day is that day; "since" it, up to the latest data
    assert resolve_range("November 27th", None, ANCHOR) == nov_27
    assert resolve_range("since November 27th", None, ANCHOR) == (nov_27[0], None)
    # an `until` that bounds nothing leaves the day or month whole
    assert resolve_range("November 27th", "all time", ANCHOR) == nov_27
    assert resolve_range("since November 27th", "all time", ANCHOR) == (nov_27[0], None)
    with pytest.raises(TimeWordError, match="not a day"):
        resolve("feb 30", ANCHOR)
    with pytest.raises(TimeWordError):
        resolve("mayday", ANCHOR)


def test_the_series_counts_each_day_with_gaps_as_zero_and_weeks_for_long_spans(analytics, lake):
    s = analytics.interaction_summary(ORG_A)
    points = dict(s["series"]["points"])
    assert s["series"]["unit"] == "day" and len(points) == 28  # Nov 1 to Nov 28
    assert points["2026-11-01"] == 1 and points["2026-11-02"] == 0 and points["2026-11-28"] == 1
    assert sum(points.values()) == s["total"]
    web = analytics.interaction_summary(ORG_A, channel="web")["series"]["points"]
    assert [web[0], web[-1]] == [["2026-11-01", 1], ["2026-11-20", 1]]
    rows = [  # 100 days: counted per week, each week from its Monday
        {"id": f"w{d}", "channel": "web", "occurred_at": day.isoformat(), "text": "x"}
        for d in range(0, 100, 3)
        for day in [datetime(2026, 1, 1, 23, 30, tzinfo=UTC) + timedelta(days=d)]
    ]
    lake.write(ORG_B, "interactions", [validate_rows("interactions", rows)], mode="replace")
    weekly = analytics.interaction_summary(ORG_B)["series"]
    mondays = [datetime.fromisoformat(d).weekday() for d, _ in weekly["points"]]
    assert weekly["unit"] == "week" and set(mondays) == {0}
    assert weekly["points"][0] == ["2025-12-29", 2]  # Jan 1 and Jan 4, 2026 (a Thursday)
    assert sum(n for _, n in weekly["points"]) == len(rows)


def test_popularity_of_the_products_named_with_some_words(analytics, lake):
    """title_words keep the products whose titles have each word (a plural's stem too), with
    a channel as well; an empty category is one no product has, not every product."""
    products = [
        {"id": "p1", "title": "Oat Milk Value Size", "category": "Dairy", "price": 3.5},
        {"id": "p2", "title": "Oat Bars", "category": "Snacks", "price": 2.0},
    ]
    lake.write(ORG_A, "products", [validate_rows("products", products)], mode="replace")
    assert analytics.top_products(ORG_A, title_words=("milk",)) == [("p1", 3)]
    assert analytics.top_products(ORG_A, title_words=("oat",)) == [("p1", 3), ("p2", 1)]
    assert analytics.top_products(ORG_A, title_words=("bar", "oat"), channel="cctv") == [("p2", 1)]
    assert analytics.top_products(ORG_A, title_words=("milk",), category="Snacks") == []
    assert analytics.top_products(ORG_A, category="") == []
