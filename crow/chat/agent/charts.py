"""Charts of a tool's figures for the answer card, built from what the tool returned and
never from the model's text: the dashboard draws them, the model never reads them."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel


class Chart(BaseModel):
    kind: Literal["bar", "line"]
    title: str
    labels: list[str]
    values: list[int | float]
    unit: str = "interactions"  # what a value counts


def summary_charts(summary: dict[str, Any], channel: str | None) -> list[Chart]:
    """Interaction counts by channel (bars; not for one channel) and over time (a line) from
    an Analytics.interaction_summary result."""
    charts: list[Chart] = []
    if channel is None and summary["total"]:
        by_channel = sorted(summary["by_channel"].items(), key=lambda kv: -kv[1])
        charts.append(
            Chart(
                kind="bar",
                title="Interactions by channel",
                labels=[ch for ch, _ in by_channel],
                values=[n for _, n in by_channel],
            )
        )
    series = summary["series"]
    if len(series["points"]) > 1:
        scope = f"{channel.capitalize()} interactions" if channel else "Interactions"
        unit = series["unit"]
        charts.append(
            Chart(
                kind="line",
                title=f"{scope} per {unit}" + (" (weeks from Monday)" if unit == "week" else ""),
                labels=[day for day, _ in series["points"]],
                values=[n for _, n in series["points"]],
            )
        )
    return charts


def products_chart(rows: list[dict[str, Any]], counted: str = "interactions") -> Chart:
    """The products a tool ranked by interactions (``counted``: which ones), as bars."""
    return Chart(
        kind="bar",
        title=f"Top products by {counted}",
        labels=[r["title"] for r in rows],
        values=[r["interactions"] for r in rows],
    )
