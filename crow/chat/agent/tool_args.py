"""The tools' typed arguments: what the model may write for each, with the descriptions it
reads (crow.chat.agent.tools turns them into JSON schemas)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from crow.data.records import Channel as DataChannel
from crow.data.records import PatternType
from crow.retrieval.sort_order import SortOrder

# "all" is a value a small model can write where it would otherwise invent a channel.
Channel = Annotated[
    Literal["all", DataChannel] | None,
    AfterValidator(lambda v: None if v == "all" else v),
]


class ToolArgs(BaseModel):
    model_config = ConfigDict(extra="ignore")


_ONLY_IF = " Leave it out unless the question names one."
Since = Annotated[
    str | None,
    Field(
        description="Start: the question's own time words, word for word ('this month', 'since "
        "the start of the month', 'over the past month', 'past three weeks', 'last 30 days', "
        "'November 30th': a day or month alone is all of it, and 'last month' the calendar "
        "month before this one), 'all time', or an ISO date if the question writes one."
    ),
]
Until = Annotated[
    str | None,
    Field(
        description="End: 'all time' (up to the latest data), or an ISO date if the "
        "question names an end."
    ),
]


class SummaryArgs(ToolArgs):
    channel: Channel = Field(
        None,
        description="'all' (every channel), or only web, cctv or social if the question names one.",
    )
    since: Since = None
    until: Until = None


class ProductArgs(ToolArgs):
    query: str = Field("", description="What to look for; empty for overall top products.")
    limit: int = Field(5, ge=1, le=20, description="How many products.")
    sort: SortOrder = Field(
        "relevance",
        description="'popularity' ranks by customer interactions: for the top, most popular, "
        "best-selling or most engaged-with products. 'cheapest' or 'priciest' ranks by price: "
        "for the cheapest, lowest-priced, most expensive or highest-priced ones.",
    )
    channel: Channel = Field(
        None,
        description="Rank by this channel's interactions only: web, cctv (store cameras) or "
        "social (most talked about on social media, say)." + _ONLY_IF,
    )
    since: str | None = Field(
        None,
        description="Rank by interactions from this time on: the question's own time "
        "words ('last month', 'in October')." + _ONLY_IF,
    )
    until: str | None = Field(
        None,
        description="Rank by interactions up to this ISO date (that day included)." + _ONLY_IF,
    )


class InteractionArgs(ToolArgs):
    query: str = Field(description="What the interactions are about.")
    channel: Channel = Field(
        None,
        description="'all', or web, cctv (store cameras) or social if the question names one.",
    )
    since: Since = None
    until: Until = None
    limit: int = Field(5, ge=1, le=20)


class PatternArgs(ToolArgs):
    # May be empty: asked for the surest of all patterns, a 1.5B that had to write a query
    # wrote the routing hint's words ("likely", "routing hint") and was refused.
    query: str = Field("", description="What the patterns are about; empty for all patterns.")
    type: PatternType | None = Field(
        None,
        description="Only this pattern type: trend, anomaly (something unusual), segment (a "
        "group of customers), seasonal, churn-risk (customers likely to leave) or affinity "
        "(products bought together)." + _ONLY_IF,
    )
    since: str | None = Field(
        None,
        description="Detected since: 'all time', or an ISO date, or the question's own time "
        "words ('last week', 'past 3 months') if it names a time.",
    )
    sort: Literal["relevance", "newest"] = Field(
        "relevance",
        description="'newest' lists the most recently detected first: only for the latest, "
        "newest or most recent pattern (the query then names nothing but the kind asked, if "
        "any).",
    )
    # At least 6: "which churn group has the highest confidence?" was asked with limit 1 and
    # answered from the one pattern read, and "which seasonal ramp has the highest
    # confidence?" with limit 3 from three of six. At most 9: a constrained "1" cannot grow
    # into "10".
    limit: int = Field(6, ge=6, le=9, description="How many patterns (6 to 9).")


class OrgContextArgs(ToolArgs):
    query: str = Field(description="What to look up in the company's knowledge base.")
    # 3 to 5: a fact is often in a document other than the top one (with limit 1, a 1.5B read
    # "company size" off a quarterly review and answered a made-up headcount), and a 1.5B
    # that starts a "1" under a grammar allowing 3-10 finishes it as "10" (ten documents read).
    limit: int = Field(3, ge=3, le=5, description="How many documents (3 to 5).")
