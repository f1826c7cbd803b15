"""The tools against DuckDB truth: top products overall and by topic, channel filters, empty
results that say what to try."""

from __future__ import annotations

import asyncio

import pytest

from tests.agent_support import ORG, ctx_for
from tests.demo_env import build_demo_env


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    return build_demo_env(tmp_path_factory.mktemp("var"))


@pytest.mark.parametrize(
    "arguments",
    [
        {"query": "top products", "sort": "popularity"},
        {"query": "our best-selling products"},
        {"query": ""},
    ],
)
def test_top_products_overall_equal_the_duckdb_ranking(demo, arguments):
    import duckdb

    from crow.chat.agent.tools import TOOLS_BY_NAME

    output = asyncio.run(
        TOOLS_BY_NAME["search_products"].invoke({**arguments, "limit": 5}, ctx_for(demo))
    )
    glob = demo.lake.parquet_glob(ORG, "interactions")
    with duckdb.connect() as con:
        truth = con.execute(
            "SELECT product_id FROM read_parquet(?) WHERE product_id IS NOT NULL "
            "GROUP BY 1 ORDER BY count(*) DESC, product_id LIMIT 5",
            [glob],
        ).fetchall()
    assert [p["id"] for p in output.content["products"]] == [t[0] for t in truth]


def test_top_products_of_a_topic_rank_that_topics_products(demo):
    from crow.chat.agent.tools import TOOLS_BY_NAME

    args = {"query": "tents", "sort": "popularity", "limit": 5}
    output = asyncio.run(TOOLS_BY_NAME["search_products"].invoke(args, ctx_for(demo)))
    counts = [p["interactions"] for p in output.content["products"]]
    assert counts == sorted(counts, reverse=True)
    assert all("tent" in (p["title"] + p["category"]).lower() for p in output.content["products"])


def test_a_channel_filter_counts_only_that_channel_and_all_means_none(demo):
    """No zero counts for the channels filtered out (a small model read them as "web is the
    busiest"), the busiest and quietest channel named (it does not compare figures reliably);
    'all' is a value a small model can write instead of inventing a channel."""
    from crow.chat.agent.tools import TOOLS_BY_NAME

    summary = TOOLS_BY_NAME["get_interaction_summary"]
    web = asyncio.run(summary.invoke({"channel": "web"}, ctx_for(demo))).content
    every = asyncio.run(summary.invoke({"channel": "all", "since": "all time"}, ctx_for(demo)))
    assert web["by_channel"] == {"web": web["total_interactions"]}
    counts = every.content["by_channel"]
    assert set(counts) == {"web", "cctv", "social"} and list(counts.values()) == sorted(
        counts.values(), reverse=True
    )
    assert every.content["busiest_channel"] == max(counts, key=counts.get)
    assert every.content["quietest_channel"] == min(counts, key=counts.get)
    assert f"busiest {every.content['busiest_channel']}" in every.content["in_words"]
    assert "busiest_channel" not in web
    assert (
        every.content["total_interactions"]
        == sum(every.content["by_channel"].values())
        > web["total_interactions"]
    )


def test_an_empty_result_under_filters_says_what_to_try(demo):
    from crow.chat.agent.tools import TOOLS_BY_NAME

    args = {"query": "jackets", "since": "2020-01-01", "until": "2020-01-02"}
    empty = asyncio.run(TOOLS_BY_NAME["search_interactions"].invoke(args, ctx_for(demo)))
    assert empty.content["interactions"] == [] and "without them" in empty.content["note"]
    assert "since='2020-01-01'" in empty.content["note"]
    found = asyncio.run(
        TOOLS_BY_NAME["search_interactions"].invoke({"query": "jackets"}, ctx_for(demo))
    )
    assert found.content["interactions"] and "note" not in found.content


def test_charts_carry_the_tools_own_figures(demo):
    """The answer card's charts are the tool's results: channel bars equal the counts the
    model reads, the line adds up to the total, top products' bars are the ranked rows."""
    from crow.chat.agent.tools import TOOLS_BY_NAME

    summary = asyncio.run(TOOLS_BY_NAME["get_interaction_summary"].invoke({}, ctx_for(demo)))
    bars, line = summary.charts
    assert (bars.kind, line.kind) == ("bar", "line")
    assert dict(zip(bars.labels, bars.values, strict=True)) == summary.content["by_channel"]
    assert sum(line.values) == summary.content["total_interactions"]
    assert "series" not in summary.content  # the model reads totals, not the line
    web = asyncio.run(
        TOOLS_BY_NAME["get_interaction_summary"].invoke({"channel": "web"}, ctx_for(demo))
    )
    assert [c.kind for c in web.charts] == ["line"]  # one channel: no bars of one bar
    assert web.charts[0].title.startswith("Web interactions per")
    args = {"query": "top products", "sort": "popularity", "limit": 4}
    top = asyncio.run(TOOLS_BY_NAME["search_products"].invoke(args, ctx_for(demo)))
    (chart,) = top.charts
    rows = top.content["products"]
    assert chart.labels == [p["title"] for p in rows]
    assert chart.values == [p["interactions"] for p in rows]
    by_topic = {"query": "tents", "sort": "relevance", "limit": 3}
    assert (
        asyncio.run(TOOLS_BY_NAME["search_products"].invoke(by_topic, ctx_for(demo))).charts == []
    )
