"""Time to the first answer token as the dashboard sees it, through a running app.

    python -m benchmarks.first_token [--url http://127.0.0.1:8000] [--org acme-outdoor]
                                     [--key KEY] [--out F]

Asks each question in a new chat session over the streaming route the dashboard uses
(POST /api/v1/chat/sessions/{id}/messages/stream) and records, per question, the seconds to
the first `text_delta` event, to `done`, and the number of `text_delta` events. The first
question of the run also pays for a cold model (nothing of the prompt cached); it is reported
apart from the rest. Writes JSON (default var/bench/first_token.json).

The API wants a key of the org: --key, else $ASK_CROW_API_KEY, else the org's newest key in
var/demo-keys.txt (the demo keys `make run` writes).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

# Single-tool questions in our own wording (not the evaluation questions).
QUESTIONS = [
    "Which tents are the most popular right now?",
    "What does our knowledge base say about returning a bike?",
    "How many social media interactions did we get?",
    "Find shoppers who asked about waterproof boots.",
    "Which behavioral patterns were detected in the stores?",
    "Show me our best selling backpacks.",
]


KEY_ENV = "ASK_CROW_API_KEY"
DEMO_KEYS = Path("var/demo-keys.txt")  # "<org>  <key>  <url>" per line (jobs.keys demo)


def api_key(org: str, given: str | None, demo_keys: Path = DEMO_KEYS) -> str:
    """The key to send: `given`, else $ASK_CROW_API_KEY, else `org`'s last demo key."""
    if key := given or os.environ.get(KEY_ENV):
        return key
    if demo_keys.is_file():
        keys = [
            fields[1]
            for line in demo_keys.read_text().splitlines()
            if len(fields := line.split()) >= 2 and fields[0] == org
        ]
        if keys:
            return keys[-1]
    raise SystemExit(
        f"no API key for {org}: pass --key, set {KEY_ENV}, or run `make run` "
        f"(it writes {demo_keys})"
    )


def ask(client: httpx.Client, org: str, question: str) -> dict[str, Any]:
    headers = {"X-Organization-Id": org}  # the key is the client's (Authorization)
    created = client.post("/api/v1/chat/sessions", headers=headers)
    created.raise_for_status()  # 401: no such key; 403: a key of another org
    session = created.json()["id"]
    started = time.perf_counter()
    first: float | None = None
    deltas, event, error = 0, "", None
    url = f"/api/v1/chat/sessions/{session}/messages/stream"
    with client.stream("POST", url, headers=headers, json={"content": question}) as response:
        if response.status_code != 200:  # e.g. 429 rate_limited: the error shape, no events
            response.read()
            error = response.json().get("error")
        for line in response.iter_lines():
            if line.startswith("event: "):
                event = line[7:]
                if event == "text_delta":
                    deltas += 1
                    first = first if first is not None else time.perf_counter() - started
            elif line.startswith("data: ") and event == "error":
                error = json.loads(line[6:])
    total = time.perf_counter() - started
    return {
        "question": question,
        "first_token_s": None if first is None else round(first, 2),
        "done_s": round(total, 2),
        "text_deltas": deltas,
        "error": error,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--org", default="acme-outdoor")
    parser.add_argument(
        "--key",
        help=f"an API key of the org (default: ${KEY_ENV}, or the org's key in {DEMO_KEYS})",
    )
    parser.add_argument("--label", default="", help="what is being measured (e.g. a commit)")
    parser.add_argument("--out", type=Path, default=Path("var/bench/first_token.json"))
    args = parser.parse_args(argv)
    auth = {"Authorization": f"Bearer {api_key(args.org, args.key)}"}
    with httpx.Client(base_url=args.url, headers=auth, timeout=600) as client:
        rows = []
        for question in QUESTIONS:
            rows.append(ask(client, args.org, question))
            print(rows[-1], flush=True)
    warm = [r["first_token_s"] for r in rows[1:] if r["first_token_s"] is not None]
    result = {
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "label": args.label,
        "url": args.url,
        "org": args.org,
        "rows": rows,
        "first_question_first_token_s": rows[0]["first_token_s"],
        "p50_first_token_s": round(statistics.median(warm), 2) if warm else None,
        "p50_done_s": round(statistics.median(r["done_s"] for r in rows[1:]), 2),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(
        f"p50 first token {result['p50_first_token_s']} s, p50 done {result['p50_done_s']} s "
        f"(first question: {result['first_question_first_token_s']} s) -> {args.out}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
