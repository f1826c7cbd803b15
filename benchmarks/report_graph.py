"""The Serve graph's section of the benchmark report: overhead, its breakdown, and load."""

from __future__ import annotations

from typing import Any

from benchmarks.plots import TYPE_LABELS
from benchmarks.tables import fmt, table

OVERHEAD_HEADER = (
    "type",
    "n",
    "direct p50 ms",
    "direct p99",
    "graph p50 ms",
    "graph p99",
    "ratio p50",
    "added ms p50",
)


def graph_section(results: dict[str, Any]) -> list[str]:
    g = results.get("graph")
    if not g:
        return []
    out = ["## Serve graph: overhead and load", ""]
    if o := g.get("overhead"):
        rows = [
            (
                TYPE_LABELS.get(k, k),
                str(v["n"]),
                f"{v['direct_ms']['p50']:.1f}",
                f"{v['direct_ms']['p99']:.1f}",
                f"{v['graph_ms']['p50']:.1f}",
                f"{v['graph_ms']['p99']:.1f}",
                f"x{v['ratio_p50']:.2f}",
                f"{v['added_ms_p50']:+.1f}",
            )
            for k, v in [*o["by_type"].items(), ("all", o["all"])]
        ]
        out += [
            f"Zero-latency scripted model ({g['model']}); {o['order']}. App start "
            f"{g.get('app_start_s', '?')} s.",
            "",
            table(OVERHEAD_HEADER, rows),
            "",
        ]
        out += _breakdown_table(o.get("breakdown"))
    if lo := g.get("load"):
        rows = [
            (
                str(lv["concurrency"]),
                str(lv["answers"]),
                f"{lv['throughput_per_s']:.2f}",
                fmt(lv["p50_s"], "{:.3f}"),
                fmt(lv["p99_s"], "{:.3f}"),
                fmt(lv.get("model_bound_per_s"), "{:.2f}"),
                fmt(lv.get("ratio_to_model_bound"), "x{:.2f}"),
                fmt(lv.get("cpu_percent"), "{:.0f}"),
                str(lv["errors"]),
                "; ".join(lv["error_examples"]),
            )
            for lv in lo["levels"]
        ]
        alone = lo.get("llm_alone") or []
        out += [
            f"Load: scripted model sleeping {lo['model_latency_ms']:g} ms per call; "
            f"{lo['questions']}; {lo['duration_s']:g} s per level, one session per client "
            "asking back to back; answers/s over the level's duration plus the drain of the "
            "requests still in flight. *Model bound*: the LLM deployment alone, called "
            "directly with as many callers in the same run ("
            + ", ".join(f"{a['calls_per_s']:.1f} calls/s at {a['concurrency']}" for a in alone)
            + f"), over the {lo.get('model_calls_per_answer', '?')} model calls an answer of "
            "this mix makes; *CPU*: the machine's use during the level (100% per core).",
            "",
            table(LOAD_HEADER, rows),
            "",
        ]
    return out


LOAD_HEADER = (
    "clients",
    "answers",
    "answers/s",
    "p50 s",
    "p99 s",
    "model bound /s",
    "ratio",
    "CPU %",
    "errors",
    "examples",
)
PARTS = (
    ("http_proxy_ms", "HTTP + proxy"),
    ("ingress_ms", "Ingress"),
    ("orchestrator_ms", "Orchestrator"),
    ("chatstore_ms", "ChatStore"),
    ("llm_ms", "LLM"),
    ("embedder_ms", "Embedder"),
    ("retriever_ms", "Retriever"),
    ("analytics_ms", "Analytics"),
)


def _breakdown_table(b: dict[str, Any] | None) -> list[str]:
    """Where a graph request's time goes, by part (benchmarks/serve_trace.py)."""
    if not b:
        return []
    rows = []
    calls = []
    for kind, v in b["by_type"].items():
        if not v.get("n"):
            continue
        rows.append(
            (
                TYPE_LABELS.get(kind, kind),
                f"{v['client_ms']:.1f}",
                *(_part(v, key) for key, _ in PARTS),
                f"{v['calls']:g}",
            )
        )
        calls.append(f"{TYPE_LABELS.get(kind, kind)}: " + ", ".join(v.get("methods", {})))
    return [
        "Where a graph request's time goes (medians; from Serve's JSON access logs joined by "
        "request id). *HTTP + proxy*: the client's time less the Ingress's; *Ingress* and "
        "*Orchestrator*: their own time less their callees' (FastAPI, auth, the agent loop, "
        "and the transit of every handle call); the others: the time each deployment spent "
        "serving this request's calls (the in-process path spends it too), with the number of "
        "calls.",
        "",
        table(("type", "total ms", *(label for _, label in PARTS), "handle calls"), rows),
        "",
        "Handle calls of a typical request: " + "; ".join(calls) + ".",
        "",
    ]


def _part(v: dict[str, Any], key: str) -> str:
    if key not in v:
        return "-"
    n = v.get(key.replace("_ms", "_calls"))
    return f"{v[key]:.1f}" + (f" ({n:g})" if n else "")
