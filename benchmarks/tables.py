"""Markdown tables and number formats of the benchmark report."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def fmt(value: Any, pattern: str) -> str:
    """`value` in `pattern` ("{:.2f}"), "-" for None."""
    return "-" if value is None else pattern.format(value)


def join(levels: Iterable[dict[str, Any]], key: str, pattern: str) -> str:
    """Each level's `key`, formatted, joined by " / "."""
    return " / ".join(fmt(lv[key], pattern) for lv in levels)


def table(header: tuple[str, ...], rows: Iterable[tuple[str, ...]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += [
        "| " + " | ".join(c.replace("|", "/").replace("\n", " ") for c in r) + " |" for r in rows
    ]
    return "\n".join(lines)
