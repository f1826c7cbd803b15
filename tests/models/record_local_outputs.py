"""Record raw outputs of the real local model as tool-parsing fixtures (run by hand).

    HF_HUB_OFFLINE=1 .venv/bin/python -m tests.models.record_local_outputs var/models

Writes tests/fixtures/local_model_outputs/<name>.json and prints load/speed numbers.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

from models.local import LocalChatModel, LocalModelConfig
from models.messages import Message, ModelParams
from models.testing import CROW_TEST_SYSTEM_PROMPT
from tests.models.tools_fixture import TOOLS

OUT = Path(__file__).resolve().parents[1] / "fixtures" / "local_model_outputs"

# Prompt wording is our own (never taken from the evaluation queries).
PROMPTS = {
    "greeting": "Hello there, how are you today?",
    "count_social": "Count all the social channel interactions from March 2024.",
    "products_popular": "Look up rain jackets, sorted by popularity.",
    "interactions_sizing": "List web store interactions where shoppers complained about sizing.",
    "patterns_anomaly": "Are there any anomalies in foot traffic since 2024-05-01?",
    "org_values": "What are the company's core values?",
    "multi_count_and_search": "Count web interactions and also search feedback about prices.",
}


async def main(cache_dir: str) -> None:
    model = LocalChatModel(LocalModelConfig(cache_dir=Path(cache_dir)))
    started = time.monotonic()
    await asyncio.to_thread(model.load)
    print(f"load_s={time.monotonic() - started:.1f}")
    OUT.mkdir(parents=True, exist_ok=True)
    params = ModelParams(max_tokens=160, timeout_s=300)
    for name, prompt in PROMPTS.items():
        messages = [Message.system(CROW_TEST_SYSTEM_PROMPT), Message.user(prompt)]
        raw = await model.raw_completion(messages, TOOLS, params)
        stats = model.last_stats
        assert stats is not None
        print(
            f"{name}: prompt={stats.prompt_tokens} out={stats.completion_tokens} "
            f"ttft={stats.first_token_s:.2f}s total={stats.total_s:.2f}s "
            f"tok/s={stats.tokens_per_s:.2f}"
        )
        record = {
            "model": model.config.source.filename,
            "system_prompt": CROW_TEST_SYSTEM_PROMPT,
            "generation": {"temperature": 0.0, "max_tokens": 160},
            "user": prompt,
            "tools": [t.name for t in TOOLS],
            "raw_output": raw,
        }
        (OUT / f"{name}.json").write_text(json.dumps(record, indent=2) + "\n")
    model.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "var/models"))
