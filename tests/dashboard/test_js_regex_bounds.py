"""The regex literals of dashboard/static/*.js stay fast on hostile text: the adversarial
texts of tests/regex_support.py, run in Node (or, without Node, in Debian's Chromium through
Playwright, one browser start); and the rewritten markdown patterns read every line as the
former ones did."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.regex_support import BOUND_S, Spec, adversarial, describe, watch
from tests.repo import ROOT

STATIC = ROOT / "dashboard" / "static"
CHROMIUM = Path("/usr/bin/chromium")


# Regexes the dashboard builds at run time (`new RegExp(...)`), per file: how many places
# build one, and every (source, flags) they can make, tested like the literals. A new
# `new RegExp` fails the test until it is listed here.
JS_DYNAMIC: dict[str, tuple[int, list[tuple[str, str]]]] = {
    # the closing fence of a ``` or ~~~ block: FENCE's first group, nothing else
    "markdown.js": (1, [(r"^\s{0,3}```\s*$", ""), (r"^\s{0,3}~~~\s*$", "")]),
}


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
        f"{t:.2f}s on {describe(spec)}"
        for t, spec in zip(times, specs, strict=False)
        if t > BOUND_S
    ]
    if len(times) < len(specs):
        slow.append(f"over {2 * BOUND_S + 1:g}s (stopped) on {describe(specs[len(times)])}")
    return slow[:3]


def _slow_js(regexes: dict[str, tuple[str, str]]) -> dict[str, list[str]]:
    """The slow texts of each regex, in Node, or else in Chromium (one browser start)."""
    specs = {key: adversarial(source) for key, (source, _) in regexes.items()}
    node = shutil.which("node")
    if node and os.environ.get("REGEX_TEST_JS") != "chromium":
        return {
            key: watch([node, "-e", _NODE_RUNNER], [source, flags, specs[key], BOUND_S], specs[key])
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
