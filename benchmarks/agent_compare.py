"""Ask CROW's loop and a pydantic-ai peer, side by side on the same questions, in one run.

    python -m benchmarks.agent_compare [jobs.eval's options: --eval-file, --org, --out, ...]
                                       [--peer [--baseline]]

``make eval`` runs this CLI on each evaluation file. Without ``--peer`` it evaluates Ask CROW
alone, as ``python -m jobs.eval`` does (the same result file and table).

Each question goes to Ask CROW's loop and then to the peer (benchmarks/peer.py) before the
next one, so both see the same machine load and the same model instance; both are graded by
jobs.eval's code. With ``baseline=True`` a third agent joins: Ask CROW's loop with the
small-model aids off (``agent.guidance: none``: no routing hint), the "before" of the
answer-quality work, measured in the same run. ``compare`` returns::

    {"agents": [...], "askcrow": {"rows", "summary"}, "peer": {...}, ["baseline": {...}],
     "model", "peer_framework", "peer_config", "org", "eval_file"}

``text_table`` and ``markdown_table`` lay the two summaries out per kind of question.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from dataclasses import asdict
from typing import Any

from tqdm import tqdm

from benchmarks.peer import PeerAgent, PeerAnswer, PeerConfig, framework_version, serve_model
from crow.app import LocalApp
from crow.chat.agent.context import ToolContext
from jobs.eval import (
    ANSWER_TIMEOUT_S,
    configured,
    crow_agent,
    evaluate_ask_crow,
    evaluate_question,
    prepare_all,
    progress_line,
    real_models,
    write_results,
)
from jobs.eval import build_parser as eval_parser
from jobs.grading import COLUMNS, aligned, summarize
from models.chat import ChatModel
from models.messages import Message

AGENTS = ("askcrow", "peer")
AIDS_OFF = {"guidance": "none"}


async def compare(
    model: ChatModel,
    questions: list[dict[str, Any]],
    app: LocalApp,
    org_id: str,
    *,
    progress: bool = True,
    eval_file: str | None = None,
    baseline: bool = False,
    answer_timeout_s: float = ANSWER_TIMEOUT_S,
) -> dict[str, Any]:
    settings = app.settings
    envs = prepare_all(app, questions, org_id, answer_timeout_s=answer_timeout_s)
    crow = crow_agent(model, settings)
    agents = (*AGENTS, "baseline") if baseline else AGENTS
    runners = {"askcrow": crow.run}
    if baseline:
        off = settings.model_copy(update={"agent": settings.agent.model_copy(update=AIDS_OFF)})
        runners["baseline"] = crow_agent(model, off).run
    config = PeerConfig.from_settings(settings, max_tokens=crow.config.max_tokens)
    rows: dict[str, list[dict[str, Any]]] = {name: [] for name in agents}
    with serve_model(model, config) as base_url:
        peer = PeerAgent(base_url, config)
        answers: list[PeerAnswer] = []

        async def ask_peer(messages: list[Message], ctx: ToolContext) -> PeerAnswer:
            answers.append(await peer.run(messages, ctx))
            return answers[-1]

        runners["peer"] = ask_peer
        with tqdm(
            total=len(questions) * len(agents), desc="compare", unit="answer", disable=not progress
        ) as bar:
            for n, question in enumerate(questions, start=1):
                for name in agents:
                    answers.clear()
                    env = envs[question.get("org", org_id)]
                    rows[name].append(await evaluate_question(runners[name], question, env))
                    if name == "peer" and answers:  # none when it ran out of time
                        answer = answers[-1]
                        rows[name][-1].update(requests=answer.requests, trace=answer.trace)
                    if progress:
                        bar.write(progress_line(n, len(questions), rows[name][-1], f"{name:<9}"))
                    bar.update()
    return {
        "agents": list(agents),
        **{name: {"rows": rows[name], "summary": summarize(rows[name])} for name in agents},
        "model": settings.llm.model,
        "peer_framework": framework_version(),
        "peer_config": asdict(config),
        "org": org_id,
        "eval_file": eval_file,
    }


def _agents(result: dict[str, Any]) -> list[str]:
    return result.get("agents") or list(AGENTS)


def _cells(result: dict[str, Any], kind: str) -> list[str]:
    summaries = [result[name]["summary"][kind] for name in _agents(result)]
    cells = [kind, str(summaries[0]["n"])]
    for _, key, fmt in COLUMNS:
        values = ["-" if s[key] is None else fmt.format(s[key]) for s in summaries]
        cells.append(" / ".join(values))
    return [*cells, str(result["peer"]["summary"][kind]["errors"])]


def _legend(result: dict[str, Any]) -> str:
    names = {
        "askcrow": "Ask CROW",
        "peer": f"{result['peer_framework']} peer",
        "baseline": "Ask CROW, hints off",
    }
    return " / ".join(names[a] for a in _agents(result))


def _header() -> list[str]:
    return ["kind", "n", *(h for h, _, _ in COLUMNS), "peer errors"]


def text_table(result: dict[str, Any]) -> str:
    """Per kind: Ask CROW / peer in each cell."""
    rows = [_header()] + [_cells(result, kind) for kind in result["askcrow"]["summary"]]
    return f"{_legend(result)}, model {result['model']}\n" + aligned(rows)


def markdown_table(result: dict[str, Any]) -> str:
    """The comparison as a markdown table (each cell: one value per agent), with a caption."""
    header = _header()
    lines = [
        f"Same questions, model `{result['model']}` and tools, one run; each cell: "
        f"{_legend(result)}.",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|",
    ]
    lines += [
        "| " + " | ".join(_cells(result, kind)) + " |" for kind in result["askcrow"]["summary"]
    ]
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    """jobs.eval's options, and the agents to compare Ask CROW with."""
    parser = eval_parser()
    parser.description = f"{__doc__}\n{parser.description}"
    parser.add_argument(
        "--peer",
        action="store_true",
        help="compare with a pydantic-ai agent on the same questions, model and tools "
        "(benchmarks/peer.py; needs the dev extra)",
    )
    parser.add_argument(
        "--baseline",
        action="store_true",
        help="with --peer: also Ask CROW with its hints off (agent.guidance: none), "
        "the 'before' of the answer-quality work",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    settings, questions = configured(args, parser)
    model, app = real_models(settings)
    if not args.peer:
        write_results(args.out, *evaluate_ask_crow(args, questions, model, app))
        return 0
    result = asyncio.run(
        compare(
            model,
            questions,
            app,
            args.org,
            eval_file=str(args.eval_file),
            baseline=args.baseline,
            answer_timeout_s=args.answer_timeout,
        )
    )
    write_results(args.out, result, text_table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
