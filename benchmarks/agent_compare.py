"""Ask CROW's loop and a pydantic-ai peer, side by side on the same questions, in one run.

Each question goes to Ask CROW's loop and then to the peer (benchmarks/peer.py) before the
next one, so both see the same machine load and the same model instance; both are graded by
jobs.eval's code. ``compare`` returns::

    {"askcrow": {"rows", "summary"}, "peer": {"rows", "summary"}, "model", "peer_framework",
     "peer_config", "org", "eval_file"}

``text_table`` and ``markdown_table`` lay the two summaries out per kind of question.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from benchmarks.peer import PeerAgent, PeerAnswer, PeerConfig, framework_version, serve_model
from crow.agent.context import ToolContext
from crow.settings import AppSettings
from jobs.eval import crow_agent, evaluate_question, prepare, progress_line, summarize
from models.chat import ChatModel
from models.messages import Message

AGENTS = ("askcrow", "peer")


async def compare(
    model: ChatModel, questions: list[dict[str, Any]], settings: AppSettings, org_id: str,
    *, embedder: Any, progress: bool = True, eval_file: str | None = None,
) -> dict[str, Any]:  # fmt: skip
    env = prepare(settings, org_id, embedder=embedder)
    crow = crow_agent(model, settings)
    config = PeerConfig.from_settings(settings, max_tokens=crow.config.max_tokens)
    rows: dict[str, list[dict[str, Any]]] = {name: [] for name in AGENTS}
    with serve_model(model, config) as base_url:
        peer = PeerAgent(base_url, config)
        answers: list[PeerAnswer] = []

        async def ask_peer(messages: list[Message], ctx: ToolContext) -> PeerAnswer:
            answers.append(await peer.run(messages, ctx))
            return answers[-1]

        for n, question in enumerate(questions, start=1):
            rows["askcrow"].append(await evaluate_question(crow.run, question, env))
            rows["peer"].append(await evaluate_question(ask_peer, question, env))
            answer = answers[-1]
            rows["peer"][-1].update(requests=answer.requests, attempted=answer.attempted)
            if progress:
                for name in AGENTS:
                    print(
                        progress_line(n, len(questions), rows[name][-1], f"{name:<8}"), flush=True
                    )
    return {
        **{name: {"rows": rows[name], "summary": summarize(rows[name])} for name in AGENTS},
        "model": settings.llm.model, "peer_framework": framework_version(),
        "peer_config": asdict(config), "org": org_id, "eval_file": eval_file,
    }  # fmt: skip


_COLUMNS = (  # header, summary key, format
    ("tools", "tool_accuracy", "{:.2f}"),
    ("grounded", "grounding", "{:.2f}"),
    ("bad notes", "invalid_footnotes", "{}"),
    ("p50 s", "latency_p50_s", "{:.1f}"),
    ("p99 s", "latency_p99_s", "{:.1f}"),
)


def _cells(result: dict[str, Any], kind: str) -> list[str]:
    crow, peer = result["askcrow"]["summary"][kind], result["peer"]["summary"][kind]
    cells = [kind, str(crow["n"])]
    for _, key, fmt in _COLUMNS:
        pair = ["-" if s[key] is None else fmt.format(s[key]) for s in (crow, peer)]
        cells.append(" / ".join(pair))
    return [*cells, str(peer["errors"])]


def _header() -> list[str]:
    return ["kind", "n", *(h for h, _, _ in _COLUMNS), "peer errors"]


def text_table(result: dict[str, Any]) -> str:
    """Per kind: Ask CROW / peer in each cell."""
    rows = [_header()] + [_cells(result, kind) for kind in result["askcrow"]["summary"]]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
             for r in rows]  # fmt: skip
    return f"Ask CROW / {result['peer_framework']} peer, model {result['model']}\n" + "\n".join(
        lines
    )


def markdown_table(result: dict[str, Any]) -> str:
    """The comparison as a markdown table (each cell: Ask CROW / peer), with a caption line."""
    header = _header()
    lines = [
        f"Ask CROW's loop / {result['peer_framework']} `Agent` (peer), same questions, model "
        f"`{result['model']}` and tools; each cell: Ask CROW / peer.",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|",
    ]
    lines += [
        "| " + " | ".join(_cells(result, kind)) + " |" for kind in result["askcrow"]["summary"]
    ]
    return "\n".join(lines)
