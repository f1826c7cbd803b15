"""The benchmarks' own questions, by type: a greeting, one tool, several tools."""

from __future__ import annotations

QUESTION_TYPES: tuple[str, ...] = ("greeting", "single_tool", "multi_tool")
QUESTIONS: dict[str, tuple[str, ...]] = {
    "greeting": ("Hello there!", "Good afternoon, how are you today?", "Hi, good morning!"),
    "single_tool": (
        "How many social media interactions did we get?",
        "How many interactions came through the web channel?",
        "How many interactions did we log in total?",
    ),
    "multi_tool": (
        "Which hiking products are most popular and what patterns involve them?",
        "Which camping gear do customers like best, and what trends show up around it?",
        "Which tents are most popular, and are there any patterns about tents?",
    ),
}
"""Written for the benchmarks (not taken from the evaluation file). Multi-tool questions ask
for products and patterns at once; whether a real model calls both is recorded per answer."""


def all_questions() -> list[tuple[str, str]]:
    """Every (type, question), type by type."""
    return [(kind, q) for kind in QUESTION_TYPES for q in QUESTIONS[kind]]
