"""``var/bench/REPORT.md`` from ``results.json``: the main table first, then one section per
part, the plots, the run (wall time per part) and the machine.

Works on any subset of parts: a skipped or failed part is named as such in every table.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.plots import TYPE_LABELS, make_plots
from benchmarks.plots_goals import goal_plots
from benchmarks.report_goals import concurrency_section, first_start_section, goals_section
from benchmarks.report_graph import graph_section
from benchmarks.tables import fmt, join, table

PARTS_SHOWN = ("model", "embedding", "retrieval", "store", "tools", "rest")
PEER_TABLE = Callable[[dict[str, Any]], str]


def write_report(
    results: dict[str, Any], out_dir: Path, *, peer_table: PEER_TABLE | None = None
) -> Path:
    """Plots and REPORT.md into ``out_dir``; returns the report's path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    plots = {**make_plots(results, out_dir), **goal_plots(results, out_dir)}
    lines = [
        "# Ask CROW benchmarks",
        "",
        f"Run {results.get('created_at', '?')}, {_machine_line(results.get('machine', {}))}; "
        f"whole run {_minutes(results.get('total_s'))}"
        + (" (`--quick`: tiny sizes, figures not meaningful)" if results.get("quick") else "")
        + ". Every figure is a ratio or a distribution measured side by side in this one run, "
        "on a machine shared with other work: trust the ratios over absolute numbers.",
        "",
        *goals_section(results),
        "## Main figures",
        "",
        main_table(results),
        "",
    ]
    peer = results.get("peer")
    if peer_table is not None and peer and "askcrow" in peer:
        lines += ["### Peer comparison", "", peer_table(peer), ""]
    lines += _llm_section(results)
    lines += _breakdown_section(results) + concurrency_section(results)
    lines += first_start_section(results) + graph_section(results) + _retrieval_section(results)
    if plots:
        lines += ["## Plots", ""]
        lines += [f"![{name}]({p.name})" for name, p in plots.items()]
        lines.append("")
    lines += _run_section(results)
    path = out_dir / "REPORT.md"
    path.write_text("\n".join(lines) + "\n")
    return path


# -- main table -----------------------------------------------------------------------------
def main_table(results: dict[str, Any]) -> str:
    rows: list[tuple[str, str, str]] = []
    b = results.get("breakdown")
    for kind in ("greeting", "single_tool", "multi_tool"):
        s = b["by_type"].get(kind) if b else None
        if s and s.get("n"):
            med = s["parts_s_median"]
            others = ", ".join(f"{p} {_ms(med[p])}" for p in PARTS_SHOWN[1:])
            rows.append(
                (
                    f"{TYPE_LABELS[kind]} answer",
                    f"{s['total_s_median']:.2f} s (median of {s['n']}): model "
                    f"{med['model']:.2f} s ({100 * s['share']['model']:.1f}%); {others}",
                    f"{b['model']} in one process",
                )
            )
        else:
            rows.append((f"{TYPE_LABELS[kind]} answer", _status(results, "breakdown"), ""))
    g = (results.get("graph") or {}).get("overhead")
    if g:
        a = g["all"]
        per_type = " / ".join(f"x{v['ratio_p50']:.2f}" for v in g["by_type"].values())
        rows.append(
            (
                "Serve graph overhead per request",
                f"p50 {a['graph_ms']['p50']:.1f} ms through HTTP + graph vs {a['direct_ms']['p50']:.1f} ms "
                f"direct: **x{a['ratio_p50']:.2f}** (+{a['added_ms_p50']:.1f} ms); p99 "
                f"{a['graph_ms']['p99']:.1f} vs {a['direct_ms']['p99']:.1f} ms; per type "
                f"({' / '.join(TYPE_LABELS.get(k, k) for k in g['by_type'])}) {per_type}",
                f"zero-latency scripted model, {a['n']} requests per path",
            )
        )
    else:
        rows.append(("Serve graph overhead per request", _status(results, "graph"), ""))
    lo = (results.get("graph") or {}).get("load")
    if lo:
        lv = lo["levels"]
        rows.append(
            (
                "load, concurrency " + " / ".join(str(x["concurrency"]) for x in lv),
                join(lv, "throughput_per_s", "{:.1f}")
                + " answers/s; p50 "
                + join(lv, "p50_s", "{:.2f}")
                + " s; p99 "
                + join(lv, "p99_s", "{:.2f}")
                + " s; errors "
                + join(lv, "errors", "{}")
                + (
                    "; of the model bound " + join(lv, "ratio_to_model_bound", "x{:.2f}")
                    if all("ratio_to_model_bound" in x for x in lv)
                    else ""
                ),
                f"scripted model {lo['model_latency_ms']:g} ms per call, {lo['duration_s']:g} s per level",
            )
        )
    else:
        rows.append(("load", _status(results, "graph"), ""))
    s = results.get("search")
    for entry in s["by_size"] if s else []:
        lat, rec = entry["latency_ms"], entry["recall_at_10_approx_vs_exact"]
        rows.append(
            (
                f"search {entry['rows']:,} vectors",
                f"{entry['approx_kind']} p50 {lat['approx']['p50']:.2f} / p99 {lat['approx']['p99']:.2f} ms "
                f"(exact {lat['exact']['p50']:.1f} / {lat['exact']['p99']:.1f} ms); 10% filter: "
                f"{lat['approx_filtered']['p50']:.2f} / {lat['approx_filtered']['p99']:.2f} ms; "
                f"recall@10 {rec['unfiltered']} / filtered {rec['filtered']}",
                "VectorIndex.search, one query per call",
            )
        )
    if not s:
        rows.append(("search", _status(results, "search"), ""))
    r = results.get("reindex")
    if r:
        ray, one = r["ray_job"], r["single_process"]
        rows.append(
            (
                "reindex interactions",
                f"Ray Data {ray['rows']:,} rows: {ray['rows_per_s']:.0f} rows/s ({ray['wall_s']:.0f} s); "
                f"single process {one['rows']:,} rows: {one['rows_per_s']:.0f} rows/s "
                f"({one['wall_s']:.0f} s); Ray / single **x{r['ratio_ray_over_single_rows_per_s']:.2f}**",
                "rows/s compared, each path on its own seeded sample"
                + ("; sizes reduced to fit the time budget" if r.get("reduced") else ""),
            )
        )
    else:
        rows.append(("reindex", _status(results, "reindex"), ""))
    p = results.get("peer")
    if p and "askcrow" in p:
        ours, theirs = p["askcrow"]["summary"], p["peer"]["summary"]
        c, q = ours["all"], theirs["all"]
        per_kind = ", ".join(
            f"{kind} {ours[kind]['tool_accuracy']:.2f} / {theirs[kind]['tool_accuracy']:.2f}"
            for kind in ours
            if kind != "all" and kind in theirs
        )
        rows.append(
            (
                f"peer ({p.get('peer_framework', 'peer')})",
                f"{c['n']} questions: tool accuracy {c['tool_accuracy']:.2f} / {q['tool_accuracy']:.2f} "
                f"({per_kind}); p50 {c['latency_p50_s']:.1f} / {q['latency_p50_s']:.1f} s (Ask CROW / peer)",
                "same model, tools and questions; table below"
                + (f"; {p['sample']}" if p.get("sample") else "")
                + (f"; {p['reduced']}" if p.get("reduced") else ""),
            )
        )
    else:
        rows.append(("peer comparison", _status(results, "peer"), ""))
    return table(("figure", "result", "how"), rows)


# -- sections -------------------------------------------------------------------------------
def _llm_section(results: dict[str, Any]) -> list[str]:
    llm = results.get("llm")
    if not llm or "rows" not in llm:
        return []
    header = (
        "runtime, model, threads",
        "load",
        "first token cold",
        "first token cached",
        "decode tok/s",
        "decode tok/s, busy",
    )
    rows = [
        (
            label,
            fmt(r.get("load_s"), "{:.1f} s"),
            fmt(r.get("cold_first_token_s"), "{:.2f} s"),
            fmt(r.get("cached_first_token_s"), "{:.2f} s"),
            fmt(r.get("decode_tokens_per_s"), "{:.1f}"),
            fmt(r.get("busy_decode_tokens_per_s"), "{:.1f}"),
        )
        for label, r in llm["rows"].items()
    ]
    lines = ["## Local LLM (benchmarks/llm_bench.py)", "", table(header, rows), ""]
    for name, ratio in llm.get("ratios", {}).items():
        lines.append(
            f"- {name}: decode x{ratio['decode_speedup']}, first token cold "
            f"x{ratio['cold_first_token_speedup']}, cached x{ratio['cached_first_token_speedup']}, "
            f"load x{ratio['load_speedup']}"
        )
    for name, sel in (llm.get("tool_selection") or {}).items():
        lines.append(
            f"- raw tool selection, {name}, constrained calls, no aids: "
            f"{sel['right']}/{sel['questions']} exact, first tool "
            f"{sel['first_tool_right']}/{sel['questions']}, {sel['invalid_calls']} invalid calls, "
            f"median {sel['median_s']} s"
        )
    return [*lines, ""]


def _breakdown_section(results: dict[str, Any]) -> list[str]:
    b = results.get("breakdown")
    if not b:
        return []
    rows = []
    for kind, s in b["by_type"].items():
        if not s.get("n"):
            continue
        med = s["parts_s_median"]
        tools = "; ".join(", ".join(t) or "none" for t in s["tools_called"])
        rows.append(
            (
                TYPE_LABELS.get(kind, kind),
                str(s["n"]),
                f"{s['total_s_median']:.2f}",
                *(f"{med[p]:.3f}" for p in PARTS_SHOWN),
                tools,
            )
        )
    return [
        "## Latency breakdown of one answer",
        "",
        f"`ChatService.send` in one process with {b['model']}, the real embedder, DuckDB chat "
        "store and indexes of the demo org; each instant of an answer is attributed to one "
        "part (priority model > embedding > retrieval > store > tools; rest = the loop, "
        "prompts and hops). `tools` includes the analytics queries, also the data time anchor "
        "every answer reads for its system prompt. Median seconds:",
        "",
        table(("type", "n", "total", *PARTS_SHOWN, "tools called per answer"), rows),
        "",
    ]


def _retrieval_section(results: dict[str, Any]) -> list[str]:
    out = []
    if s := results.get("search"):
        rows = []
        for e in s["by_size"]:
            for variant, lat in e["latency_ms"].items():
                rows.append((f"{e['rows']:,}", variant, f"{lat['p50']:.2f}", f"{lat['p99']:.2f}"))
        out += [
            "## Search",
            "",
            f"{s['data']}; {s['queries']} queries, k={s['k']}; filter: {s['filter']}.",
            "",
            table(("vectors", "variant", "p50 ms", "p99 ms"), rows),
            "",
        ]
    if r := results.get("reindex"):
        rows = [
            (name, f"{x['rows']:,}", f"{x['wall_s']}", f"{x['rows_per_s']}", str(x["loadavg_1m"]))
            for name, x in (("Ray Data job", r["ray_job"]), ("single process", r["single_process"]))
        ]
        out += [
            "## Reindex",
            "",
            r["note"],
            "",
            table(("path", "rows", "wall s", "rows/s", "loadavg before/after"), rows),
            "",
            f"Ray / single rows/s: x{r['ratio_ray_over_single_rows_per_s']}; largest difference "
            f"of a sampled vector from a plain encode: {r['max_abs_diff_vectors_sample']:.2g}.",
            "",
        ]
    return out


def _run_section(results: dict[str, Any]) -> list[str]:
    rows = [
        (
            name,
            p.get("status", "?"),
            fmt(p.get("wall_s"), "{:.0f}"),
            p.get("error") or p.get("note") or "",
        )
        for name, p in results.get("parts", {}).items()
    ]
    machine = results.get("machine", {})
    return [
        "## Run",
        "",
        table(("part", "status", "wall s", "note"), rows),
        "",
        f"Whole run: {_minutes(results.get('total_s'))}. Command: "
        f"`{' '.join(['python -m benchmarks.run_all', *results.get('argv', [])])}`. "
        "All figures: `results.json`.",
        "",
        "Machine: " + ", ".join(f"{k} {_rounded(v)}" for k, v in machine.items()),
    ]


# -- helpers --------------------------------------------------------------------------------
def _status(results: dict[str, Any], part: str) -> str:
    p = results.get("parts", {}).get(part, {})
    if p.get("status") == "failed":
        return f"failed: {p.get('error', '?')}"
    return p.get("status", "not run") + (f" ({p['note']})" if p.get("note") else "")


def _machine_line(m: dict[str, Any]) -> str:
    load = m.get("loadavg_at_start") or [None]
    return f"{m.get('cpu') or 'CPU'}, {m.get('nproc', '?')} cores, load average {fmt(load[0], '{:.1f}')} at start"


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 2)
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value


def _ms(seconds: float) -> str:
    ms = 1000 * seconds
    return f"{ms:.1f} ms" if ms < 10 else f"{ms:.0f} ms"


def _minutes(seconds: float | None) -> str:
    return "?" if seconds is None else f"{seconds / 60:.1f} min"
