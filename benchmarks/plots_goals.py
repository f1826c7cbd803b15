"""The figures of the goals (benchmarks/report_goals.py): reindex rates, the first start,
where a graph request's time goes, and the real model under concurrent chats."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.plots import TYPE_LABELS, pyplot, save

GRAPH_PARTS = (
    ("http_proxy_ms", "HTTP + proxy", "#937860"),
    ("ingress_ms", "Ingress (own + hops)", "#8172b3"),
    ("orchestrator_ms", "Orchestrator (own + hops)", "#64b5cd"),
    ("chatstore_ms", "ChatStore", "#c44e52"),
    ("llm_ms", "LLM", "#4c72b0"),
    ("embedder_ms", "Embedder", "#dd8452"),
    ("retriever_ms", "Retriever", "#55a868"),
    ("analytics_ms", "Analytics", "#da8bc3"),
)


def reindex_plot(reindex: dict[str, Any], path: Path) -> Path:
    """Rows/s of the raw encode, the in-process build and the Ray Job, with the 0.8 line."""
    plt = pyplot()
    one, ray = reindex["single_process"], reindex["ray_job"]
    encode = one["encode_rows_per_s"]
    names = [
        "raw encode",
        f"in-process build\n{one['rows']:,} rows",
        f"Ray Job\n{ray['rows']:,} rows",
    ]
    rates = [encode, one["build_rows_per_s"], ray["rows_per_s"]]
    fig, ax = plt.subplots(figsize=(7, 3.6))
    bars = ax.bar(names, rates, color=["#999999", "#55a868", "#4c72b0"])
    for bar, rate in zip(bars, rates, strict=True):
        ax.annotate(
            f"{rate:.0f} (x{rate / encode:.2f})",
            (bar.get_x() + bar.get_width() / 2, rate),
            ha="center",
            va="bottom",
            fontsize=9,
        )
    ax.axhline(0.8 * encode, color="#c44e52", ls="--", lw=1, label="goal: 0.8 x encode")
    ax.set_ylabel("rows / s")
    ax.set_title("Full reindex vs the encoder alone (same model, same machine)")
    ax.legend(loc="lower right")
    return save(fig, path)


def first_start_plot(first: dict[str, Any], path: Path) -> Path:
    """Per organization, seconds from /ready until searchable, with the 120 s goal."""
    plt = pyplot()
    orgs = list(first["orgs"])
    after = [first["orgs"][o]["searchable_after_ready_s"] or 0 for o in orgs]
    fig, ax = plt.subplots(figsize=(7, 1.6 + 0.6 * len(orgs)))
    ax.barh(orgs, after, color="#4c72b0")
    for y, seconds in enumerate(after):
        ax.annotate(f"{seconds:.0f} s", (seconds, y), va="center", ha="left", fontsize=9)
    ax.axvline(120, color="#c44e52", ls="--", lw=1, label="goal: 120 s")
    ax.set_xlabel("seconds after /ready until searchable (all collections)")
    ax.set_title(f"First start: /ready {first['ready_s']:.0f} s after the start")
    ax.legend(loc="lower right")
    return save(fig, path)


def graph_breakdown_plot(overhead: dict[str, Any], path: Path) -> Path:
    """Stacked medians of where a graph request's time goes, per type, with the direct path."""
    plt = pyplot()
    by_type = overhead["breakdown"]["by_type"]
    kinds = [k for k, v in by_type.items() if v.get("n")]
    fig, ax = plt.subplots(figsize=(10, 1.8 + 0.8 * len(kinds)))
    for row, kind in enumerate(kinds):
        left = 0.0
        for key, label, color in GRAPH_PARTS:
            width = by_type[kind].get(key, 0.0)
            ax.barh(row, width, left=left, color=color, label=label if row == 0 else None)
            left += width
        direct = overhead["by_type"][kind]["direct_ms"]["p50"]
        ax.plot([direct], [row], "k|", ms=22, mew=2, label="one process, p50" if row == 0 else None)
    ax.set_yticks(range(len(kinds)), [TYPE_LABELS.get(k, k) for k in kinds])
    ax.set_xlabel("ms (medians; parts of one request through HTTP and the graph)")
    ax.set_title("Where a graph request's time goes (zero-latency scripted model)")
    ax.legend(fontsize=8, ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.25))
    return save(fig, path)


def bound_plot(load: dict[str, Any], path: Path) -> Path:
    """Answers/s at each concurrency next to the LLM deployment's bound."""
    plt = pyplot()
    levels = [lv for lv in load["levels"] if lv.get("model_bound_per_s")]
    conc = [lv["concurrency"] for lv in levels]
    fig, ax = plt.subplots(figsize=(7, 3.8))
    ax.plot(conc, [lv["throughput_per_s"] for lv in levels], "o-", label="through the graph")
    ax.plot(conc, [lv["model_bound_per_s"] for lv in levels], "s--", label="LLM deployment alone")
    ax.plot(
        conc,
        [0.8 * lv["model_bound_per_s"] for lv in levels],
        ":",
        color="#c44e52",
        label="goal: 0.8 x the bound",
    )
    ax.set_xscale("log", base=2)
    ax.set_xticks(conc, [str(c) for c in conc])
    ax.set_xlabel("concurrent clients")
    ax.set_ylabel("answers / s")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend()
    ax.set_title(f"Throughput vs the model's bound ({load['model_latency_ms']:g} ms per call)")
    return save(fig, path)


def concurrency_plot(concurrency: dict[str, Any], path: Path) -> Path:
    """Answers per minute against concurrent chats, continuous batching on and off."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 3.8))
    for mode, style in (("on", "o-"), ("off", "s--")):
        levels = concurrency["levels"][mode]
        slots = concurrency["slots"][mode]
        ax.plot(
            [lv["concurrency"] for lv in levels],
            [lv["answers_per_min"] for lv in levels],
            style,
            label=f"batching {mode} ({slots} slot{'s' if slots > 1 else ''})",
        )
    ax.set_xlabel("concurrent chats")
    ax.set_ylabel("answers / minute")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend()
    ax.set_title(f"Real model under concurrent chats: {concurrency['model']}")
    return save(fig, path)


def goal_plots(results: dict[str, Any], out_dir: Path) -> dict[str, Path]:
    out: dict[str, Path] = {}
    if (r := results.get("reindex")) and "encode_rows_per_s" in r.get("single_process", {}):
        out["reindex"] = reindex_plot(r, out_dir / "reindex.png")
    if (f := results.get("firststart")) and f.get("orgs"):
        out["first_start"] = first_start_plot(f, out_dir / "first_start.png")
    graph = results.get("graph") or {}
    if (o := graph.get("overhead")) and o.get("breakdown"):
        out["graph_breakdown"] = graph_breakdown_plot(o, out_dir / "graph_breakdown.png")
    if (lo := graph.get("load")) and any(lv.get("model_bound_per_s") for lv in lo["levels"]):
        out["model_bound"] = bound_plot(lo, out_dir / "model_bound.png")
    if c := results.get("concurrency"):
        out["concurrency"] = concurrency_plot(c, out_dir / "concurrency.png")
    return out
