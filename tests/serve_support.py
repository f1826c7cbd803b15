"""Helpers of the Serve tests: API keys written before an app starts; the helper that runs
serve_config.yaml on a private local Ray instance lives in testing.local_app, the model they
name in `llm: {backend: custom, factory: ...}` in testing.rule_model."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from crow.settings import AppSettings
from crow.store.chat_store import ChatStore
from testing.local_app import APP_NAME, ROOT, free_port, serve_config_app, wait_until

__all__ = [
    "APP_NAME",
    "ROOT",
    "api_keys",
    "free_port",
    "serve_config_app",
    "wait_until",
]


def api_keys(var: Path, orgs: Sequence[str], role: str = "editor") -> dict[str, dict[str, str]]:
    """Request headers with a new API key per org, written to `var`'s chat store before the
    app starts there (the store file has one writer once it runs)."""
    from tests.conftest import key_headers

    store = ChatStore(AppSettings.from_args({"var_dir": str(var)}).chat_db_path)
    try:
        return {org: key_headers(store, org, role) for org in orgs}
    finally:
        store.close()
