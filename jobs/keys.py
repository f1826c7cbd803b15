"""API keys on the command line: create, list, revoke; and the demo keys of `make run`.

    python -m jobs.keys create --org acme-outdoor --role editor --name "store team" --expires 90
    python -m jobs.keys list [--org ORG]
    python -m jobs.keys revoke KEY_ID [--org ORG]
    python -m jobs.keys demo            # make run: one editor key per demo org, if it has none

A key is printed once, when it is created; the store keeps only its hash. Works next to a
running app (through its ChatStore deployment) and without one (on the chat-state file).
"""

from __future__ import annotations

import argparse
import os
import sys
from datetime import UTC, datetime, timedelta

from crow.auth.keys import ROLES
from crow.config_source import CONFIG_HELP, ConfigError, settings_from_config_arg
from crow.data.lake import DataLake
from crow.settings import AppSettings
from jobs.seed_demo import DEMO_ORGS
from jobs.store_access import StoreAccess

DEMO_KEYS_FILE = "demo-keys.txt"
DASHBOARD_URL = "http://127.0.0.1:8000/"


def create_keys(
    store: StoreAccess, orgs: list[str], *, role: str = "editor", name: str | None = None
) -> dict[str, str]:
    """A new key per org: {org: key}."""
    return {org: store.call("create_api_key", org, role, name=name)["key"] for org in orgs}


def demo_keys(settings: AppSettings, store: StoreAccess, url: str = DASHBOARD_URL) -> str:
    """The demo orgs' keys: created for each demo org that has no active key (written to
    <var>/demo-keys.txt, owner-only), and what to print."""
    lake = DataLake(settings.data_dir)
    orgs = [org for org in sorted(DEMO_ORGS) if lake.org_exists(org)]
    bare = [o for o in orgs if not any(k["active"] for k in store.call("list_api_keys", o))]
    path = settings.var_dir / DEMO_KEYS_FILE
    if not bare:
        where = f"in {path}" if path.exists() else "created earlier (python -m jobs.keys create)"
        return f"Demo API keys: {where}; open the dashboard at {url}"
    keys = create_keys(store, bare, role="editor", name="demo")
    lines = [f"{org}  {key}  {url}#key={key}" for org, key in keys.items()]
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    with os.fdopen(fd, "a") as f:
        f.write("".join(line + "\n" for line in lines))
    os.chmod(path, 0o600)
    return "\n".join(
        [
            "Demo API keys (editor role; shown once, kept in " + str(path) + "):",
            *(f"  {line}" for line in lines),
            "Open a link above, or paste a key into the dashboard.",
        ]
    )


def _expiry(value: str) -> datetime:
    if value.isdigit():
        return datetime.now(UTC) + timedelta(days=int(value))
    when = datetime.fromisoformat(value)
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--config", default="serve_config.yaml", help=CONFIG_HELP)
    commands = parser.add_subparsers(dest="command", required=True)
    create = commands.add_parser("create", help="create a key and print it (once)")
    create.add_argument("--org", required=True)
    create.add_argument("--role", choices=ROLES, required=True)
    create.add_argument("--name")
    create.add_argument("--expires", type=_expiry, help="days from now, or an ISO date")
    listing = commands.add_parser("list", help="keys with their state (never their secrets)")
    listing.add_argument("--org")
    revoke = commands.add_parser("revoke", help="revoke a key by its id")
    revoke.add_argument("key_id")
    revoke.add_argument("--org")
    demo = commands.add_parser("demo", help="make run: demo keys for demo orgs without one")
    demo.add_argument("--url", default=DASHBOARD_URL)
    args = parser.parse_args(argv)
    try:
        settings = settings_from_config_arg(args.config)
    except ConfigError as exc:
        parser.error(str(exc))
    store = StoreAccess(settings, connect=True)
    try:
        if args.command == "create":
            if not DataLake(settings.data_dir).org_exists(args.org):
                print(f"no organization {args.org!r} in {settings.data_dir}", file=sys.stderr)
                return 2
            record = store.call(
                "create_api_key", args.org, args.role, name=args.name, expires_at=args.expires
            )
            print(
                f"{record['id']}  {record['org_id']}  {record['role']}  expires {record['expires_at'] or 'never'}"
            )
            print(record["key"])
        elif args.command == "list":
            for key in store.call("list_api_keys", args.org):
                state = (
                    "active" if key["active"] else ("revoked" if key["revoked_at"] else "expired")
                )
                print(
                    f"{key['id']}  {key['org_id']}  {key['role']:<6}  {state:<7}  "
                    f"{key['name'] or '-'}  created {key['created_at']}  expires {key['expires_at'] or 'never'}"
                )
        elif args.command == "revoke":
            if not store.call("revoke_api_key", args.key_id, org_id=args.org):
                print(f"no active key {args.key_id!r}", file=sys.stderr)
                return 1
            print(
                f"revoked {args.key_id} (Ingress replicas stop accepting it within "
                f"{settings.auth.key_cache_s:g} s)"
            )
        else:
            print(demo_keys(settings, store, args.url))
    finally:
        store.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
