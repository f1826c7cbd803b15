"""Adversarial texts for the regex bound tests, and the runner that times a pattern over them
(tests/test_regex_bounds.py for Python, tests/dashboard/test_js_regex_bounds.py for the
dashboard's JavaScript)."""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
from collections.abc import Iterator
from re import _constants as sre_c  # type: ignore[attr-defined]
from re import _parser as sre_parse  # type: ignore[attr-defined]

SIZE = 10_000  # characters of each adversarial text
BOUND_S = 0.5  # seconds one pattern may take over one such text (linear ones take ~1 ms)
Spec = tuple[str, str, int, str]  # prefix, unit, times, suffix: prefix + unit * times + suffix
_BASE_CHARS = " \t\n\r\x0b\u00a0\u2028a1_.,:;*#-|`~[](){}<>\"'\\/!?%"
_BREAK = "\x00"  # ends most texts: the match fails at the very end, after all the work
_STRUCTURED: list[Spec] = [
    ("answer\n\nSources:\n", "[1] x\n", 1600, "closing line"),
    ("answer\n\n**References**:\n", " [12] y \n\n", 1000, "z"),
    ("", "[1] x\n", 1600, "closing line"),
    ("", "\n[1] x", 1600, "\nclosing"),
    ("", "\n[1]", 2500, "\n\x00"),
    ("", " \n", 5000, "x"),
    ("", "\n \n", 3300, "x"),
    ("#", " ", SIZE, "x"),
    ("# a", " ", SIZE, "#x"),
    ("", "# ", 5000, "x"),
    ("-", " ", SIZE, "x"),
    ("", "- ", 5000, "x"),
    ("|", " ", SIZE, "x"),
    ("", "|--", 3300, "x"),
    ("", "| :-- ", 1600, "x"),
    ("", "**a ", 2500, ""),
    ("", "__a ", 2500, ""),
    ("", "~~a ", 2500, ""),
    ("", "*a ", 3300, ""),
    ("", "_a ", 3300, ""),
    ("", "[a](", 2500, ""),
    ("", "[a", 5000, ""),
    ("", "`a", 5000, ""),
    ("", "<tool_call>", 900, ""),
    ("", "<tool_call>{", 800, ""),
    ("", "```json\n{", 1000, ""),
    ("", '{"name": "x", ', 700, ""),
    ("", "{", SIZE, ""),
    ("", "1,", 5000, "x"),
    ("", "1,000", 2000, ".5x"),
    ("", "1", SIZE, "x"),
    ("", "1 ", 5000, "x"),
    ("---\n", "a: b\n", 2000, ""),
    ("", "a ", 5000, "!"),
    ("", "ab-", 3300, "!"),
    ("", "\r\n", 5000, "x"),
]


def _words(source: str) -> set[str]:
    """The words a pattern names ('last', 'how many'), and its runs of literal characters
    ('<tool_call>', '```', 'Sources') where Python's parser reads it (JS mostly parses too)."""
    words = set(re.findall(r"(?<!\\)[A-Za-z][A-Za-z_' -]*[A-Za-z]", source))
    try:
        parsed = sre_parse.parse(source)
    except (re.error, OverflowError):
        return words
    return words | {run for run in _literal_runs(parsed) if len(run) > 1}


def _literal_runs(items) -> Iterator[str]:
    run = ""
    for op, av in items:
        if op is sre_c.LITERAL:
            run += chr(av)
            continue
        yield run
        run = ""
        if op in (sre_c.MAX_REPEAT, sre_c.MIN_REPEAT):
            yield from _literal_runs(av[2])
        elif op is sre_c.SUBPATTERN:
            yield from _literal_runs(av[-1])
        elif op is sre_c.BRANCH:
            for branch in av[1]:
                yield from _literal_runs(branch)
    yield run


def adversarial(source: str, size: int = SIZE) -> list[Spec]:
    """Texts of about `size` characters built from what `source` (a pattern) repeats."""
    if size != SIZE:
        return [_scaled(spec, size) for spec in adversarial(source)]
    chars = sorted(set(_BASE_CHARS) | {c for c in source if c.isprintable()})
    specs: list[Spec] = []
    for c in chars:
        specs += [
            ("", c, SIZE, _BREAK),
            ("", c + " ", SIZE // 2, _BREAK),
            ("", c + "\n", SIZE // 2, _BREAK),
            ("", c + "a", SIZE // 2, _BREAK),
        ]
    for word in sorted(_words(source))[:80]:
        times = SIZE // (len(word) + 1)
        specs += [
            (word, " ", SIZE, _BREAK),
            ("", word + " ", times, _BREAK),
            ("", word + "\n", times, _BREAK),
            ("", "\n" + word + ":", times, "\n"),
        ]
    return specs + _STRUCTURED


def _scaled(spec: Spec, size: int) -> Spec:
    prefix, unit, times, suffix = spec
    return prefix, unit, max(1, times * size // SIZE), suffix


def describe(spec: Spec) -> str:
    prefix, unit, times, suffix = spec
    return f"{prefix!r} + {unit!r} * {times} + {suffix!r}"


def watch(
    command: list[str], payload: object, specs: list[Spec], bound_s: float = BOUND_S
) -> list[str]:
    """Run `command` (a runner) on `payload`; the texts it took over `bound_s` on (at most 3)."""
    slow: list[str] = []
    deadline_s = 2 * bound_s + 1.0  # two tries of one text, and the start of the process
    with subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps(payload).encode())
        proc.stdin.close()
        fd, pending, done = proc.stdout.fileno(), b"", -1
        try:
            while len(slow) < 3 and done < len(specs) - 1:
                if b"\n" not in pending:
                    ready, _, _ = select.select([fd], [], [], deadline_s)
                    chunk = os.read(fd, 1 << 16) if ready else None
                    if chunk is None:
                        stuck = describe(specs[done + 1])
                        slow.append(f"over {deadline_s:g}s (stopped) on {stuck}")
                    if not chunk:
                        break
                    pending += chunk
                    continue
                line, pending = pending.split(b"\n", 1)
                done, took = json.loads(line)
                if took > bound_s:
                    slow.append(f"{took:.2f}s on {describe(specs[done])}")
        finally:
            proc.kill()
    assert slow or done == len(specs) - 1, f"the runner stopped early: {command[0]}"
    return slow
