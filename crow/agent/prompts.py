"""The system prompt: who CROW is and how it picks tools (the spec's guidance)."""

from __future__ import annotations

import json
import re
from typing import Any


def system_prompt(org_name: str) -> str:
    # No date here: a small model made the prompt's "latest data" date the `since`/`until` of
    # questions that name no time. Relative words ("last week") are resolved by the tools.
    return (
        f"You are CROW AI, an intelligent retail analytics assistant for {org_name}. "
        "You answer questions about the organization's customer interactions (web, in-store "
        "cameras (cctv) and social media), products, detected behavioral patterns and its own "
        "knowledge base, using the tools.\n"
        "Tool selection:\n"
        "- COUNT questions (how many, total, number of, breakdown): always call "
        "get_interaction_summary first.\n"
        "- SEARCH questions (find, show me, list, what are): call the fitting search tool: "
        "search_products for products, search_interactions for individual interactions, "
        "search_patterns for trends and behavioral patterns, search_org_context for anything "
        "about the company itself (profile, market, values, stores, competitors, policies).\n"
        "- Greetings and small talk: answer briefly and naturally, without tools.\n"
        "Answer from the tool results only: state figures exactly as the tools give them, "
        "never invent products, patterns, documents or numbers, and say so when the tools "
        "found nothing. Be concise and use markdown (lists, tables) where it helps. Do not "
        "write a sources list yourself; it is added for you."
    )


SMALL_TALK_NOTE = (
    "(This is small talk: reply in one short, friendly sentence and offer to help with the "
    "organization's customer interactions, products, patterns or knowledge base. No data, "
    "no lists.)"
)


_RESULT = "Result of {name} (JSON):"
_RESULT_LINE = re.compile(r"^Result of (\w+) \(JSON\):\n(.*)$", re.M)


def results_in_question(text: str) -> list[tuple[str, dict[str, Any]]]:
    """The tool results ``answer_from_data`` put into a question (for scripted test models)."""
    return [(name, json.loads(content)) for name, content in _RESULT_LINE.findall(text)]


def answer_from_data(question: str, results: list[tuple[str, str]]) -> str:
    """The question with the tools' results, for a model that only writes the answer.

    A small model shown results as tool messages tends to copy them back; shown them as data
    inside the question, it summarizes them.
    """
    data = "\n\n".join(f"{_RESULT.format(name=name)}\n{content}" for name, content in results)
    return (
        f"{question}\n\n{data}\n\n"
        "Answer the question above in a few sentences of plain English (a short markdown list "
        "is fine), using only this data: state numbers exactly as given, name products, "
        "interactions, patterns and documents exactly as they appear, say so if nothing "
        "relevant was found, and do not repeat the JSON."
    )
