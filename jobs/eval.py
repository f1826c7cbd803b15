"""Evaluate the agent on a question file: tool selection, grounding, fallbacks, latency.

    python -m jobs.eval [--eval-file ../shared/evals/queries.jsonl] [--org acme-outdoor]
                        [--out var/eval/results.json] [--limit N]

Each line: {"id", "query", "kind", "expect_tools": [...]}. A question counts as a correct
tool selection when the set of tools the agent called equals ``expect_tools`` (greetings:
no tool at all). Grounding: a count question's answer states the summary tool's total, and
every footnote points to a source a tool returned. The file only measures: nothing here
feeds questions or answers back into prompts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from crow.agent.context import ToolContext
from crow.agent.loop import Agent, AgentConfig
from crow.agent.prompts import system_prompt
from crow.analytics import Analytics
from crow.datalake import DataLake
from crow.indexing import INDEX_COLLECTIONS, build_index
from crow.search import SearchService
from crow.services import ThreadProxy
from crow.settings import AppSettings
from indexes.store import IndexStore
from models.chat import ChatModel
from models.messages import Message

DEFAULT_FILE = Path(__file__).resolve().parents[2] / "shared" / "evals" / "queries.jsonl"


def load_questions(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _numbers(text: str) -> set[int]:
    return {
        int(n.replace(",", ""))
        for n in re.findall(r"\d[\d,]*", text)
        if n.replace(",", "").isdigit()
    }


def grade(question: dict[str, Any], answer: Any, summary_total: int | None) -> dict[str, Any]:
    called = sorted({s["name"] for s in answer.tool_steps})
    expected = sorted(set(question["expect_tools"]))
    notes = [line for line in answer.content.splitlines() if re.match(r"^\[\d+\] ", line)]
    returned = {(s.type, s.id) for s in answer.sources}
    grounded = None
    if question["kind"] == "count":
        grounded = summary_total is not None and summary_total in _numbers(answer.content)
    return {
        "id": question["id"], "kind": question["kind"], "query": question["query"],
        "expected": expected, "called": called, "tools_ok": called == expected,
        "grounded": grounded, "footnotes": len(notes),
        "invalid_footnotes": len(notes) - len(returned) if len(notes) > len(returned) else 0,
        "fallback": answer.fallback, "latency_s": answer.timings["total_s"],
        "answer": answer.content[:500],
    }  # fmt: skip


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    by_kind: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_kind[row["kind"]].append(row)
    out: dict[str, Any] = {}
    for kind, items in [*sorted(by_kind.items()), ("all", rows)]:
        latencies = sorted(r["latency_s"] for r in items)
        counted = [r for r in items if r["grounded"] is not None]
        out[kind] = {
            "n": len(items),
            "tool_accuracy": round(sum(r["tools_ok"] for r in items) / len(items), 3),
            "grounding": round(sum(r["grounded"] for r in counted) / len(counted), 3)
            if counted
            else None,
            "invalid_footnotes": sum(r["invalid_footnotes"] for r in items),
            "fallback_rate": round(sum(r["fallback"] is not None for r in items) / len(items), 3),
            "latency_p50_s": round(statistics.median(latencies), 2),
            "latency_p99_s": round(
                latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))], 2
            ),
        }
    return out


async def evaluate(
    model: ChatModel, questions: list[dict[str, Any]], settings: AppSettings, org_id: str,
    *, embedder: Any, progress: bool = True,
) -> dict[str, Any]:  # fmt: skip
    lake = DataLake(settings.data_dir)
    index_store = IndexStore(settings.index_dir)
    for collection in INDEX_COLLECTIONS:  # build what is missing, in this process
        if index_store.current(org_id, collection) is None:
            build_index(
                lake, index_store, embedder.embed, org_id, collection, model=settings.embedder.model
            )
    search, analytics = SearchService(lake, index_store), Analytics(lake)
    agent = Agent(model, AgentConfig(max_iterations=settings.limits.max_iterations,
                                     model_timeout_s=settings.timeouts.model_s, tool_timeout_s=settings.timeouts.tool_s,
                                     ground_arguments=settings.agent.ground_arguments,
                                     route_small_talk=settings.agent.route_small_talk,
                                     route_counts=settings.agent.route_counts))  # fmt: skip
    org_name = next((o["name"] for o in lake.list_orgs() if o["id"] == org_id), org_id)
    rows = []
    for n, question in enumerate(questions, start=1):
        ctx = ToolContext(
            org_id, ThreadProxy(embedder), ThreadProxy(search), ThreadProxy(analytics)
        )
        messages = [
            Message.system(system_prompt(org_name, today=await ctx.anchor())),
            Message.user(question["query"]),
        ]
        started = time.perf_counter()
        answer = await agent.run(messages, ctx)
        answer.timings["total_s"] = round(time.perf_counter() - started, 3)
        total = analytics.interaction_summary(org_id)["total"]
        channel_totals = analytics.interaction_summary(org_id)["by_channel"]
        row = grade(question, answer, total)
        if question["kind"] == "count" and not row["grounded"]:  # a channel count is grounded too
            row["grounded"] = bool(_numbers(answer.content) & set(channel_totals.values()))
        rows.append(row)
        if progress:
            mark = "ok " if row["tools_ok"] else "MISS"
            print(f"[{n}/{len(questions)}] {mark} {row['kind']:<8} {row['latency_s']:6.1f}s "
                  f"{question['query'][:50]!r} -> {row['called']}", flush=True)  # fmt: skip
    return {"org": org_id, "rows": rows, "summary": summarize(rows)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--eval-file", type=Path, default=DEFAULT_FILE)
    parser.add_argument("--org", default="acme-outdoor")
    parser.add_argument("--config", type=Path, default=Path("serve_config.yaml"))
    parser.add_argument("--out", type=Path, default=Path("var/eval/results.json"))
    parser.add_argument("--limit", type=int, default=None)
    args = parser.parse_args(argv)
    settings = (
        AppSettings.from_serve_config(args.config) if args.config.is_file() else AppSettings()
    )
    questions = load_questions(args.eval_file)[: args.limit]

    from deployments.llm import make_chat_model
    from models.embedder import SentenceTransformerEmbedder

    e = settings.embedder
    embedder = SentenceTransformerEmbedder(e.model, device=e.device, batch_size=e.batch_size)
    model = make_chat_model(settings.llm, settings)
    result = asyncio.run(evaluate(model, questions, settings, args.org, embedder=embedder))
    result["eval_file"] = str(args.eval_file)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(
        f"\n{'kind':<10}{'n':>4}{'tools':>8}{'grounded':>10}{'fallback':>10}{'p50 s':>8}{'p99 s':>8}"
    )
    for kind, s in result["summary"].items():
        grounded = "-" if s["grounding"] is None else f"{s['grounding']:.2f}"
        print(f"{kind:<10}{s['n']:>4}{s['tool_accuracy']:>8.2f}{grounded:>10}{s['fallback_rate']:>10.2f}"
              f"{s['latency_p50_s']:>8.1f}{s['latency_p99_s']:>8.1f}")  # fmt: skip
    print(f"\nresults: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
