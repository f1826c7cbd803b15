"""Write the deterministic demo data set for the demo organizations.

    python -m jobs.seed_demo [--seed 7] [--end 2026-11-29] [--org acme-outdoor]
                             [--interactions N] [--if-missing]

Rows are validated like any ingested batch and written with mode=replace, so a re-run
switches each collection to the new data at once.
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import UTC, date, datetime
from pathlib import Path

from crow.data.ingest import validate_rows
from crow.data.lake import DataLake
from crow.settings import AppSettings
from jobs.demo import generate
from jobs.demo.acme import ACME
from jobs.demo.freshmart import FRESH_MART
from jobs.demo.profile import OrgProfile

DEMO_ORGS: dict[str, OrgProfile] = {p.org_id: p for p in (ACME, FRESH_MART)}


def seed_org(
    lake: DataLake, org: OrgProfile, *, seed: int, end: date, interactions: int = 20_000
) -> dict[str, int]:
    lake.register_org(org.org_id, org.name)
    catalog = generate.products(org, seed)
    counts = {}
    counts["products"] = lake.write(
        org.org_id, "products", [validate_rows("products", catalog)], mode="replace"
    )
    counts["interactions"] = lake.write(
        org.org_id,
        "interactions",
        (
            validate_rows("interactions", chunk)
            for chunk in generate.interactions(org, catalog, seed, end, interactions)
        ),
        mode="replace",
    )
    counts["patterns"] = lake.write(
        org.org_id,
        "patterns",
        [validate_rows("patterns", generate.patterns(org, catalog, seed, end))],
        mode="replace",
    )
    counts["documents"] = lake.write(
        org.org_id,
        "documents",
        [validate_rows("documents", generate.documents(org, seed, end))],
        mode="replace",
    )
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--end",
        type=date.fromisoformat,
        default=datetime.now(UTC).date(),
        help="last day covered (default: today, UTC)",
    )
    parser.add_argument(
        "--org",
        choices=sorted(DEMO_ORGS),
        action="append",
        help="seed only this org (repeatable); default: all demo orgs",
    )
    parser.add_argument(
        "--interactions",
        type=int,
        default=20_000,
        help="interactions per seeded org (1000000+ for benchmarks)",
    )
    parser.add_argument("--data-root", type=Path, default=None)
    parser.add_argument(
        "--if-missing", action="store_true", help="do nothing for orgs that already exist"
    )
    args = parser.parse_args(argv)
    lake = DataLake(args.data_root or AppSettings.from_args().data_dir)
    for org_id in args.org or sorted(DEMO_ORGS):
        if args.if_missing and lake.org_exists(org_id):
            print(f"{org_id}: already seeded, skipping")
            continue
        started = time.perf_counter()
        print(f"{org_id}: seeding ({args.interactions:,} interactions)...", flush=True)
        counts = seed_org(
            lake, DEMO_ORGS[org_id], seed=args.seed, end=args.end, interactions=args.interactions
        )
        summary = ", ".join(f"{v:,} {k}" for k, v in counts.items())
        print(f"{org_id}: {summary} in {time.perf_counter() - started:.1f}s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
