"""`make bench`'s report: REPORT.md and the plots from a results dict, the timeline's
attribution, and the graph part of the runner end to end at --quick sizes."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from benchmarks.parts import kinds_in_turn, merge_comparisons
from benchmarks.questions import QUESTION_TYPES, all_questions
from benchmarks.report import write_report
from benchmarks.run_all import PARTS
from benchmarks.timeline import attribute
from tests.demo_env import seed_demo
from tests.repo import ROOT

PNG = b"\x89PNG\r\n\x1a\n"


def _breakdown() -> dict:
    def kind(total: float, model: float, tools: list[list[str]]) -> dict:
        parts = {
            "model": model,
            "embedding": 0.02,
            "retrieval": 0.05,
            "store": 0.03,
            "tools": 0.01,
            "rest": total - model - 0.11,
        }
        return {
            "n": 2,
            "total_s_median": total,
            "total_s": [total - 1, total + 1],
            "parts_s_median": parts,
            "share": {p: v / total for p, v in parts.items()},
            "model_calls_median": 2,
            "tools_called": tools,
        }

    return {
        "model": "tiny (local)",
        "by_type": {
            "greeting": kind(4.0, 3.8, [[], []]),
            "single_tool": kind(8.0, 7.7, [["get_interaction_summary"]] * 2),
            "multi_tool": kind(20.0, 19.5, [["search_products", "search_patterns"]] * 2),
        },
    }


def _compare(direct: float, graph: float) -> dict:
    return {
        "n": 4,
        "direct_ms": {"p50": direct, "p99": direct * 2, "mean": direct},
        "graph_ms": {"p50": graph, "p99": graph * 2, "mean": graph},
        "ratio_p50": round(graph / direct, 2),
        "added_ms_p50": graph - direct,
    }


def _results() -> dict:
    kinds = ("greeting", "single_tool", "multi_tool")
    level = {"answers": 40, "errors": 0, "error_examples": [], "elapsed_s": 10.0, "mean_s": 0.5}
    return {
        "created_at": "2026-11-30T00:00:00+00:00",
        "argv": [],
        "quick": False,
        "total_s": 1500.0,
        "machine": {"cpu": "test CPU", "nproc": 2, "loadavg_at_start": [1.0, 1.0, 1.0]},
        "parts": {
            p: {"status": "ok", "wall_s": 60.0}
            for p in ("breakdown", "peer", "graph", "search", "reindex")
        },
        "breakdown": _breakdown(),
        "graph": {
            "model": "scripted",
            "app_start_s": 30.0,
            "overhead": {
                "rounds": 2,
                "order": "alternating",
                "all": _compare(10.0, 25.0),
                "by_type": {k: _compare(10.0, 20.0) for k in kinds},
                "samples_ms": {
                    p: {k: [5.0, 10.0, 12.0, 30.0] for k in kinds} for p in ("direct", "graph")
                },
            },
            "load": {
                "model_latency_ms": 200.0,
                "duration_s": 10.0,
                "questions": "mixed",
                "levels": [
                    {
                        **level,
                        "concurrency": c,
                        "throughput_per_s": 2.0 * c**0.5,
                        "p50_s": 0.4 + c / 100,
                        "p99_s": 0.8 + c / 50,
                    }
                    for c in (1, 8, 32, 64)
                ],
            },
        },
        "firststart": {
            "model": "scripted",
            "ready_s": 40.0,
            "all_searchable_after_ready_s": 131.0,
            "rows_total": 41_000,
            "rows_per_s": 313.0,
            "orgs": {
                org: {
                    "searchable_after_ready_s": after,
                    "rows": {"interactions": 20_000, "products": 500},
                    "job_state": "succeeded",
                    "job_timings": {"start_s": 0.1, "embed_s": after - 5, "total_s": after},
                }
                for org, after in (("acme-outdoor", 68.0), ("fresh-mart", 131.0))
            },
        },
        "concurrency": {
            "model": "tiny (local)",
            "slots": {"on": 2, "off": 1},
            "answers_per_level": {"1": 4, "4": 4},
            "levels": {
                mode: [
                    {
                        "concurrency": c,
                        "answers_per_min": rate * c**0.5,
                        "p50_s": 15.0,
                        "errors": 0,
                        "fallbacks": 0,
                    }
                    for c in (1, 4)
                ]
                for mode, rate in (("on", 4.0), ("off", 3.0))
            },
            "ratio_on_over_off": {"1": 1.33, "4": 1.33},
        },
        "search": {
            "data": "random",
            "queries": 10,
            "k": 10,
            "filter": "10%",
            "by_size": [
                {
                    "rows": n,
                    "approx_kind": "ivf",
                    "recall_at_10_approx_vs_exact": {"unfiltered": 0.99, "filtered": 1.0},
                    "latency_ms": {
                        v: {"p50": 1.5, "p99": 3.0}
                        for v in ("exact", "approx", "exact_filtered", "approx_filtered")
                    },
                }
                for n in (100_000, 1_000_000)
            ],
        },
        "reindex": {
            "note": "single process on a sample",
            "ratio_ray_over_single_rows_per_s": 0.93,
            "max_abs_diff_vectors_sample": 1e-7,
            "ray_job": {
                "rows": 100_000,
                "wall_s": 436.4,
                "rows_per_s": 229.1,
                "loadavg_1m": [2, 2],
            },
            "single_process": {
                "rows": 20_000,
                "wall_s": 81.5,
                "rows_per_s": 245.4,
                "build_rows_per_s": 246.0,
                "encode_rows_per_s": 300.0,
                "loadavg_1m": [2, 2],
            },
        },
        "peer": {
            "askcrow": {
                "summary": {
                    "all": {"n": 22, "tool_accuracy": 0.9, "latency_p50_s": 9.0},
                    "count": {"n": 4, "tool_accuracy": 1.0, "latency_p50_s": 5.0},
                }
            },
            "peer": {
                "summary": {
                    "all": {"n": 22, "tool_accuracy": 0.5, "latency_p50_s": 12.0},
                    "count": {"n": 4, "tool_accuracy": 0.25, "latency_p50_s": 30.0},
                }
            },
            "peer_framework": "pydantic-ai 2.68",
            "sample": "11 of the file's 22 questions",
        },
    }


def test_report_has_the_main_table_and_the_plots(tmp_path):
    report = write_report(_results(), tmp_path, peer_table=lambda r: "| PEER TABLE |")
    text = report.read_text()
    assert report == tmp_path / "REPORT.md"
    main = text.split("## Main figures", 1)[1].split("\n## ", 1)[0]
    for row in (
        "| greeting answer | 4.00 s (median of 2): model 3.80 s (95.0%)",
        "| single tool answer | 8.00 s",
        "| multi tool answer | 20.00 s",
        "**x2.50** (+15.0 ms)",
        "| load, concurrency 1 / 8 / 32 / 64 |",
        "errors 0 / 0 / 0 / 0",
        "| search 1,000,000 vectors | ivf p50 1.50 / p99 3.00 ms",
        "Ray / single **x0.93**",
        "| peer (pydantic-ai 2.68) | 22 questions: tool accuracy 0.90 / 0.50 "
        "(count 1.00 / 0.25); p50 9.0 / 12.0 s",
        "11 of the file's 22 questions",
        "| PEER TABLE |",
    ):
        assert row in main, row
    for name in ("breakdown", "overhead", "load"):
        assert f"![{name}]({name}.png)" in text
        assert (tmp_path / f"{name}.png").read_bytes()[:8] == PNG
    assert "| reindex | ok | 60 |" in text


def test_goals_table_says_what_was_met_by_how_much(tmp_path):
    results = _results()
    results["graph"]["overhead"]["breakdown"] = {
        "by_type": {
            k: {"n": 4, "client_ms": 20.0, "http_proxy_ms": 5.0, "ingress_ms": 4.0, "calls": 5}
            for k in ("greeting", "single_tool", "multi_tool")
        }
    }
    for lv in results["graph"]["load"]["levels"]:
        lv.update(model_bound_per_s=10.0, ratio_to_model_bound=lv["throughput_per_s"] / 10.0)
    text = write_report(results, tmp_path).read_text()
    goals = text.split("## Goals", 1)[1].split("\n## ", 1)[0]
    for row in (
        "| full reindex rows/s over the raw encode rate (same model, same machine) | >= 0.8 | "
        "Ray Job (100,000 rows) x0.76; in-process (20,000 rows) x0.82; encode 300 rows/s | **no** |",
        "| every organization searchable after /ready, first start | <= 120 s | 131 s "
        "(acme-outdoor 68 s, fresh-mart 131 s; /ready 40 s after the start) | **no** |",
        "| graph overhead over one process, p50, zero-latency model | <= 30 ms | +15.0 ms",
        "32 clients x1.13 (11.3 of 10.0/s, CPU -%), 64 clients x1.60",
    ):
        assert row in goals, row
    assert goals.count("| yes |") == 2
    for name in ("reindex", "first_start", "graph_breakdown", "model_bound", "concurrency"):
        assert (tmp_path / f"{name}.png").read_bytes()[:8] == PNG, name
    assert "| 4 | 8.00 | 6.00 | x1.33 |" in text  # the concurrency table, on / off


def test_report_names_skipped_and_failed_parts(tmp_path):
    results = _results()
    for part in ("breakdown", "graph", "peer"):
        del results[part]
    results["parts"]["breakdown"] = {"status": "failed", "error": "RuntimeError: no model"}
    results["parts"]["peer"] = {"status": "skipped", "note": "--skip"}
    text = write_report(results, tmp_path).read_text()
    assert "| greeting answer | failed: RuntimeError: no model |" in text
    assert "| peer comparison | skipped (--skip) |" in text
    assert not (tmp_path / "overhead.png").exists()


def test_timeline_gives_each_instant_to_one_part():
    spans = [
        ("tools", 1.0, 4.0),
        ("embedding", 1.5, 2.0),
        ("retrieval", 1.8, 3.0),
        ("model", 4.0, 9.0),
        ("store", 0.0, 0.5),
    ]
    parts = attribute(spans, 0.0, 10.0)
    assert parts == pytest.approx(
        {"model": 5.0, "embedding": 0.5, "retrieval": 1.0, "store": 0.5, "tools": 1.5, "rest": 1.5}
    )
    assert sum(parts.values()) == pytest.approx(10.0)


@pytest.mark.serve
def test_quick_graph_part_end_to_end(tmp_path):
    """The runner's graph part at --quick sizes: Serve app from serve_config.yaml with the
    scripted model, overhead vs one process, two load levels; results.json and REPORT.md.
    The first-start part runs before it (the app over a tiny org with no indexes, ~75 s);
    the other parts, the local-LLM benchmark's two model loads among them, are skipped."""
    var, out = tmp_path / "var", tmp_path / "out"
    seed_demo(var, "acme-outdoor", 300)
    skips = [a for p in PARTS if p not in ("firststart", "graph") for a in ("--skip", p)]
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.run_all",
            "--quick",
            *skips,
            "--var",
            str(var),
            "--work-dir",
            str(tmp_path / "work"),
            "--out-dir",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"report:  {out / 'REPORT.md'}" in proc.stdout
    results = json.loads((out / "results.json").read_text())
    first = results["firststart"]  # the org indexed by the app itself, its job record read
    assert not first["timed_out"] and first["all_searchable_after_ready_s"] is not None
    assert first["orgs"]["acme-outdoor"]["job_state"] == "succeeded"
    assert first["orgs"]["acme-outdoor"]["job_timings"]["embed_s"] > 0
    overhead, load = results["graph"]["overhead"], results["graph"]["load"]
    assert overhead["all"]["n"] == 2 * len(all_questions()) and overhead["all"]["ratio_p50"] > 0
    assert [lv["concurrency"] for lv in load["levels"]] == [1, 4]
    assert all(lv["answers"] > 0 and lv["errors"] == 0 for lv in load["levels"])
    # The breakdown comes from Serve's access logs: a chat turn costs the Ingress one store
    # call (the rate check) and the Orchestrator two (start and finish of the turn).
    parts = overhead["breakdown"]["by_type"]
    assert {kind: parts[kind]["n"] for kind in parts} == {kind: 6 for kind in QUESTION_TYPES}
    assert parts["greeting"]["methods"] == {
        "ingress -> ChatStore.admit": 1,
        "orchestrator -> ChatStore.start_turn": 1,
        "orchestrator -> LLM.stream": 1,
        "orchestrator -> ChatStore.finish_turn": 1,
    }
    assert parts["single_tool"]["analytics_calls"] == 1 and parts["multi_tool"]["retriever_calls"]
    assert all(parts[kind]["http_proxy_ms"] > 0 for kind in parts)
    # ... and each level's throughput is set against the LLM deployment alone
    assert all(a["calls"] > 0 for a in load["llm_alone"])
    assert all(lv["ratio_to_model_bound"] > 0 for lv in load["levels"])
    assert results["indexes_built"]["collections"]  # a fresh var: indexes built first
    report = (out / "REPORT.md").read_text()
    assert "| Serve graph overhead per request | p50" in report
    assert "Where a graph request's time goes" in report and "model bound /s" in report


def test_peer_questions_kinds_in_turn_and_per_question_results_merged():
    questions = [{"kind": k, "id": f"{k}{i}"} for k in ("count", "search") for i in range(3)]
    assert [q["id"] for q in kinds_in_turn(questions)] == [
        "count0",
        "search0",
        "count1",
        "search1",
        "count2",
        "search2",
    ]

    def result(kind: str, crow_s: float, peer_s: float) -> dict:
        def row(latency: float) -> dict:
            return {
                "kind": kind,
                "latency_s": latency,
                "grounded": None,
                "tools_ok": True,
                "invalid_footnotes": 0,
                "fallback": None,
            }

        return {
            "agents": ["askcrow", "peer"],
            "model": "m",
            "peer_framework": "p",
            "askcrow": {"rows": [row(crow_s)]},
            "peer": {"rows": [row(peer_s)]},
        }

    merged = merge_comparisons([result("count", 1.0, 3.0), result("search", 2.0, 5.0)])
    assert merged["model"] == "m" and merged["agents"] == ["askcrow", "peer"]
    assert merged["askcrow"]["summary"]["all"]["n"] == 2
    assert merged["peer"]["summary"]["search"]["latency_p50_s"] == 5.0


def test_a_call_logged_after_its_caller_ended_is_still_the_callers():
    """Log lines carry the time each replica wrote them: the store's reply to the last call
    of a turn can be logged a moment after the Orchestrator logged its own end."""
    from benchmarks.serve_trace import breakdown

    calls = [
        {"deployment": "Ingress", "method": "POST", "start": 0.0, "end": 100.0},
        {"deployment": "ChatStore", "method": "admit", "start": 1.0, "end": 3.0},
        {"deployment": "Orchestrator", "method": "send", "start": 5.0, "end": 95.0},
        {"deployment": "ChatStore", "method": "start_turn", "start": 6.0, "end": 10.0},
        {"deployment": "ChatStore", "method": "finish_turn", "start": 90.0, "end": 95.4},
    ]
    parts = breakdown(110.0, calls)
    assert parts is not None and parts["methods"] == {
        "ingress -> ChatStore.admit": 1,
        "orchestrator -> ChatStore.start_turn": 1,
        "orchestrator -> ChatStore.finish_turn": 1,
    }


def test_the_typical_call_list_is_the_one_most_requests_made():
    """A request that refreshed the Ingress's key cache made one call more; in the middle
    of the list or not, it is not the typical request."""
    from benchmarks.serve_trace import summarize

    usual = {"ingress -> ChatStore.admit": 1, "orchestrator -> LLM.stream": 1}
    refreshed = {**usual, "ingress -> ChatStore.authenticate": 1}
    rows = [{"total_ms": float(n), "methods": m} for n, m in enumerate([usual, refreshed, usual])]
    out = summarize(rows)
    assert out["methods"] == usual and out["total_ms"] == 1.0 and out["n"] == 3
