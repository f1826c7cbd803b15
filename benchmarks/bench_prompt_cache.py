"""How much of an organization's first question the local model reads again, with the
organization named inside the system prompt (before the shared text) or after it.

    python -m benchmarks.bench_prompt_cache [--rounds 3] [--out var/bench/prompt_cache.json]

The prompt is the agent's first step as the CPU profile sends it: the system prompt with the
guidance's examples, the five tools (the chat template puts them after the system prompt),
the organization, the question. One llama.cpp slot, so the cache holds the last prompt only.
Each round asks one organization's question and then another organization's, in both
arrangements (their order alternating between rounds), with organization names no earlier
prompt held (llama.cpp also keeps earlier prompts in RAM, so an organization seen before is
cached either way: this is the first question of a new organization, or of one whose prompt
was evicted); for the second question it records the prompt tokens, the tokens reused from
the cache and the seconds to the first token.
Every figure comes from this one run (side by side). Writes JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from crow.app import chat_model
from crow.chat.agent.guidance import EXAMPLES, offered
from crow.chat.agent.prompts import organization_line, system_prompt
from crow.chat.agent.tools import TOOLS
from crow.settings import AppSettings, serve_config_args
from models.local import LocalChatModel
from models.messages import Message, ModelParams

# Our own wording, not the evaluation questions: (first org's, second org's)
PAIRS = [
    ("Which rain jackets sell best?", "How many store visits did we get last week?"),
    ("Any unusual spikes in site traffic?", "What does our policy say about refunds?"),
    ("Show me comments about hiking boots.", "Which dairy items are most popular?"),
]
ORGS = ("Acme Outdoor", "Fresh Mart")


def prompt(arrangement: str, org: str, question: str) -> list[Message]:
    """The first step's messages: the organization before the shared prompt ("inside", as
    before) or in a message of its own after it ("after", as the app sends it now)."""
    shared = f"{system_prompt()}\n{EXAMPLES}"
    line = organization_line(org)
    if arrangement == "inside":
        return [Message.system(f"{line}\n{shared}"), Message.user(question)]
    return [Message.system(shared), Message.system(line), Message.user(question)]


async def first_token(model: LocalChatModel, messages: list[Message]) -> dict[str, Any]:
    specs = offered([t.spec for t in TOOLS])
    params = ModelParams(max_tokens=1, temperature=0.0, timeout_s=600)
    await model.request(messages, specs, params)
    s = model.last_stats
    return {
        "prompt_tokens": s.prompt_tokens,
        "cached_tokens": s.cached_tokens,
        "read_tokens": s.prompt_tokens - s.cached_tokens,
        "first_token_s": round(s.total_s, 3),
    }


async def run(rounds: int) -> dict[str, Any]:
    settings = AppSettings.from_args(serve_config_args(Path("serve_config.yaml")))
    one_slot = settings.llm.model_copy(update={"slots": 1})  # the cache holds one prompt
    model = chat_model(settings.model_copy(update={"llm": one_slot}))
    assert isinstance(model, LocalChatModel), "the benchmark reads llama.cpp's cache figures"
    rows: list[dict[str, Any]] = []
    for r in range(rounds):
        first, second = PAIRS[r % len(PAIRS)]
        order = ("inside", "after") if r % 2 == 0 else ("after", "inside")
        for arrangement in order:
            # names no earlier prompt held: llama.cpp also keeps earlier prompts in RAM, so
            # an org seen before is cached either way; this is a new org (or one evicted)
            one, other = (f"{name} {r}-{arrangement}" for name in ORGS)
            await first_token(model, prompt(arrangement, one, first))
            row = await first_token(model, prompt(arrangement, other, second))
            rows.append({"round": r, "arrangement": arrangement, "question": second, **row})
            print(json.dumps(rows[-1]), flush=True)
    model.close()
    summary = {}
    for arrangement in ("inside", "after"):
        mine = [row for row in rows if row["arrangement"] == arrangement]
        summary[arrangement] = {
            key: statistics.median(row[key] for row in mine)
            for key in ("prompt_tokens", "cached_tokens", "read_tokens", "first_token_s")
        }
    inside, after = summary["inside"], summary["after"]
    return {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "model": one_slot.model,
        "rounds": rounds,
        "median": summary,
        "first_token_ratio_after_vs_inside": round(
            after["first_token_s"] / inside["first_token_s"], 3
        ),
        "rows": rows,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("var/bench/prompt_cache.json"))
    args = parser.parse_args()
    result = asyncio.run(run(args.rounds))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(json.dumps(result["median"], indent=2))
    print(f"first token, org named after / inside: x{result['first_token_ratio_after_vs_inside']}")


if __name__ == "__main__":
    main()
