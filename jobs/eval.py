"""Evaluate the agent on a question file: tool selection, answer correctness, grounding,
fallbacks, latency.

    python -m jobs.eval [--eval-file ../shared/evals/queries.jsonl] [--org acme-outdoor]
                        [--out var/eval/results.json] [--limit N]

Each line: {"id", "query", "kind", "expect_tools": [...]} and optionally "org" (else
``--org``), "history" (earlier questions of the same chat, asked first; their answers stay
in the conversation) and "truth" (what a correct answer states, from the org's data:
jobs/truth.py). Tool selection: the set of tools the agent called equals ``expect_tools``
(greetings: no tool; a list of lists gives alternatives). Correctness: the answer states the
truth. Grounding: an answer that should state a count (its expected tools include the
summary) states a figure the summary tool returns, and every footnote points to a source a
tool returned. The files only measure: nothing here
feeds questions or answers back into prompts. This CLI evaluates Ask CROW alone; ``make eval``
runs ``python -m benchmarks.agent_compare`` (these options, plus ``--peer [--baseline]``), which
asks a pydantic-ai agent each question too, with the same model and tools, interleaved
(``--baseline``: and Ask CROW with its hints off), grading every agent with this module.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from crow.app import LocalApp, chat_model, open_local_app
from crow.chat.agent.config import AgentConfig
from crow.chat.agent.context import ToolContext
from crow.chat.agent.loop import Agent
from crow.chat.agent.prompts import opening
from crow.chat.agent.tools import TOOLS_BY_NAME
from crow.config_source import CONFIG_HELP, ConfigError, settings_from_config_arg
from crow.settings import AppSettings
from jobs import truth as truths
from jobs.grading import grade, load_questions, numbers_in, summarize, summary_table
from models.chat import ChatModel
from models.errors import ModelError
from models.messages import Message

DEFAULT_FILE = Path(__file__).resolve().parents[2] / "shared" / "evals" / "queries.jsonl"


ANSWER_TIMEOUT_S = 120.0
"""An answer that takes longer is graded as no answer (bounds an agent that loops)."""


@dataclass
class Unanswered:
    """The graded stand-in for an answer that never came."""

    error: str
    content: str = ""
    sources: list[Any] = field(default_factory=list)
    tool_steps: list[dict[str, Any]] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    fallback: str | None = None


@dataclass(frozen=True)
class EvalOrg:
    """One org of the app in this process: what every agent under test answers over."""

    app: LocalApp
    org_id: str
    answer_timeout_s: float = ANSWER_TIMEOUT_S

    @property
    def org_name(self) -> str:
        return self.app.org_name(self.org_id)

    def context(self) -> ToolContext:
        """A fresh per-question tool context, as the chat service builds one per request."""
        return self.app.tool_context(self.org_id)


def crow_agent(model: ChatModel, settings: AppSettings) -> Agent:
    """Ask CROW's loop, configured as the app configures it."""
    return Agent(model, AgentConfig.from_settings(settings))


Answerer = Callable[[list[Message], ToolContext], Awaitable[Any]]
"""An agent under test: (system + user messages, tool context) -> an answer with ``content``,
``tool_steps``, ``sources``, ``fallback`` and ``timings``."""


async def evaluate_question(
    answerer: Answerer, question: dict[str, Any], env: EvalOrg
) -> dict[str, Any]:
    """Ask one question the way the app does (after its history, if any), time the answer
    and grade it."""
    messages = opening(env.org_name)
    for earlier in question.get("history", []):  # the chat so far, answered by this agent
        messages.append(Message.user(earlier))
        messages.append(Message.assistant((await _ask(answerer, messages, env)).content))
    messages.append(Message.user(question["query"]))
    ctx = env.context()
    started = time.perf_counter()
    answer = await _ask(answerer, messages, env, ctx)
    answer.timings["total_s"] = round(time.perf_counter() - started, 3)
    summary = env.app.analytics.interaction_summary(env.org_id)
    rows = None
    if (truth := question.get("truth")) is not None:
        rows = truths.expected(truth, env.app.lake, env.org_id)
    row = grade(question, answer, summary["total"], rows)
    if row["grounded"] is False and row["error"] is None:
        # a channel's count is grounded too, and so is what the summary tool returned for the
        # filters the agent gave it ("last month", one channel)
        figures = set(summary["by_channel"].values()) | await _summary_figures(answer, ctx)
        row["grounded"] = bool(numbers_in(answer.content) & figures)
    return row


async def _ask(
    answerer: Answerer, messages: list[Message], env: EvalOrg, ctx: ToolContext | None = None
) -> Any:
    """The agent's answer, or what a user would get after the time limit or a model's error:
    nothing (one question's error is a miss, not the end of a 40-minute run)."""
    try:
        async with asyncio.timeout(env.answer_timeout_s):
            return await answerer(list(messages), ctx or env.context())
    except TimeoutError:  # a miss, whatever it had called
        return Unanswered(error=f"no answer within {env.answer_timeout_s:g}s")
    except ModelError as exc:
        return Unanswered(error=f"{type(exc).__name__}: {exc}"[:300])


def prepare_all(
    app: LocalApp,
    questions: list[dict[str, Any]],
    default_org: str,
    *,
    answer_timeout_s: float = ANSWER_TIMEOUT_S,
) -> dict[str, EvalOrg]:
    """Every organization the questions ask about, its missing indexes built first."""
    orgs = dict.fromkeys(q.get("org", default_org) for q in questions)
    for org in orgs:
        app.build_missing_indexes(org)
    return {org: EvalOrg(app, org, answer_timeout_s) for org in orgs}


async def _summary_figures(answer: Any, ctx: ToolContext) -> set[int]:
    """The figures get_interaction_summary returns for the arguments the agent called it with."""
    figures: set[object] = set()
    for step in answer.tool_steps:
        if step["name"] != "get_interaction_summary" or not step.get("ok", True):
            continue
        try:
            out = (await TOOLS_BY_NAME[step["name"]].invoke(step["arguments"], ctx)).content
        except Exception:  # arguments the tool refused: it returned no figure
            continue
        figures |= {out.get("total_interactions"), *out.get("by_channel", {}).values()}
    return {f for f in figures if isinstance(f, int)}


def progress_line(n: int, total: int, row: dict[str, Any], label: str = "") -> str:
    mark = "ok " if row["tools_ok"] else "MISS"
    mark += {True: " right", False: " WRONG", None: ""}[row.get("correct")]
    error = f" !! {row['error'][:80]}" if row.get("error") else ""
    return (
        f"[{n}/{total}] {label}{mark} {row['kind']:<8} {row['latency_s']:6.1f}s "
        f"{row['query'][:50]!r} -> {row['called']}{error}"
    )


async def evaluate(
    model: ChatModel,
    questions: list[dict[str, Any]],
    app: LocalApp,
    org_id: str,
    *,
    progress: bool = True,
    answer_timeout_s: float = ANSWER_TIMEOUT_S,
) -> dict[str, Any]:
    envs = prepare_all(app, questions, org_id, answer_timeout_s=answer_timeout_s)
    agent = crow_agent(model, app.settings)
    rows = []
    with tqdm(total=len(questions), desc="eval", unit="question", disable=not progress) as bar:
        for n, question in enumerate(questions, start=1):
            env = envs[question.get("org", org_id)]
            rows.append(await evaluate_question(agent.run, question, env))
            if progress:
                bar.write(progress_line(n, len(questions), rows[-1]))
            bar.update()
    return {"org": org_id, "rows": rows, "summary": summarize(rows)}


def real_models(settings: AppSettings) -> tuple[ChatModel, LocalApp]:
    """The configured chat model (loaded) and the app in this process with the configured
    embedder, as the app runs them."""
    return chat_model(settings), open_local_app(settings)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--eval-file", type=Path, default=DEFAULT_FILE)
    parser.add_argument("--org", default="acme-outdoor")
    parser.add_argument("--config", default="serve_config.yaml", help=CONFIG_HELP)
    parser.add_argument("--out", type=Path, default=Path("var/eval/results.json"))
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument(
        "--answer-timeout",
        type=float,
        default=ANSWER_TIMEOUT_S,
        help="seconds an agent gets per question; slower counts as no answer",
    )
    parser.add_argument(
        "--llm-url",
        default=None,
        help="evaluate the model an app serves: its OpenAI-compatible base URL "
        "(e.g. http://HOST:8000/v1); the model name comes from --config",
    )
    return parser


def configured(
    args: argparse.Namespace, parser: argparse.ArgumentParser
) -> tuple[AppSettings, list[dict[str, Any]]]:
    """The settings (--config, with --llm-url's model) and the questions (--eval-file, --limit)
    of a run; a configuration that does not load ends the CLI with its error."""
    try:
        settings = settings_from_config_arg(args.config)
    except ConfigError as exc:
        parser.error(str(exc))
    if args.llm_url:
        llm = settings.llm.model_copy(update={"backend": "openai", "base_url": args.llm_url})
        settings = settings.model_copy(update={"llm": llm})
    return settings, load_questions(args.eval_file)[: args.limit]


def evaluate_ask_crow(
    args: argparse.Namespace,
    questions: list[dict[str, Any]],
    model: ChatModel,
    app: LocalApp,
) -> tuple[dict[str, Any], str]:
    """Ask CROW alone on the questions: the result (naming its eval file) and its table."""
    result = asyncio.run(
        evaluate(
            model,
            questions,
            app,
            args.org,
            answer_timeout_s=args.answer_timeout,
        )
    )
    result["eval_file"] = str(args.eval_file)
    return result, summary_table(result["summary"])


def write_results(out: Path, result: dict[str, Any], table: str) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(f"\n{table}\n\nresults: {out}")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    settings, questions = configured(args, parser)
    model, app = real_models(settings)
    write_results(args.out, *evaluate_ask_crow(args, questions, model, app))
    return 0


if __name__ == "__main__":
    sys.exit(main())
