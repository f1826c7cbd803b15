"""The report's figures (matplotlib, Agg backend): one PNG per measured distribution.

Each function takes its part of ``results.json`` and a path, draws, and returns the path;
``make_plots`` draws every figure whose part has results.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

PART_COLORS = {
    "model": "#4c72b0",
    "embedding": "#dd8452",
    "retrieval": "#55a868",
    "store": "#c44e52",
    "tools": "#8172b3",
    "rest": "#937860",
}
TYPE_LABELS = {"greeting": "greeting", "single_tool": "single tool", "multi_tool": "multi tool"}


def pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def breakdown_plot(breakdown: dict[str, Any], path: Path) -> Path:
    """Stacked bars of the median time per part, per question type: the whole answer in
    seconds (ticks: each answer's total), and everything but the model in milliseconds."""
    plt = pyplot()
    kinds = [k for k, v in breakdown["by_type"].items() if v.get("n")]
    fig, (whole, rest) = plt.subplots(1, 2, figsize=(11, 1.6 + 0.9 * len(kinds)), sharey=True)
    for row, kind in enumerate(kinds):
        parts = breakdown["by_type"][kind]["parts_s_median"]
        for ax, names, scale in ((whole, list(parts), 1.0), (rest, list(parts)[1:], 1000.0)):
            left = 0.0
            for part in names:
                ax.barh(
                    row,
                    parts[part] * scale,
                    left=left,
                    color=PART_COLORS[part],
                    height=0.5,
                    label=part if row == 0 and ax is whole else None,
                )
                left += parts[part] * scale
        totals = breakdown["by_type"][kind]["total_s"]
        whole.plot(
            totals,
            [row + 0.35] * len(totals),
            "k|",
            markersize=10,
            label="each answer (total)" if row == 0 else None,
        )
    whole.set_yticks(range(len(kinds)), [TYPE_LABELS.get(k, k) for k in kinds])
    whole.invert_yaxis()
    whole.set_xlabel("seconds (median per part)")
    whole.set_title("Whole answer")
    rest.set_xlabel("milliseconds (median per part)")
    rest.set_title("All but the model")
    fig.legend(loc="lower center", ncol=7, fontsize=8, frameon=False)
    fig.suptitle(f"One chat answer by part: {breakdown.get('model', 'model')}, in one process")
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    return save(fig, path, layout=False)


def overhead_plot(overhead: dict[str, Any], path: Path) -> Path:
    """Per-request latency distributions, direct vs through HTTP and the Serve graph."""
    plt = pyplot()
    samples = overhead["samples_ms"]
    kinds = list(samples["direct"])
    fig, ax = plt.subplots(figsize=(8, 4.5))
    data, positions, colors = [], [], []
    for i, kind in enumerate(kinds):
        for j, (path_name, color) in enumerate((("direct", "#55a868"), ("graph", "#4c72b0"))):
            data.append(samples[path_name][kind])
            positions.append(i * 3 + j)
            colors.append(color)
    boxes = ax.boxplot(
        data,
        positions=positions,
        widths=0.8,
        patch_artist=True,
        whis=(1, 99),
        showfliers=True,
        flierprops={"markersize": 3},
    )
    for box, color in zip(boxes["boxes"], colors, strict=True):
        box.set_facecolor(color)
    ax.set_xticks([i * 3 + 0.5 for i in range(len(kinds))], [TYPE_LABELS.get(k, k) for k in kinds])
    ax.legend(
        boxes["boxes"][:2],
        ["in one process (ChatService.send)", "HTTP + Serve graph"],
        loc="upper left",
        fontsize=8,
    )
    ax.set_yscale("log")
    ax.set_ylabel("ms per request (log)")
    ax.set_title("Per-request latency with a zero-latency scripted model (whiskers: p1-p99)")
    ax.grid(axis="y", alpha=0.3)
    return save(fig, path)


def load_plot(load: dict[str, Any], path: Path) -> Path:
    """Throughput and p50/p99 latency against concurrency."""
    plt = pyplot()
    levels = [lv for lv in load["levels"] if lv["answers"]]
    conc = [lv["concurrency"] for lv in levels]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    left.plot(conc, [lv["throughput_per_s"] for lv in levels], "o-", color="#4c72b0")
    left.set_ylabel("answers / s")
    left.set_title("Throughput")
    right.plot(conc, [lv["p50_s"] for lv in levels], "o-", label="p50", color="#55a868")
    right.plot(conc, [lv["p99_s"] for lv in levels], "s--", label="p99", color="#c44e52")
    right.set_ylabel("seconds per answer")
    right.set_title("Latency")
    right.legend()
    for ax in (left, right):
        ax.set_xscale("log", base=2)
        ax.set_xticks(conc, [str(c) for c in conc])
        ax.set_xlabel("concurrent clients")
        ax.grid(alpha=0.3)
        ax.set_ylim(bottom=0)
    fig.suptitle(f"Serve graph under load, scripted model {load['model_latency_ms']:g} ms per call")
    return save(fig, path)


def save(fig, path: Path, *, layout: bool = True) -> Path:
    if layout:
        fig.tight_layout()
    fig.savefig(path, dpi=110)
    import matplotlib.pyplot as plt

    plt.close(fig)
    return path


def make_plots(results: dict[str, Any], out_dir: Path) -> dict[str, Path]:
    """Every figure whose part is in ``results``: name -> PNG path."""
    out: dict[str, Path] = {}
    if b := results.get("breakdown"):
        out["breakdown"] = breakdown_plot(b, out_dir / "breakdown.png")
    graph = results.get("graph") or {}
    if o := graph.get("overhead"):
        out["overhead"] = overhead_plot(o, out_dir / "overhead.png")
    if (lo := graph.get("load")) and any(lv["answers"] for lv in lo["levels"]):
        out["load"] = load_plot(lo, out_dir / "load.png")
    return out
