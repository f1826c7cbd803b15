"""Every operation of the OpenAPI document, fuzzed with schemathesis (a short run; the full one
with 100 examples per operation is `make fuzz`): no server error, no raised exception, no
undocumented status, no response outside its schema."""

from __future__ import annotations

# Loaded (and assertion-rewritten: schemathesis is a pytest plugin) at collection, not in
# the test: compiled there, after a thousand other tests, CPython 3.11.7 once failed with
# "SystemError: AST constructor recursion depth mismatch" (CPython gh-106905).
import schemathesis.specs.openapi.schemas  # noqa: F401

from tests.fuzzing import fuzz, fuzz_app

EXAMPLES = 12  # per operation: ~400 requests, ~10 s here
BUDGET_S = 240.0


def test_fuzzing_every_operation_finds_nothing(tmp_path):
    with fuzz_app(tmp_path / "var") as (app, headers):
        report = fuzz(app, headers, examples=EXAMPLES, budget_s=BUDGET_S)
    assert report.operations >= 30
    assert report.requests >= report.operations * 5  # the budget didn't cut the run short
    assert report.failures == []
    # the run got past the guard and the validation into the routes
    assert report.statuses.get("200", 0) + report.statuses.get("201", 0) > report.requests / 4
