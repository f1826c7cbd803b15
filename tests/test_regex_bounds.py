"""Every text-processing regex of the project stays fast on hostile text.

Model answers, tool arguments, uploaded documents and request fields reach these patterns;
a pattern that backtracks exponentially (or cubically) on some input is a denial of service
waiting for the input. Three checks:

- each Python pattern (crow/, models/, jobs/, indexes/, deployments/): the compiled patterns
  among the modules' globals (and their classes' attributes), found by importing every
  module, and the inline ``re.*(pattern, ...)`` calls, found in the source; a new regex is
  covered without touching this file. Each runs over every match position of adversarial
  texts of ~10k characters (long runs of spaces, of newlines, of each character and word
  the pattern names, of "[1] x" lines, mixes) within a time bound per text;
- the same for the regex literals of dashboard/static/*.js, run in Node (or, without
  Node, in Debian's Chromium through Playwright, one browser start);
- a static check: no Python pattern nests a variable quantifier inside another (`(a+)+`,
  `(\\s*x)*`), the shape behind exponential backtracking, unless listed in NESTED_OK with
  why it is fine.
"""

from __future__ import annotations

import ast
import importlib
import json
import os
import re
import select
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from re import _constants as sre_c  # type: ignore[attr-defined]
from re import _parser as sre_parse  # type: ignore[attr-defined]

import pytest

from tests.repo import ROOT

PACKAGES = ("crow", "models", "jobs", "indexes", "deployments")
STATIC = ROOT / "dashboard" / "static"
CHROMIUM = Path("/usr/bin/chromium")

SIZE = 10_000  # characters of each adversarial text
BOUND_S = 0.5  # seconds one pattern may take over one such text (linear ones take ~1 ms)

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

# Regexes the dashboard builds at run time (`new RegExp(...)`), per file: how many places
# build one, and every (source, flags) they can make, tested like the literals. A new
# `new RegExp` fails the test until it is listed here.
JS_DYNAMIC: dict[str, tuple[int, list[tuple[str, str]]]] = {
    # the closing fence of a ``` or ~~~ block: FENCE's first group, nothing else
    "markdown.js": (1, [(r"^\s{0,3}```\s*$", ""), (r"^\s{0,3}~~~\s*$", "")]),
}


# -- finding the Python patterns -------------------------------------------------------------


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


# -- adversarial texts ----------------------------------------------------------------------

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


def _describe(spec: Spec) -> str:
    prefix, unit, times, suffix = spec
    return f"{prefix!r} + {unit!r} * {times} + {suffix!r}"


# -- Python ---------------------------------------------------------------------------------


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


def _watch(
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
                        stuck = _describe(specs[done + 1])
                        slow.append(f"over {deadline_s:g}s (stopped) on {stuck}")
                    if not chunk:
                        break
                    pending += chunk
                    continue
                line, pending = pending.split(b"\n", 1)
                done, took = json.loads(line)
                if took > bound_s:
                    slow.append(f"{took:.2f}s on {_describe(specs[done])}")
        finally:
            proc.kill()
    assert slow or done == len(specs) - 1, f"the runner stopped early: {command[0]}"
    return slow


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
    slow = _watch([sys.executable, "-c", _PY_RUNNER], payload, specs, bound_s)
    assert not slow, f"{where} /{pattern.pattern}/ is slow:\n" + "\n".join(slow[:5])


# -- static check: nested quantifiers --------------------------------------------------------

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
        # ATOMIC_GROUP and POSSESSIVE_REPEAT never backtrack into their body


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


# -- JavaScript ------------------------------------------------------------------------------

_JS_KEYWORDS_BEFORE_REGEX = {
    "return",
    "typeof",
    "case",
    "do",
    "else",
    "in",
    "of",
    "new",
    "delete",
    "void",
    "throw",
    "yield",
    "await",
    "instanceof",
}


def js_regex_literals(source: str) -> list[tuple[int, str, str]]:
    """(line, body, flags) of each regex literal of a JavaScript source.

    A small tokenizer: skips comments, strings and template text (code inside ${...} is
    scanned), and takes a `/` for a regex where an expression may start.
    """
    found: list[tuple[int, str, str]] = []
    i, n = 0, len(source)
    prev = ""  # the last significant token: punctuation, a word, or "value"
    braces: list[str] = []  # for each open "{": "code", or "template" for a ${
    while i < n:
        c = source[i]
        if c.isspace():
            i += 1
        elif source.startswith("//", i):
            end = source.find("\n", i)
            i = n if end < 0 else end
        elif source.startswith("/*", i):
            i = source.index("*/", i + 2) + 2
        elif c in "'\"":
            i = _skip_string(source, i, c)
            prev = "value"
        elif c == "`" or (c == "}" and braces and braces[-1] == "template"):
            if c == "}":
                braces.pop()
            i, opened = _skip_template(source, i + 1)
            if opened:
                braces.append("template")
                prev = "("
            else:
                prev = "value"
        elif c == "/":
            if prev in _JS_KEYWORDS_BEFORE_REGEX or (prev and prev in "(,=:[!&|?{};+-*%<>~^"):
                start = i
                i, body, flags = _read_regex(source, i)
                found.append((source.count("\n", 0, start) + 1, body, flags))
                prev = "value"
            else:
                i += 1
                prev = "/"
        elif c.isalnum() or c in "_$":
            j = i
            while j < n and (source[j].isalnum() or source[j] in "_$"):
                j += 1
            word = source[i:j]
            prev = word if word in _JS_KEYWORDS_BEFORE_REGEX else "value"
            i = j
        else:
            if c == "{":
                braces.append("code")
            elif c == "}" and braces:
                braces.pop()
            prev = "value" if c in ")]" else c
            i += 1
    return found


def _skip_string(source: str, i: int, quote: str) -> int:
    i += 1
    while source[i] != quote:
        i += 2 if source[i] == "\\" else 1
    return i + 1


def _skip_template(source: str, i: int) -> tuple[int, bool]:
    """From inside a template's text: (the index past its end or past a "${", opened)."""
    while True:
        if source[i] == "\\":
            i += 2
        elif source[i] == "`":
            return i + 1, False
        elif source.startswith("${", i):
            return i + 2, True
        else:
            i += 1


def _read_regex(source: str, i: int) -> tuple[int, str, str]:
    j, in_class = i + 1, False
    while True:
        c = source[j]
        if c == "\\":
            j += 2
            continue
        if c == "\n":
            raise AssertionError(f"unterminated regex literal at {i}: {source[i : i + 40]!r}")
        if c == "[":
            in_class = True
        elif c == "]":
            in_class = False
        elif c == "/" and not in_class:
            break
        j += 1
    body = source[i + 1 : j]
    k = j + 1
    while k < len(source) and source[k].isalpha():
        k += 1
    return k, body, source[j + 1 : k]


def _js_regexes() -> dict[str, tuple[str, str]]:
    """Every regex of dashboard/static/*.js: "file:line" -> (source, flags)."""
    found: dict[str, tuple[str, str]] = {}
    for path in sorted(STATIC.glob("*.js")):
        text = path.read_text()
        for line, body, flags in js_regex_literals(text):
            found[f"{path.name}:{line}:/{body}/{flags}"] = (body, flags)
        sites, dynamic = JS_DYNAMIC.get(path.name, (0, []))
        assert text.count("new RegExp(") == sites, (
            f"{path.name} builds regexes at run time: list what they can be in JS_DYNAMIC"
        )
        for k, (body, flags) in enumerate(dynamic):
            found[f"{path.name}:dynamic{k}:/{body}/{flags}"] = (body, flags)
    return found


# Times one regex, made global, over the texts with String.replace (which tries every start
# position), calling emit(i, seconds) per text; in Node (a watched child process per regex)
# or in a page's Web Worker (terminated when past the deadline).
_JS_TIMER = """
function timeRegex(source, flags, specs, boundS, emit) {
  const re = new RegExp(source, flags.includes("g") ? flags : flags + "g");
  specs.forEach(([prefix, unit, times, suffix], i) => {
    const text = prefix + unit.repeat(times) + suffix;
    let took = Infinity;
    for (let attempt = 0; attempt < 2 && took > boundS; attempt++) {
      const started = performance.now();
      text.replace(re, "");
      took = Math.min(took, (performance.now() - started) / 1000);
    }
    emit(i, took);
  });
}
"""
_NODE_RUNNER = (
    _JS_TIMER
    + """
const [source, flags, specs, boundS] = JSON.parse(require("fs").readFileSync(0, "utf8"));
timeRegex(source, flags, specs, boundS, (i, took) => console.log(JSON.stringify([i, took])));
"""
)
# In the page: each regex in its own worker; a text past the deadline ends the worker.
_PAGE_RUNNER = """
async ([timer, payload, boundS, deadlineS]) => {
  const code = timer + "onmessage = (e) => timeRegex(...e.data, boundS, (i, t) => postMessage([i, t]));";
  const url = URL.createObjectURL(new Blob([`const boundS = ${boundS};` + code]));
  const results = {};
  for (const [key, [source, flags, specs]] of Object.entries(payload)) {
    results[key] = await new Promise((resolve) => {
      const times = [];
      const worker = new Worker(url);
      let watchdog = null;
      const arm = () => {
        clearTimeout(watchdog);
        watchdog = setTimeout(() => { worker.terminate(); resolve(times); }, deadlineS * 1000);
      };
      worker.onmessage = (e) => {
        times.push(e.data[1]);
        if (times.length === specs.length) { clearTimeout(watchdog); worker.terminate(); resolve(times); }
        else arm();
      };
      arm();
      worker.postMessage([source, flags, specs]);
    });
  }
  return results;
}
"""


def _slow_in_page(times: list[float], specs: list[Spec]) -> list[str]:
    slow = [
        f"{t:.2f}s on {_describe(spec)}"
        for t, spec in zip(times, specs, strict=False)
        if t > BOUND_S
    ]
    if len(times) < len(specs):
        slow.append(f"over {2 * BOUND_S + 1:g}s (stopped) on {_describe(specs[len(times)])}")
    return slow[:3]


def _slow_js(regexes: dict[str, tuple[str, str]]) -> dict[str, list[str]]:
    """The slow texts of each regex, in Node, or else in Chromium (one browser start)."""
    specs = {key: adversarial(source) for key, (source, _) in regexes.items()}
    node = shutil.which("node")
    if node and os.environ.get("REGEX_TEST_JS") != "chromium":
        return {
            key: _watch(
                [node, "-e", _NODE_RUNNER], [source, flags, specs[key], BOUND_S], specs[key]
            )
            for key, (source, flags) in regexes.items()
        }
    if not CHROMIUM.exists():
        pytest.skip("neither node nor /usr/bin/chromium is installed")
    sync_api = pytest.importorskip("playwright.sync_api")
    payload = {key: [source, flags, specs[key]] for key, (source, flags) in regexes.items()}
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=["--no-sandbox", "--disable-gpu"]
        )
        try:
            page = browser.new_page()
            times = page.evaluate(_PAGE_RUNNER, [_JS_TIMER, payload, BOUND_S, 2 * BOUND_S + 1])
        finally:
            browser.close()
    return {key: _slow_in_page(times[key], specs[key]) for key in regexes}


def test_the_js_regexes_are_found():
    keys = list(_js_regexes())
    assert sum(k.startswith("markdown.js:") for k in keys) >= 15
    assert any(k.startswith("app.js:") for k in keys)
    assert js_regex_literals("a = b / c / d; e = /x\\/[/]y/gi; f(`t${/z/.source}`, /w/)") == [
        (1, "x\\/[/]y", "gi"),
        (1, "z", ""),
        (1, "w", ""),
    ]


def test_js_regexes_are_fast_on_adversarial_text():
    slow = {key: texts for key, texts in _slow_js(_js_regexes()).items() if texts}
    assert not slow, "slow dashboard regexes:\n" + "\n".join(
        f"{key}: {'; '.join(texts)}" for key, texts in slow.items()
    )


# The heading pattern markdown.js used before: cubic on a long run of spaces. Its rewrite
# (matchHeading, plain trimming) must read every line as it did; lines short enough for the
# old pattern to be quick, from the characters that matter to it.
_OLD_HEADING = r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$"
_HEADING_CHECK = """
import { matchHeading } from "./markdown.mjs";
const OLD = new RegExp(process.argv[2]);
const alphabet = [" ", " ", "\\t", "#", "#", "#", "a", "b", "\\u00a0", "\\u2028", "\\ufeff", "-"];
let seed = 12345;
const next = (n) => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed % n; };
const differ = [];
for (let k = 0; k < 50000 && differ.length < 5; k++) {
  let line = "";
  for (let n = next(16); n > 0; n--) line += alphabet[next(alphabet.length)];
  const old = OLD.exec(line);
  const want = JSON.stringify(old ? [old[1].length, old[2]] : null);
  const got = JSON.stringify(matchHeading(line));
  if (want !== got) differ.push([line, want, got]);
}
console.log(JSON.stringify(differ));
"""


def test_markdown_headings_read_as_with_the_former_pattern(tmp_path):
    node = shutil.which("node")
    if not node:
        pytest.skip("node is not installed")
    source = (STATIC / "markdown.js").read_text()
    assert "function matchHeading(" in source
    (tmp_path / "markdown.mjs").write_text(source + "\nexport { matchHeading };\n")
    (tmp_path / "check.mjs").write_text(_HEADING_CHECK)
    done = subprocess.run(
        [node, str(tmp_path / "check.mjs"), _OLD_HEADING],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert json.loads(done.stdout) == []


# TABLE_SEP before: quadratic over a run of spaces (two \s* either side of an optional |).
_OLD_TABLE_SEP = r"^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$"
_SAME_TEST = """
const [OLD, NEW] = [new RegExp(process.argv[1]), new RegExp(process.argv[2])];
const tokens = [" ", "|", ":", "--", "-", "---", "\\t", "x", "\\u2028", "| ", " |"];
let seed = 7;
const next = (n) => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed % n; };
const differ = [];
let matched = 0;
for (let k = 0; k < 200000 && differ.length < 5; k++) {
  let line = "";
  for (let n = next(14); n > 0; n--) line += tokens[next(tokens.length)];
  if (OLD.test(line)) matched += 1;
  if (OLD.test(line) !== NEW.test(line)) differ.push(line);
}
console.log(JSON.stringify([differ, matched]));
"""


def test_markdown_table_rules_read_as_with_the_former_pattern():
    node = shutil.which("node")
    if not node:
        pytest.skip("node is not installed")
    line = next(
        line
        for line in (STATIC / "markdown.js").read_text().splitlines()
        if line.startswith("const TABLE_SEP = ")
    )
    [(_, source, flags)] = js_regex_literals(line)
    assert not flags
    done = subprocess.run(
        [node, "-e", _SAME_TEST, _OLD_TABLE_SEP, source],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    differ, matched = json.loads(done.stdout)
    assert differ == [] and matched > 1000
