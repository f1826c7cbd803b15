"""Ingest a JSONL, CSV or Parquet file into an organization's collection (all or nothing).

    python -m jobs.ingest --org acme-outdoor --collection products products.csv
    python -m jobs.ingest --org new-shop --create-org "New Shop" --collection documents docs.jsonl

Exit status: 0 written, 2 rejected (the row errors are printed), 1 other failure.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from crow.data.ingest import ingest
from crow.data.lake import DataLake
from crow.data.records import COLLECTIONS
from crow.data.upload import FORMATS, IngestRejected, detect_format
from crow.settings import AppSettings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("file", type=Path)
    parser.add_argument("--org", required=True)
    parser.add_argument("--collection", required=True, choices=sorted(COLLECTIONS))
    parser.add_argument(
        "--format", choices=FORMATS, default=None, help="default: from the file name"
    )
    parser.add_argument("--mode", choices=("append", "upsert", "replace"), default="append")
    parser.add_argument("--create-org", metavar="NAME", help="register the org first if it is new")
    parser.add_argument("--data-root", type=Path, default=None)
    args = parser.parse_args(argv)

    settings = AppSettings.from_args()
    lake = DataLake(args.data_root or settings.data_dir)
    try:
        if args.create_org and not lake.org_exists(args.org):
            lake.register_org(args.org, args.create_org)
        if not lake.org_exists(args.org):
            print(f"unknown organization {args.org!r}; pass --create-org NAME to register it")
            return 2
        fmt = detect_format(explicit=args.format, content_type=None, filename=args.file.name)
        written = ingest(
            lake,
            args.org,
            args.collection,
            args.file.read_bytes(),
            fmt,
            mode=args.mode,
            max_rows=settings.limits.max_ingest_rows,
            max_errors=settings.limits.max_row_errors,
        )
    except IngestRejected as exc:
        print(f"rejected: {exc}", file=sys.stderr)
        for err in exc.errors:
            print(f"  row {err.row}: {err.field}: {err.reason}", file=sys.stderr)
        return 2
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"{args.org}/{args.collection}: wrote {written:,} rows ({args.mode})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
