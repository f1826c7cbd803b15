"""Application metrics, declared once; a sink is injected (Ray's under Serve, none in tests).

The core never imports ray: it records through the small ``Metrics`` protocol, and
deployments/metrics.py turns the same declarations into ``ray.util.metrics`` objects, which
Ray exports to Prometheus (and the Ray dashboard's Metrics view).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Literal, Protocol


@dataclass(frozen=True)
class MetricDef:
    name: str
    kind: Literal["counter", "histogram"]
    description: str
    tags: tuple[str, ...] = ()
    boundaries: tuple[float, ...] = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 40, 80)


METRICS: dict[str, MetricDef] = {
    m.name: m
    for m in (
        MetricDef(
            "crow_http_requests_total", "counter", "HTTP requests", ("route", "method", "status")
        ),
        MetricDef(
            "crow_http_request_seconds", "histogram", "HTTP request latency", ("route", "method")
        ),
        MetricDef(
            "crow_agent_iterations", "histogram", "Model calls per answer", (), (1, 2, 3, 4, 5, 6)
        ),
        MetricDef(
            "crow_agent_fallbacks_total", "counter", "Plain fallback calls taken", ("reason",)
        ),
        MetricDef("crow_tool_calls_total", "counter", "Tool calls", ("tool", "ok")),
        MetricDef("crow_tool_seconds", "histogram", "Tool call latency", ("tool",)),
        MetricDef("crow_llm_prompt_tokens_total", "counter", "LLM prompt tokens", ()),
        MetricDef("crow_llm_completion_tokens_total", "counter", "LLM completion tokens", ()),
        MetricDef("crow_llm_first_token_seconds", "histogram", "LLM time to first token", ()),
        MetricDef("crow_llm_cache_total", "counter", "LLM response cache lookups", ("result",)),
        MetricDef(
            "crow_reindex_rows_total", "counter", "Rows embedded by reindex jobs", ("collection",)
        ),
        MetricDef(
            "crow_reindex_seconds",
            "histogram",
            "Reindex duration per collection",
            ("collection",),
            (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600),
        ),
    )
}


class Metrics(Protocol):
    def inc(self, name: str, value: float = 1.0, **tags: str) -> None: ...

    def observe(self, name: str, value: float, **tags: str) -> None: ...


class NoMetrics:
    def inc(self, name: str, value: float = 1.0, **tags: str) -> None:
        METRICS[name]  # an undeclared name is a bug wherever it runs

    def observe(self, name: str, value: float, **tags: str) -> None:
        METRICS[name]


class MemoryMetrics:
    """Keeps what was recorded (tests, benchmarks)."""

    def __init__(self) -> None:
        self.counters: dict[tuple[str, tuple[tuple[str, str], ...]], float] = defaultdict(float)
        self.observations: dict[str, list[float]] = defaultdict(list)

    def inc(self, name: str, value: float = 1.0, **tags: str) -> None:
        assert METRICS[name].kind == "counter"
        self.counters[(name, tuple(sorted(tags.items())))] += value

    def observe(self, name: str, value: float, **tags: str) -> None:
        assert METRICS[name].kind == "histogram"
        self.observations[name].append(value)

    def total(self, name: str, **tags: str) -> float:
        return sum(
            v for (n, t), v in self.counters.items() if n == name and set(tags.items()) <= set(t)
        )
