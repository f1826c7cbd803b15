"""Which of our packages may import which: dependencies point one way.

    models, indexes   the core's leaves: import none of our other packages (nor each other)
    crow              the core: models and indexes
    deployments       Ray Serve deployments: the core
    jobs              Ray Jobs and CLIs: deployments and the core
    testing           harnesses (a private local Serve app): the production packages
    benchmarks        make bench: testing and the production packages
    tests             anything

Inside crow the concepts are layered too (CROW_LAYERS): the foundations (ids, settings,
metrics, auth), then data and the chat store, retrieval, chat (service, Q&A, agent), the
HTTP API, and the composition root crow.app on top; a module imports its own layer or
those below. The core (crow, models, indexes) never imports ray; no production package (crow, models,
indexes, deployments, jobs) imports tests, benchmarks or a testing module (the testing
package, models.testing, models.testing_embed), nor Ray's private API. Test modules take
helpers from conftest.py or helper modules, never from another test module. Every import
counts, at module level or inside a function (a lazy import is still a dependency), and so
do ``if TYPE_CHECKING:`` ones. Imports by name at run time (``importlib``, a factory string
such as ``llm.factory``) are configuration, not dependencies, and are not checked here.
"""

from __future__ import annotations

import ast
import functools
import tomllib
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

import pytest

from tests.repo import ROOT

CORE = frozenset({"crow", "models", "indexes"})
PRODUCTION = frozenset({*CORE, "deployments", "jobs"})
MAY_IMPORT: dict[str, frozenset[str]] = {
    "models": frozenset(),
    "indexes": frozenset(),
    "crow": frozenset({"models", "indexes"}),
    "deployments": CORE,
    "jobs": frozenset({"deployments", *CORE}),
    "testing": PRODUCTION,
    "benchmarks": frozenset({"testing", *PRODUCTION}),
    "tests": frozenset({"benchmarks", "testing", *PRODUCTION}),
}
"""Each of our top-level packages, and the others it may import."""
OURS = frozenset(MAY_IMPORT)
CROW_LAYERS: tuple[frozenset[str], ...] = (
    frozenset(
        {
            "crow.ids",
            "crow.settings",
            "crow.settings_env",
            "crow.config_source",
            "crow.metrics",
            "crow.background",
        }
        | {"crow.auth"}
    ),
    frozenset({"crow.data", "crow.store"}),
    frozenset({"crow.retrieval", "crow.facades"}),
    frozenset({"crow.chat", "crow.services"}),
    frozenset({"crow.api"}),
    frozenset({"crow.app"}),
)
"""crow's concepts (a module, or a subpackage with everything in it), lowest first."""
TESTING_MODULES = ("testing", "models.testing", "models.testing_embed")
"""Harness modules: tests and benchmarks import them, production code never does."""


@dataclass(frozen=True)
class Import:
    path: Path  # relative to the repository root
    line: int
    importer: str  # the importing module, e.g. "jobs.eval"
    name: str  # what it imports: a module, or module.attribute for `from m import a`
    origin: str = ""  # `m` of `from m import a`, relative ones resolved; "" for `import m`

    @property
    def source(self) -> str:
        return self.importer.split(".")[0]

    @property
    def target(self) -> str:
        return self.name.split(".")[0]


def module_name(path: Path) -> str:
    parts = path.with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_in(source: str, path: Path) -> list[Import]:
    """Every import statement of a module, at any depth (functions, classes, if-blocks),
    relative ones resolved against the module's package."""
    importer = module_name(path)
    package = importer.split(".") if path.name == "__init__.py" else importer.split(".")[:-1]
    found: list[Import] = []
    for node in ast.walk(ast.parse(source, filename=str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package[: len(package) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            names = [f"{base}.{alias.name}" if alias.name != "*" else base for alias in node.names]
        else:
            continue
        origin = base if isinstance(node, ast.ImportFrom) else ""
        found += [Import(path, node.lineno, importer, name, origin) for name in names]
    return found


@functools.cache
def all_imports() -> tuple[Import, ...]:
    found: list[Import] = []
    for package in sorted(OURS):
        for file in sorted((ROOT / package).rglob("*.py")):
            relative = file.relative_to(ROOT)
            found += imports_in(file.read_text(), relative)
    return tuple(found)


def fail_on(bad: list[Import], why: str) -> None:
    """Fail, listing each offending import statement as file:line (one line's names merged)."""
    if not bad:
        return
    by_line: dict[tuple[Path, int], list[Import]] = {}
    for i in bad:
        by_line.setdefault((i.path, i.line), []).append(i)
    listed = []
    for (path, line), found in by_line.items():
        origin = found[0].origin
        if origin:
            text = f"from {origin} import " + ", ".join(
                i.name.removeprefix(f"{origin}.") for i in found
            )
        else:
            text = "import " + ", ".join(i.name for i in found)
        listed.append(f"  {path}:{line}: {text}")
    pytest.fail(f"{why}:\n" + "\n".join(listed), pytrace=False)


def is_testing_module(name: str) -> bool:
    return any(name == t or name.startswith(f"{t}.") for t in TESTING_MODULES)


def test_the_walker_sees_lazy_and_relative_imports():
    source = (
        "import os\nfrom benchmarks import peer\n"
        "def f():\n    from .eval import main\n    import tests.conftest\n"
    )
    found = imports_in(source, Path("jobs/x.py"))
    assert [(i.line, i.name) for i in found] == [
        (1, "os"),
        (2, "benchmarks.peer"),
        (4, "jobs.eval.main"),
        (5, "tests.conftest"),
    ]
    assert found[2].origin == "jobs.eval" and found[2].target == "jobs"


def top_level_packages() -> set[str]:
    return {p.parent.name for p in ROOT.glob("*/__init__.py")}


def test_every_package_of_ours_has_a_rule():
    packages = top_level_packages()
    assert packages <= OURS, f"no import rule for {sorted(packages - OURS)}: add it to MAY_IMPORT"
    assert {"crow", "models", "indexes", "deployments", "jobs", "benchmarks", "tests"} <= packages
    assert all_imports(), "the walker found no imports"


def test_each_package_imports_only_the_packages_below_it():
    bad = [
        i
        for i in all_imports()
        if i.target in OURS and i.target != i.source and i.target not in MAY_IMPORT[i.source]
    ]
    fail_on(bad, "imports against the layering (see this module's docstring)")


def crow_layer(name: str) -> int | None:
    """The CROW_LAYERS index of a crow module or of the module an imported name lives in."""
    parts = name.split(".")
    for n in range(len(parts), 1, -1):
        prefix = ".".join(parts[:n])
        for level, concepts in enumerate(CROW_LAYERS):
            if prefix in concepts:
                return level
    return None


def test_every_crow_module_has_a_layer():
    modules = {i.importer for i in all_imports() if i.source == "crow"}
    unplaced = sorted(m for m in modules if m != "crow" and crow_layer(m) is None)
    assert not unplaced, f"add these to CROW_LAYERS: {unplaced}"


def test_crow_modules_import_their_own_layer_or_below():
    bad = [
        i
        for i in all_imports()
        if i.source == "crow"
        and i.target == "crow"
        and (low := crow_layer(i.importer)) is not None
        and (high := crow_layer(i.name)) is not None
        and high > low
    ]
    fail_on(bad, "crow imports against its layers (CROW_LAYERS, lowest first)")


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = [start]
    while todo:
        for nxt in graph.get(todo.pop(), set()) - seen:
            seen.add(nxt)
            todo.append(nxt)
    return seen


def test_no_import_cycles_between_our_packages():
    edges = [i for i in all_imports() if i.target in OURS and i.target != i.source]
    graph: dict[str, set[str]] = {}
    for i in edges:
        graph.setdefault(i.source, set()).add(i.target)
    # an edge a -> b is on a cycle when a is reachable from b
    bad = [i for i in edges if i.source in _reachable(graph, i.target)]
    fail_on(bad, "imports on a package-level cycle")


def test_production_code_never_imports_tests_benchmarks_or_harnesses():
    bad = [
        i
        for i in all_imports()
        if i.source in PRODUCTION
        and not is_testing_module(i.importer)
        and (i.target in {"tests", "benchmarks"} or is_testing_module(i.name))
    ]
    fail_on(bad, "production code importing tests, benchmarks or a testing module")


def test_the_core_never_imports_ray():
    bad = [i for i in all_imports() if i.source in CORE and i.target == "ray"]
    fail_on(bad, "the core (crow, models, indexes) importing ray")


def test_production_code_uses_no_private_ray_api():
    bad = [
        i
        for i in all_imports()
        if i.source in PRODUCTION and i.target == "ray" and "_private" in i.name.split(".")
    ]
    fail_on(bad, "production code on Ray's private API (harnesses belong in testing/)")


def test_test_modules_take_helpers_from_conftest_or_helper_modules():
    def test_module(name: str) -> str | None:
        parts = name.split(".")
        for n, part in enumerate(parts):
            if part.startswith("test_"):
                return ".".join(parts[: n + 1])
        return None

    bad = [
        i
        for i in all_imports()
        if i.target == "tests" and (m := test_module(i.name)) and m != i.importer
    ]
    fail_on(
        bad,
        "imports from another test module (helpers belong in conftest.py or a helper "
        "module such as tests/serve_support.py)",
    )


def test_the_distribution_ships_the_production_packages_only():
    """pyproject's [tool.setuptools.packages.find] (fnmatch patterns, as setuptools reads them)
    picks the production packages, never tests, benchmarks or testing."""
    find = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    include, exclude = find["find"].get("include", ["*"]), find["find"].get("exclude", [])
    shipped = {
        p
        for p in top_level_packages()
        if any(fnmatchcase(p, pat) for pat in include)
        and not any(fnmatchcase(p, pat) for pat in exclude)
    }
    assert shipped == PRODUCTION
