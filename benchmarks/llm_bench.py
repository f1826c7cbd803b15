"""Local LLM benchmark: transformers (the old runtime) vs llama.cpp on the same 0.5B GGUF, at 1
and 2 threads, llama.cpp 0.5B vs 1.5B, decoding on a busy machine, and raw tool selection.

    python -m benchmarks.llm_bench [--eval-file ../shared/evals/queries.jsonl] [--skip-transformers]

Every figure comes from this one run (side by side, on this machine as it is):
- load_s: weights ready to answer.
- cold_first_token_s: the agent's real system prompt and five tool schemas (~1,150 tokens)
  plus a question, nothing cached.
- cached_first_token_s: a new question after the same system prompt and tools (prefix cached).
- decode_tokens_per_s: a text answer of --max-tokens tokens after its first token.
- busy_decode_tokens_per_s (llama.cpp): the same while another process spins on one core.
- tool_selection (llama.cpp): one request per evaluation question with the five tools,
  tool_choice auto, calls constrained to the tools' schemas, no router, hints or rules; a
  question is right when the tools called equal its expected tools (first_tool_right: the
  first call is one of them, since a multi-tool question may need a second loop step).
Writes --out (var/bench/llm.json).
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import gc
import json
import os
import platform
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from crow.chat.agent.prompts import opening
from crow.chat.agent.tools import TOOLS
from crow.settings import AppSettings
from models.gguf_assembly import assemble_gguf, source_for
from models.local import LocalChatModel, LocalModelConfig
from models.messages import Message, ModelParams

SMALL, LARGE = "qwen2.5-coder-0.5b-instruct-q4_k_m", "qwen2.5-coder-1.5b-instruct-q4_k_m"
# Our own wording, not the evaluation questions.
COLD_QUESTION = "Which rain jackets sell best?"
CACHED_QUESTION = "Were there any unusual spikes in store visits?"
DECODE_PROMPT = "Write a short paragraph about choosing a tent for a family camping trip."


def messages(question: str) -> list[Message]:
    return [*opening("Acme Outdoor"), Message.user(question)]


# -- llama.cpp ---------------------------------------------------------------------------------


def llamacpp_row(
    cache: Path, model: str, threads: int, max_tokens: int, busy: bool
) -> dict[str, Any]:
    config = LocalModelConfig(
        cache_dir=cache,
        model=model,
        threads=threads,
        batch_threads=threads,
        slots=1,
        max_tokens=max(max_tokens, 96),
    )
    local = LocalChatModel(config)
    started = time.perf_counter()
    local.load()
    row: dict[str, Any] = {"load_s": round(time.perf_counter() - started, 2)}
    specs = [t.spec for t in TOOLS]
    tool_params = ModelParams(max_tokens=96, timeout_s=600)
    for label, question in (("cold", COLD_QUESTION), ("cached", CACHED_QUESTION)):
        asyncio.run(local.request(messages(question), specs, tool_params))
        stats = local.last_stats
        assert stats is not None
        row[f"{label}_first_token_s"] = round(stats.first_token_s or 0.0, 3)
        row[f"{label}_prompt_tokens"], row[f"{label}_cached_tokens"] = (
            stats.prompt_tokens,
            stats.cached_tokens,
        )
    row["decode_tokens_per_s"] = _llamacpp_decode(local, max_tokens)
    if busy:
        with _burner():
            row["busy_decode_tokens_per_s"] = _llamacpp_decode(local, max_tokens)
    local.close()
    return row


def _llamacpp_decode(local: LocalChatModel, max_tokens: int) -> float:
    params = ModelParams(max_tokens=max_tokens, timeout_s=600)
    asyncio.run(local.request([Message.user(DECODE_PROMPT)], (), params))
    assert local.last_stats is not None
    return round(local.last_stats.tokens_per_s, 2)


class _burner:
    """Another process spinning on one core while the block runs (a busy machine)."""

    def __enter__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        time.sleep(0.5)

    def __exit__(self, *exc: object) -> None:
        self.proc.kill()
        self.proc.wait()


def tool_selection(cache: Path, model: str, threads: int, eval_file: Path) -> dict[str, Any]:
    local = LocalChatModel(
        LocalModelConfig(
            cache_dir=cache, model=model, threads=threads, batch_threads=threads, slots=1
        )
    )
    local.load()
    specs = [t.spec for t in TOOLS]
    params = ModelParams(max_tokens=128, timeout_s=600)
    rows = []
    for line in eval_file.read_text().splitlines():
        item = json.loads(line)
        started = time.perf_counter()
        turn = asyncio.run(local.request(messages(item["query"]), specs, params))
        called = [c.name for c in turn.tool_calls]
        expected = item.get("expect_tools") or []
        rows.append(
            {
                "id": item["id"],
                "kind": item.get("kind"),
                "expected": expected,
                "called": called,
                "invalid_calls": len(turn.invalid_tool_calls),
                "right": sorted(set(called)) == sorted(set(expected)),
                "first_tool_right": (
                    called[:1] == [] if not expected else bool(called) and called[0] in expected
                ),
                "s": round(time.perf_counter() - started, 2),
            }
        )
    local.close()
    n = len(rows)
    return {
        "questions": n,
        "right": sum(r["right"] for r in rows),
        "first_tool_right": sum(r["first_tool_right"] for r in rows),
        "invalid_calls": sum(r["invalid_calls"] for r in rows),
        "median_s": sorted(r["s"] for r in rows)[n // 2] if rows else None,
        "rows": rows,
    }


# -- transformers (before) -------------------------------------------------------------------


def transformers_row(cache: Path, threads: int, max_tokens: int) -> dict[str, Any]:
    """The old runtime: the 0.5B GGUF dequantized by transformers (bfloat16 where the CPU
    has bf16 kernels), its prompt prefix reused through a copied KV cache."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from models.dtypes import resolve_dtype
    from models.openai_wire import tool_to_wire

    torch.set_num_threads(threads)
    path = assemble_gguf(cache, source_for(SMALL))
    started = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    model = AutoModelForCausalLM.from_pretrained(
        path.parent, gguf_file=path.name, dtype=getattr(torch, resolve_dtype("auto"))
    ).eval()
    row: dict[str, Any] = {"load_s": round(time.perf_counter() - started, 2)}
    tools = [tool_to_wire(t.spec) for t in TOOLS]

    def ids(question: str) -> Any:
        chat = [{"role": m.role, "content": m.content} for m in messages(question)]
        text = tokenizer.apply_chat_template(
            chat, tools=tools, add_generation_prompt=True, tokenize=False
        )
        return tokenizer(text, return_tensors="pt", add_special_tokens=False)["input_ids"]

    cold, cached = ids(COLD_QUESTION), ids(CACHED_QUESTION)
    shared = int((cold[0, : cached.shape[1]] == cached[0, : cold.shape[1]]).cumprod(0).sum())
    with torch.inference_mode():
        started = time.perf_counter()
        prefix = model(cold[:, :shared], use_cache=True).past_key_values
        model(cold[:, shared:], past_key_values=copy.deepcopy(prefix), use_cache=True)
        row["cold_first_token_s"] = round(time.perf_counter() - started, 3)
        row["cold_prompt_tokens"] = int(cold.shape[1])
        started = time.perf_counter()
        model(cached[:, shared:], past_key_values=copy.deepcopy(prefix), use_cache=True)
        row["cached_first_token_s"] = round(time.perf_counter() - started, 3)
        row["cached_prompt_tokens"], row["cached_cached_tokens"] = int(cached.shape[1]), shared
        prompt = tokenizer.apply_chat_template(
            [{"role": "user", "content": DECODE_PROMPT}],
            add_generation_prompt=True,
            return_tensors="pt",
        )
        prompt = prompt["input_ids"] if hasattr(prompt, "keys") else prompt
        model.generate(prompt, max_new_tokens=1, do_sample=False)
        started = time.perf_counter()
        out = model.generate(
            prompt, max_new_tokens=max_tokens, min_new_tokens=max_tokens, do_sample=False
        )
        elapsed = time.perf_counter() - started
    new = int(out.shape[1] - prompt.shape[1])
    row["decode_tokens_per_s"] = round(new / elapsed, 2)
    del model
    gc.collect()
    return row


# -- the run -----------------------------------------------------------------------------------


def ratios(rows: dict[str, dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for threads in (1, 2):
        before, after = (
            rows.get(f"transformers_0.5b_t{threads}"),
            rows.get(f"llamacpp_0.5b_t{threads}"),
        )
        if before and after:
            out[f"llamacpp_vs_transformers_0.5b_t{threads}"] = {
                "decode_speedup": round(
                    after["decode_tokens_per_s"] / before["decode_tokens_per_s"], 2
                ),
                "cold_first_token_speedup": round(
                    before["cold_first_token_s"] / after["cold_first_token_s"], 2
                ),
                "cached_first_token_speedup": round(
                    before["cached_first_token_s"] / after["cached_first_token_s"], 2
                ),
                "load_speedup": round(before["load_s"] / after["load_s"], 2),
            }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("var/bench/llm.json"))
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--eval-file", type=Path, default=Path("../shared/evals/queries.jsonl"))
    parser.add_argument("--skip-transformers", action="store_true")
    parser.add_argument("--skip-tools", action="store_true")
    args = parser.parse_args(argv)
    settings = AppSettings.from_serve_config("serve_config.yaml")
    cache = settings.model_cache_dir
    result: dict[str, Any] = {
        "created_at": datetime.now(UTC).isoformat(),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_avg_at_start": os.getloadavg()[0],
        },
        "default_model": settings.llm.model,
        "default_threads": settings.llm.threads,
        "rows": {},
    }
    rows = result["rows"]
    plan: list[tuple[str, Any]] = []
    for threads in (1, 2):
        if not args.skip_transformers:
            plan.append(
                (
                    f"transformers_0.5b_t{threads}",
                    lambda t=threads: transformers_row(cache, t, args.max_tokens),
                )
            )
        for name, model in (("0.5b", SMALL), ("1.5b", LARGE)):
            plan.append(
                (
                    f"llamacpp_{name}_t{threads}",
                    lambda m=model, t=threads: llamacpp_row(cache, m, t, args.max_tokens, True),
                )
            )
    for label, run in plan:
        rows[label] = run()
        print(label, rows[label], flush=True)
    result["ratios"] = ratios(rows)
    if not args.skip_tools and args.eval_file.is_file():
        threads = settings.llm.threads
        result["tool_selection"] = {
            name: tool_selection(cache, model, threads, args.eval_file)
            for name, model in (("0.5b", SMALL), ("1.5b", LARGE))
        }
        for name, sel in result["tool_selection"].items():
            print(
                f"tool selection {name}: {sel['right']}/{sel['questions']} right, "
                f"first tool {sel['first_tool_right']}/{sel['questions']}",
                flush=True,
            )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(f"results: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
