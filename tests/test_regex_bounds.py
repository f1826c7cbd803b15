"""Every Python text-processing regex of the project stays fast on hostile text.

Model answers, tool arguments, uploaded documents and request fields reach these patterns;
a pattern that backtracks exponentially (or cubically) on some input is a denial of service
waiting for the input. Two checks:

- each Python pattern (crow/, models/, jobs/, indexes/, deployments/): the compiled patterns
  among the modules' globals (and their classes' attributes), found by importing every
  module, and the inline ``re.*(pattern, ...)`` calls, found in the source; a new regex is
  covered without touching this file. Each runs over every match position of adversarial
  texts of ~10k characters (tests/regex_support.py) within a time bound per text;
- a static check: no Python pattern nests a variable quantifier inside another (`(a+)+`,
  `(\\s*x)*`), the shape behind exponential backtracking, unless listed in NESTED_OK with
  why it is fine.

The dashboard's regexes: tests/dashboard/test_js_regex_bounds.py."""

from __future__ import annotations

import ast
import importlib
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from re import _constants as sre_c  # type: ignore[attr-defined]
from re import _parser as sre_parse  # type: ignore[attr-defined]

import pytest

from tests.regex_support import BOUND_S, SIZE, adversarial, watch
from tests.repo import ROOT

PACKAGES = ("crow", "models", "jobs", "indexes", "deployments")
RE_FUNCS = {
    "compile",
    "match",
    "search",
    "fullmatch",
    "sub",
    "subn",
    "split",
    "findall",
    "finditer",
}


# Patterns (by their source text) that nest a variable quantifier but cannot backtrack
# badly, with why. Keep it short: prefer rewriting the pattern.
NESTED_OK: dict[str, str] = {}


# Patterns only ever applied to texts of a bounded length: that length, the time bound at it,
# and why. They get adversarial texts of that length instead of SIZE. Prefer rewriting them.
BOUNDED: dict[str, tuple[int, float, str]] = {}


def _modules() -> list[tuple[str, Path]]:
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found.append((name, path))
    return found


def _inline_calls(path: Path) -> Iterator[ast.Call]:
    """`re.<func>(...)` calls whose pattern the module-globals scan may not see."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "re"
            and node.func.attr in RE_FUNCS
            and node.args
        ):
            yield node


def _flags_arg(call: ast.Call) -> ast.expr | None:
    """The flags argument of a re call: keyword, or positional (its place depends on func)."""
    for kw in call.keywords:
        if kw.arg == "flags":
            return kw.value
    place = {
        "compile": 1,
        "match": 2,
        "search": 2,
        "fullmatch": 2,
        "findall": 2,
        "finditer": 2,
        "split": 3,
        "sub": 4,
        "subn": 4,
    }[call.func.attr]
    return call.args[place] if len(call.args) > place else None


def _python_patterns() -> dict[str, re.Pattern[str]]:
    """Every pattern, keyed by where it was found (the first place, for duplicates)."""
    patterns: dict[str, re.Pattern[str]] = {}
    seen: set[tuple[str, int]] = set()

    def add(where: str, pattern: re.Pattern[str]) -> None:
        if isinstance(pattern.pattern, str) and (pattern.pattern, pattern.flags) not in seen:
            seen.add((pattern.pattern, pattern.flags))
            patterns[where] = pattern

    for name, path in _modules():
        module = importlib.import_module(name)
        for attr, value in sorted(vars(module).items()):
            if isinstance(value, re.Pattern):
                add(f"{name}.{attr}", value)
            elif isinstance(value, type) and value.__module__ == name:
                for cattr, cvalue in sorted(vars(value).items()):
                    if isinstance(cvalue, re.Pattern):
                        add(f"{name}.{attr}.{cattr}", cvalue)
        for call in _inline_calls(path):
            where = f"{path.relative_to(ROOT)}:{call.lineno}"
            namespace = dict(vars(module))
            try:
                source = eval(compile(ast.Expression(call.args[0]), where, "eval"), namespace)
                flags_node = _flags_arg(call)
                flags = (
                    eval(compile(ast.Expression(flags_node), where, "eval"), namespace)
                    if flags_node is not None
                    else 0
                )
            except Exception as exc:  # a pattern built from local values
                raise AssertionError(
                    f"{where}: the pattern of this re.{call.func.attr} call is not a constant "
                    f"({exc!r}); make it a module-level re.compile so it can be checked"
                ) from None
            if isinstance(source, re.Pattern):
                add(where, source)
            elif isinstance(source, str):
                add(where, re.compile(source, flags))
    return patterns


PY_PATTERNS = _python_patterns()


# A child process times one pattern over the texts, printing "[i, seconds]" per text, so a
# pattern that never finishes is stopped by the watchdog instead of hanging the test.
_PY_RUNNER = """
import json, re, sys, time
source, flags, specs, bound = json.load(sys.stdin)
pattern = re.compile(source, flags)
for i, (prefix, unit, times, suffix) in enumerate(specs):
    text = prefix + unit * times + suffix
    took = float("inf")
    for _ in range(2):  # a second try only past the bound, in case of a hiccup
        started = time.perf_counter()
        for _ in pattern.finditer(text):  # every start position, as search/sub/findall try
            pass
        took = min(took, time.perf_counter() - started)
        if took <= bound:
            break
    print(json.dumps([i, took]), flush=True)
"""


def test_the_python_patterns_are_found():
    """The collection works: it sees module-level, class-level and inline patterns."""
    wheres = set(PY_PATTERNS)
    assert "crow.data.timewords._SPAN" in wheres and "models.toolparse._TAG" in wheres
    assert any(w.startswith("models/toolparse.py:") for w in wheres)  # re.sub in _tidy
    assert len(PY_PATTERNS) >= 30


@pytest.mark.parametrize("where", sorted(PY_PATTERNS))
def test_python_pattern_is_fast_on_adversarial_text(where):
    pattern = PY_PATTERNS[where]
    size, bound_s, _ = BOUNDED.get(where, (SIZE, BOUND_S, ""))
    specs = adversarial(pattern.pattern, size)
    payload = [pattern.pattern, pattern.flags, specs, bound_s]
    slow = watch([sys.executable, "-c", _PY_RUNNER], payload, specs, bound_s)
    assert not slow, f"{where} /{pattern.pattern}/ is slow:\n" + "\n".join(slow[:5])


_REPEATS = {sre_c.MAX_REPEAT, sre_c.MIN_REPEAT}


def _repeats(items) -> Iterator[tuple[int, int, object]]:
    """(min, max, body) of every backtracking repeat in a parsed pattern, outermost first."""
    for op, av in items:
        if op in _REPEATS:
            low, high, body = av
            yield low, high, body
            yield from _repeats(body)
        elif op is sre_c.SUBPATTERN:
            yield from _repeats(av[-1])
        elif op is sre_c.BRANCH:
            for branch in av[1]:
                yield from _repeats(branch)
        elif op in (sre_c.ASSERT, sre_c.ASSERT_NOT):
            yield from _repeats(av[1])
        elif op is sre_c.GROUPREF_EXISTS:
            for branch in av[1:]:
                if branch is not None:
                    yield from _repeats(branch)


def _nested_quantifiers(pattern: re.Pattern[str]) -> list[str]:
    """The repeats (max > 1) whose body holds a variable repeat (min != max)."""
    found = []
    for low, high, body in _repeats(sre_parse.parse(pattern.pattern, pattern.flags)):
        if high > 1 and any(ilow != ihigh for ilow, ihigh, _ in _repeats(body)):
            found.append(f"{{{low},{'' if high == sre_c.MAXREPEAT else high}}} over {body}")
    return found


def test_the_static_check_sees_nesting():
    for bad in (r"(a+)+", r"(\s*x)*", r"(?:\s*\[\d+\].*\n?)+", r"(?:(?:ab?)|c){2,}"):
        assert _nested_quantifiers(re.compile(bad)), bad
    for fine in (r"(?:,\d{3})+", r"a+b*", r"(?:ab)+", r"(?>a+)+", r"(?:a)?", r"(\s*:)?"):
        assert not _nested_quantifiers(re.compile(fine)), fine


def test_no_python_pattern_nests_variable_quantifiers():
    flagged = {
        where: nested
        for where, pattern in PY_PATTERNS.items()
        if (nested := _nested_quantifiers(pattern)) and pattern.pattern not in NESTED_OK
    }
    assert not flagged, (
        "nested quantifiers (rewrite, or list in NESTED_OK with why they are fine):\n"
        + "\n".join(f"{where}: {PY_PATTERNS[where].pattern!r}" for where in flagged)
    )
    live = {pattern.pattern for pattern in PY_PATTERNS.values()}
    assert set(NESTED_OK) <= live, "NESTED_OK lists patterns no module has any more"
    assert set(BOUNDED) <= set(PY_PATTERNS), "BOUNDED lists patterns no module has any more"
