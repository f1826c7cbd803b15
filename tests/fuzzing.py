"""Property-based fuzzing of every operation of the app's OpenAPI document (schemathesis).

Each operation gets `examples` generated requests, sent with an admin key to the in-process
app over the seeded demo data; a request fails when the app answers 5xx, raises, answers a
status its document doesn't declare, or answers a body that breaks the declared schema.

    python -m tests.fuzzing --examples 100 --out var/fuzz/report.json   # make fuzz

tests/test_fuzz.py runs the same with fewer examples inside `make test`'s time budget.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

# Fuzzing measures the API, not the limits: generous rates, no token quota.
FUZZ_SETTINGS = {
    "quotas": {
        "chat_per_minute": 1e6,
        "chat_burst": 10**6,
        "search_per_minute": 1e6,
        "search_burst": 10**6,
        "daily_tokens": 0,
    }
}


ORG = "acme-outdoor"


@dataclass
class FuzzReport:
    operations: int = 0
    requests: int = 0
    seconds: float = 0.0
    failures: list[str] = field(default_factory=list)
    statuses: dict[str, int] = field(default_factory=dict)
    per_operation: dict[str, int] = field(default_factory=dict)  # requests sent to each


@contextmanager
def fuzz_app(var: Path) -> Iterator[tuple[Any, dict[str, str]]]:
    """The app over the demo data (both orgs, indexed), a scripted model, and an admin key."""
    from crow.api.app import create_app
    from crow.settings import AppSettings
    from crow.store.chat_store import ChatStore
    from testing.rule_model import rule_model
    from tests.demo_env import build_demo_env

    demo = build_demo_env(var, interactions=300)
    demo.settings = AppSettings.from_args({"var_dir": str(var), **FUZZ_SETTINGS})
    store = ChatStore(demo.settings.chat_db_path)
    key = store.create_api_key(ORG, "admin", name="fuzz")["key"]
    model = rule_model()
    services = demo.services(model, store=store, index_control=True)
    try:
        yield create_app(services, chat_model=model), {"Authorization": f"Bearer {key}"}
    finally:
        deadline = time.monotonic() + 120  # the reindexes it started end before the store closes
        while services.indexer.busy and time.monotonic() < deadline:
            time.sleep(0.1)
        store.close()


def fuzz(
    app: Any, headers: dict[str, str], *, examples: int, budget_s: float, seed: int | None = None
) -> FuzzReport:
    """`examples` requests per operation, within `budget_s` seconds in all; the same requests
    every run, or those of `seed`."""
    import schemathesis
    from schemathesis.python.asgi import shutdown_lifespans

    report, started = FuzzReport(), time.monotonic()
    found: dict[tuple[str, ...], str] = {}
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    try:
        for result in schema.get_all_operations():
            report.operations += 1
            _fuzz_operation(result.ok(), headers, examples, started + budget_s, report, found, seed)
    finally:
        shutdown_lifespans()
    report.failures = sorted(found.values())
    report.seconds = round(time.monotonic() - started, 1)
    return report


def _fuzz_operation(
    operation: Any,
    headers: dict[str, str],
    examples: int,
    end: float,
    report: FuzzReport,
    found: dict[tuple[str, ...], str],
    seed: int | None,
) -> None:
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as seeded
    from schemathesis.checks import (
        not_a_server_error,
        response_schema_conformance,
        status_code_conformance,
    )

    checks = [not_a_server_error, status_code_conformance, response_schema_conformance]
    label = operation.label

    @settings(
        max_examples=examples,
        deadline=None,
        derandomize=seed is None,
        database=None,
        phases=[Phase.explicit, Phase.generate],
        print_blob=False,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy())
    def run(case: Any) -> None:
        if time.monotonic() > end:
            return
        report.requests += 1
        report.per_operation[label] = report.per_operation.get(label, 0) + 1
        # The key's own org where a request names one, so the routes' own logic is fuzzed
        # (naming other orgs: tests/crow/api/test_access_matrix.py).
        if case.path_parameters and "org_id" in case.path_parameters:
            case.path_parameters["org_id"] = ORG
        if case.headers is not None and "X-Organization-Id" in case.headers:
            case.headers["X-Organization-Id"] = ORG
        try:
            response = case.call(headers=headers, timeout=60)
            status = str(response.status_code)
            report.statuses[status] = report.statuses.get(status, 0) + 1
            case.validate_response(response, checks=checks)
        except (Exception, BaseExceptionGroup) as exc:  # failed checks, or the app raised
            for failure in getattr(exc, "exceptions", [exc]):
                title = getattr(failure, "title", type(failure).__name__)
                message = (str(getattr(failure, "message", "")) or str(failure)).strip()
                first = message.splitlines()[0] if message else ""
                found.setdefault((label, title, first), f"{label}: {title}: {first}")

    (run if seed is None else seeded(seed)(run))()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--examples", type=int, default=100, help="requests per operation")
    parser.add_argument("--budget-s", type=float, default=3600.0)
    parser.add_argument("--seed", type=int, help="other requests than the default run's")
    parser.add_argument("--out", type=Path, default=Path("var/fuzz/report.json"))
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as var, fuzz_app(Path(var)) as (app, headers):
        report = fuzz(app, headers, examples=args.examples, budget_s=args.budget_s, seed=args.seed)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {"examples_per_operation": args.examples, "seed": args.seed, **asdict(report)}, indent=2
        )
    )
    print(
        f"{report.operations} operations, {report.requests} requests in {report.seconds} s: "
        f"{len(report.failures)} failures; statuses {report.statuses} -> {args.out}"
    )
    for failure in report.failures:
        print("  " + failure)
    return 1 if report.failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
