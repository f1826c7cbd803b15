"""Local CPU model benchmark: load time, time to first token, tokens/s, prompt-prefix reuse.

    python -m benchmarks.llm_bench [--out var/bench/llm.json]

Runs the agent's real system prompt and five tool schemas. The prefix figure is measured
side by side in one run: the same request twice, the second reusing the KV cache of the
shared system-prompt-and-tools prefix, against a first request with a cold cache.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import time
from datetime import UTC, datetime
from pathlib import Path

from crow.agent.prompts import system_prompt
from crow.agent.tools import TOOLS
from crow.settings import AppSettings
from models.local import LocalChatModel, LocalModelConfig
from models.messages import Message, ModelParams

QUESTIONS = ["Good morning, who are you?", "Which rain jackets sell best?"]


async def run(model: LocalChatModel, max_tokens: int) -> dict:
    specs = [t.spec for t in TOOLS]
    system = Message.system(system_prompt("Acme Outdoor"))
    params = ModelParams(max_tokens=max_tokens, timeout_s=600)
    out = {}
    for n, question in enumerate([QUESTIONS[0], QUESTIONS[1], QUESTIONS[1]]):
        label = ["cold", "new_question_same_prefix", "identical_repeat"][n]
        started = time.perf_counter()
        ttft = None
        async for event in model.stream([system, Message.user(question)], specs, params):
            if ttft is None and event.type in {"text_delta", "tool_call", "turn_done"}:
                ttft = time.perf_counter() - started
        stats = model.last_stats
        out[label] = {
            "question": question, "total_s": round(time.perf_counter() - started, 2),
            "time_to_first_output_s": round(ttft or 0, 2),
            "first_token_s": round(stats.first_token_s or 0, 2),
            "prompt_tokens": stats.prompt_tokens, "cached_prompt_tokens": stats.cached_tokens,
            "completion_tokens": stats.completion_tokens, "tokens_per_s": round(stats.tokens_per_s, 2),
        }  # fmt: skip
        print(label, out[label], flush=True)
    cold, warm = out["cold"]["first_token_s"], out["new_question_same_prefix"]["first_token_s"]
    out["prefix_reuse_first_token_speedup"] = round(cold / warm, 2) if warm else None
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("var/bench/llm.json"))
    parser.add_argument("--max-tokens", type=int, default=96)
    args = parser.parse_args(argv)
    settings = AppSettings.from_serve_config("serve_config.yaml")
    model = LocalChatModel(LocalModelConfig(cache_dir=settings.model_cache_dir))
    started = time.perf_counter()
    model.load()
    load_s = time.perf_counter() - started
    print(f"load {load_s:.1f}s", flush=True)
    result = {
        "created_at": datetime.now(UTC).isoformat(), "backend": "transformers (GGUF Q4_K_M, float32)",
        "model": settings.llm.model, "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "load_s": round(load_s, 1), **asyncio.run(run(model, args.max_tokens)),
    }  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(f"results: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
