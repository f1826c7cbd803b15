"""Write cluster/serve_config.gpu.yaml into cluster/rayservice.yaml's serveConfigV2, verbatim.

The GPU profile is edited in one place, serve_config.gpu.yaml; run this after each edit:
    python cluster/render.py            (--check: exit 1 if rayservice.yaml is out of date)
tests/cluster/test_configs.py fails while the two differ.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
KEY = "  serveConfigV2: |\n"
INDENT = " " * 4


def rendered(service: str, serve_config: str) -> str:
    """`service` with its serveConfigV2 block replaced by `serve_config`."""
    start = service.index(KEY) + len(KEY)
    lines = service[start:].splitlines(keepends=True)
    end = 0
    while end < len(lines) and (lines[end].startswith(INDENT) or not lines[end].strip()):
        end += 1
    while end and not lines[end - 1].strip():  # blank lines after the block stay outside
        end -= 1
    block = "".join(INDENT + ln if ln.strip() else "\n" for ln in serve_config.splitlines(True))
    return service[:start] + block + "".join(lines[end:])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report whether it is current")
    args = parser.parse_args(argv)
    target = HERE / "rayservice.yaml"
    current = target.read_text()
    new = rendered(current, (HERE / "serve_config.gpu.yaml").read_text())
    if args.check:
        if new != current:
            print(f"{target} is out of date: run python cluster/render.py", file=sys.stderr)
            return 1
        return 0
    target.write_text(new)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
