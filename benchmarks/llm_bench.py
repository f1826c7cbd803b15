"""Local CPU model benchmark: load time, time to first token, tokens/s, prompt-prefix reuse,
per weight dtype.

    python -m benchmarks.llm_bench [--dtypes float32 bfloat16] [--out var/bench/llm.json]

Runs the agent's real system prompt and five tool schemas. The prefix figure is measured
side by side in one run: the same request twice, the second reusing the KV cache of the
shared system-prompt-and-tools prefix, against a first request with a cold cache. Each
dtype runs the same requests in this one run; the ratios to the first dtype (first-token
time, tokens/s) and whether the answers are identical are in "dtype_ratios".
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import time
from datetime import UTC, datetime
from pathlib import Path

from crow.agent.prompts import system_prompt
from crow.agent.tools import TOOLS
from crow.settings import AppSettings
from models.dtypes import resolve_dtype
from models.local import LocalChatModel, LocalModelConfig
from models.messages import Message, ModelParams

QUESTIONS = ["Good morning, who are you?", "Which rain jackets sell best?"]
LABELS = ("cold", "new_question_same_prefix", "identical_repeat")


async def run(model: LocalChatModel, max_tokens: int) -> dict:
    specs = [t.spec for t in TOOLS]
    system = Message.system(system_prompt("Acme Outdoor"))
    params = ModelParams(max_tokens=max_tokens, timeout_s=600)
    out = {}
    for n, question in enumerate([QUESTIONS[0], QUESTIONS[1], QUESTIONS[1]]):
        label = LABELS[n]
        started = time.perf_counter()
        ttft, parts = None, []
        async for event in model.stream([system, Message.user(question)], specs, params):
            if ttft is None and event.type in {"text_delta", "tool_call", "turn_done"}:
                ttft = time.perf_counter() - started
            if event.type == "text_delta":
                parts.append(event.text)
            elif event.type == "tool_call":
                parts.append(f"<{event.call.name} {event.call.arguments}>")
        stats_answer = "".join(parts)
        stats = model.last_stats
        out[label] = {
            "question": question, "answer": stats_answer, "total_s": round(time.perf_counter() - started, 2),
            "time_to_first_output_s": round(ttft or 0, 2),
            "first_token_s": round(stats.first_token_s or 0, 2),
            "prompt_tokens": stats.prompt_tokens, "cached_prompt_tokens": stats.cached_tokens,
            "completion_tokens": stats.completion_tokens, "tokens_per_s": round(stats.tokens_per_s, 2),
        }  # fmt: skip
        print(label, out[label], flush=True)
    cold, warm = out["cold"]["first_token_s"], out["new_question_same_prefix"]["first_token_s"]
    out["prefix_reuse_first_token_speedup"] = round(cold / warm, 2) if warm else None
    return out


def _ratios(by_dtype: dict[str, dict], dtypes: list[str]) -> dict[str, dict]:
    """Each dtype against the first: speedups of first-token time (cold) and tokens/s."""
    base = by_dtype[dtypes[0]]
    out = {}
    for dtype in dtypes[1:]:
        row = by_dtype[dtype]
        out[f"{dtype}_vs_{dtypes[0]}"] = {
            "cold_first_token_speedup": round(base["cold"]["first_token_s"] / row["cold"]["first_token_s"], 2),
            "tokens_per_s_speedup": round(row["cold"]["tokens_per_s"] / base["cold"]["tokens_per_s"], 2),
            "same_answers": all(row[k]["answer"] == base[k]["answer"] for k in LABELS),
        }  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("var/bench/llm.json"))
    parser.add_argument("--max-tokens", type=int, default=96)
    parser.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"],
                        choices=["float32", "bfloat16", "auto"])  # fmt: skip
    args = parser.parse_args(argv)
    settings = AppSettings.from_serve_config("serve_config.yaml")
    result: dict = {
        "created_at": datetime.now(UTC).isoformat(), "backend": "transformers (GGUF Q4_K_M)",
        "model": settings.llm.model, "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "auto_dtype": resolve_dtype("auto"), "by_dtype": {},
    }  # fmt: skip
    for dtype in args.dtypes:
        model = LocalChatModel(LocalModelConfig(cache_dir=settings.model_cache_dir, dtype=dtype))
        started = time.perf_counter()
        model.load()
        load_s = time.perf_counter() - started
        print(f"{dtype}: load {load_s:.1f}s", flush=True)
        result["by_dtype"][dtype] = {
            "load_s": round(load_s, 1),
            **asyncio.run(run(model, args.max_tokens)),
        }
        model.close()
        del model
        gc.collect()
    result["dtype_ratios"] = _ratios(result["by_dtype"], args.dtypes)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(f"results: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
