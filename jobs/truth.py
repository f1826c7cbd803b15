"""What a correct answer states, from the organization's data, and whether an answer states it.

A question of an evaluation file may carry a ``truth``:

- ``{"sql": "SELECT ...", "match": "all" | "any"}``: a DuckDB query over the org's Parquet
  data (views ``interactions``, ``products``, ``patterns``, ``documents`` and ``anchor``,
  one row ``t``: the latest interaction, which relative time words count back from). The
  answer must state every value of the result (``all``) or one of its rows (``any``), in its
  text: a name in a footnote only is not stated.
- ``{"facts": ["60 days", ["20%", "20 percent"]]}``: knowledge-base facts the answer must
  state; a list inside is alternatives.
- ``{"cites": {"type": "interaction", "detail": "social"}}``: the answer footnotes a source
  of that kind (what a search answer rests on).
- ``{"no_tools": true}``: small talk, answered without any tool.

A truth may carry more than one of ``sql``, ``facts`` and ``cites`` (a question that asks two
things): the answer must state each.

The truth is computed from the data the agent reads, never from the agent's own tools.
"""

from __future__ import annotations

import math
import re
from typing import Any

import duckdb

from crow.chat.agent.sources import with_footnotes
from crow.data.lake import DataLake

TABLES = ("interactions", "products", "patterns", "documents")
_NUMBER = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?")


def expected(truth: dict[str, Any], lake: DataLake, org_id: str) -> list[list[Any]] | None:
    """The rows an ``sql`` truth names (None for other kinds of truth)."""
    if "sql" not in truth:
        return None
    with duckdb.connect() as con:
        for table in TABLES:
            if (glob := lake.parquet_glob(org_id, table)) is not None:
                path = glob.replace("'", "''")
                con.execute(f"CREATE VIEW {table} AS SELECT * FROM read_parquet('{path}')")
        con.execute("CREATE VIEW anchor AS SELECT max(occurred_at) AS t FROM interactions")
        return [list(row) for row in con.execute(truth["sql"]).fetchall()]


def judge(truth: dict[str, Any], rows: list[list[Any]] | None, answer: Any) -> bool:
    """Whether the answer states what the truth says a correct answer states: every kind of
    truth it carries (a question that asks two things may carry ``sql`` and ``facts``)."""
    called = {step["name"] for step in answer.tool_steps}
    said = stated_text(answer.content)
    if truth.get("no_tools"):
        return not called and bool(answer.content.strip())
    checks = []
    if "cites" in truth:
        want = truth["cites"]
        checks.append(
            any(
                s.type == want["type"] and want.get("detail") in (None, s.detail)
                for s in answer.sources
            )
        )
    if "facts" in truth:
        checks.append(
            all(
                any(_states(said, alt) for alt in (f if isinstance(f, list) else [f]))
                for f in truth["facts"]
            )
        )
    if "sql" in truth:
        checks.append(_states_rows(truth, rows, said))
    return bool(checks) and all(checks)


def stated_text(content: str) -> str:
    """What an answer says: its text without the footnotes appended to it. A footnote names a
    source the answer rests on (the first product of a ranking, a pattern's title), not what
    the answer states: "web had 6,991 interactions" above a footnote naming the top beverage
    does not name it."""
    return with_footnotes(content, ())


def _states_rows(truth: dict[str, Any], rows: list[list[Any]] | None, content: str) -> bool:
    if not rows:  # a query with no result: nothing an answer could state
        return False
    matches = [all(_states(content, value) for value in row) for row in rows]
    return any(matches) if truth.get("match") == "any" else all(matches)


def _states(text: str, value: Any) -> bool:
    """The answer states the value: a number as a figure (10,068 / 10068 / 14.95), text
    anywhere in it, case and spacing aside."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return _norm(str(value)) in _norm(text)
    for figure in _NUMBER.findall(text):
        number = float(figure.replace(",", ""))
        if math.isclose(number, float(value), abs_tol=0.005):
            return True
    return False


def _norm(text: str) -> str:
    return " ".join(text.casefold().replace("’", "'").split())
