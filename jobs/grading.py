"""Grading an agent's answers to an evaluation file, and the report's table (jobs.eval and
benchmarks.agent_compare grade and report every agent with these).

Tool selection: the set of tools called equals the question's ``expect_tools`` (a list of
lists gives alternatives). Correctness: the answer states the question's ``truth``
(jobs/truth.py). Grounding: a count answer states a figure the summary tool returned.
"""

from __future__ import annotations

import json
import re
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from jobs import truth as truths


def load_questions(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def numbers_in(text: str) -> set[int]:
    """The whole numbers written in `text` (thousands separators allowed)."""
    return {
        int(n.replace(",", ""))
        for n in re.findall(r"\d[\d,]*", text)
        if n.replace(",", "").isdigit()
    }


def _tool_sets(expect: list[Any]) -> list[list[str]]:
    """The acceptable sets of tools: one list of names, or a list of alternatives."""
    if expect and all(isinstance(e, list) for e in expect):
        return [sorted(set(e)) for e in expect]
    return [sorted(set(expect))]


def grade(
    question: dict[str, Any],
    answer: Any,
    summary_total: int | None,
    truth_rows: list[list[Any]] | None = None,
) -> dict[str, Any]:
    called = sorted({s["name"] for s in answer.tool_steps})
    options = _tool_sets(question["expect_tools"])
    expected = called if called in options else options[0]
    notes = [line for line in answer.content.splitlines() if re.match(r"^\[\d+\] ", line)]
    returned = {(s.type, s.id) for s in answer.sources}
    grounded = None
    if "get_interaction_summary" in expected:  # the answer states a count
        grounded = summary_total is not None and summary_total in numbers_in(answer.content)
    error = getattr(answer, "error", None)  # an agent that failed answered nothing: a miss
    if error is not None and grounded:
        grounded = False
    correct = None
    if (truth := question.get("truth")) is not None:
        correct = error is None and truths.judge(truth, truth_rows, answer)
    return {
        "id": question["id"],
        "kind": question["kind"],
        "query": question["query"],
        "expected": expected,
        "called": called,
        "tools_ok": called == expected and error is None,
        "grounded": grounded,
        "correct": correct,
        "error": error,
        "footnotes": len(notes),
        "invalid_footnotes": len(notes) - len(returned) if len(notes) > len(returned) else 0,
        "fallback": answer.fallback,
        "latency_s": answer.timings["total_s"],
        "model_s": answer.timings.get("model_s"),
        "route_s": answer.timings.get("route_s"),
        "answer": answer.content[:500],
        "steps": [
            {k: s.get(k) for k in ("name", "arguments", "results", "error")}
            for s in answer.tool_steps
        ],
    }


def _median(values: Any) -> float | None:
    known = [v for v in values if v is not None]
    return round(statistics.median(known), 3) if known else None


def _share(rows: list[dict[str, Any]], key: str) -> float | None:
    return round(sum(bool(r[key]) for r in rows) / len(rows), 3) if rows else None


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    by_kind: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_kind[row["kind"]].append(row)
    out: dict[str, Any] = {}
    for kind, items in [*sorted(by_kind.items()), ("all", rows)]:
        latencies = sorted(r["latency_s"] for r in items)
        counted = [r for r in items if r["grounded"] is not None]
        judged = [r for r in items if r.get("correct") is not None]
        out[kind] = {
            "n": len(items),
            "tool_accuracy": round(sum(r["tools_ok"] for r in items) / len(items), 3),
            "grounding": round(sum(r["grounded"] for r in counted) / len(counted), 3)
            if counted
            else None,
            "correctness": _share(judged, "correct"),
            "invalid_footnotes": sum(r["invalid_footnotes"] for r in items),
            "fallback_rate": round(sum(r["fallback"] is not None for r in items) / len(items), 3),
            "composed_rate": round(sum(r["fallback"] == "composed" for r in items) / len(items), 3),
            "errors": sum(r.get("error") is not None for r in items),
            "latency_p50_s": round(statistics.median(latencies), 2),
            "model_p50_s": _median(r.get("model_s") for r in items),
            "route_p50_s": _median(r.get("route_s") for r in items),
            "latency_p99_s": round(
                latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))], 2
            ),
        }
    return out


COLUMNS = (  # header, summary key, format: the report's columns, one agent or several
    ("tools", "tool_accuracy", "{:.2f}"),
    ("correct", "correctness", "{:.2f}"),
    ("grounded", "grounding", "{:.2f}"),
    ("bad notes", "invalid_footnotes", "{}"),
    ("composed", "composed_rate", "{:.2f}"),
    ("p50 s", "latency_p50_s", "{:.1f}"),
    ("p99 s", "latency_p99_s", "{:.1f}"),
)


def summary_table(summary: dict[str, Any]) -> str:
    rows = [["kind", "n", *(h for h, _, _ in COLUMNS)]]
    for kind, s in summary.items():
        rows.append(
            [
                kind,
                str(s["n"]),
                *("-" if s[key] is None else fmt.format(s[key]) for _, key, fmt in COLUMNS),
            ]
        )
    return aligned(rows)


def aligned(rows: list[list[str]]) -> str:
    """Rows as text columns: the first left-aligned, the others right-aligned."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(
            c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in rows
    )
