"""Access in the chat database: API keys (hashes only), rate-limit buckets, token usage.

The buckets are in memory: the ChatStore deployment has exactly one replica, so every
Ingress replica takes from the same ones (a restart refills them).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from crow.auth.keys import Principal, new_key, secret_matches, split_key
from crow.auth.limiter import TokenBuckets
from crow.store import db


class Access(db.Database):
    def __init__(self, path: Path | str) -> None:
        super().__init__(path)
        self.buckets = TokenBuckets()

    # --- API keys ----------------------------------------------------------------------
    def create_api_key(
        self,
        org_id: str,
        role: str,
        *,
        name: str | None = None,
        expires_at: datetime | None = None,
    ) -> dict[str, Any]:
        """A new key: the record with the key itself under "key" (shown this once only)."""
        self.ensure_org(org_id)
        key_id, secret_hash, key = new_key()
        expires = None if expires_at is None else expires_at.astimezone(UTC).replace(tzinfo=None)
        self._query(
            "INSERT INTO api_keys VALUES (?, ?, ?, ?, ?, ?, ?, NULL)",
            [key_id, org_id, role, name, secret_hash, db.now(), expires],
        )
        return {**self._api_keys("id = ?", [key_id])[0], "key": key}

    def list_api_keys(self, org_id: str | None = None) -> list[dict[str, Any]]:
        """The keys of `org_id` (None: of every org), without their secrets."""
        if org_id is None:
            return self._api_keys("true", [])
        return self._api_keys("org_id = ?", [org_id])

    def revoke_api_key(self, key_id: str, *, org_id: str | None = None) -> bool:
        """Revoke a key (of `org_id` when given); False when there is no such live key."""
        where, params = "id = ? AND revoked_at IS NULL", [key_id]
        if org_id is not None:
            where, params = where + " AND org_id = ?", [*params, org_id]
        found = self._query(f"SELECT id FROM api_keys WHERE {where}", params)
        if found:
            self._query("UPDATE api_keys SET revoked_at = ? WHERE id = ?", [db.now(), key_id])
        return bool(found)

    def authenticate(self, key: str) -> dict[str, Any] | None:
        """The principal of a live key (crow.auth.keys.Principal as a dict), else None."""
        parts = split_key(key)
        if parts is None:
            return None
        rows = self._query(
            "SELECT id, org_id, role, secret_hash FROM api_keys WHERE id = ? "
            "AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?)",
            [parts[0], db.now()],
        )
        if not rows or not secret_matches(parts[1], rows[0]["secret_hash"]):
            return None
        return Principal(rows[0]["id"], rows[0]["org_id"], rows[0]["role"]).as_dict()

    def _api_keys(self, where: str, params: list[Any]) -> list[dict[str, Any]]:
        rows = self._query(
            "SELECT id, org_id, role, name, created_at, expires_at, revoked_at FROM api_keys "
            f"WHERE {where} ORDER BY org_id, created_at",
            params,
        )
        return [
            {
                **r,
                **{k: db.iso(r[k]) for k in ("created_at", "expires_at", "revoked_at")},
                "active": r["revoked_at"] is None
                and (r["expires_at"] is None or r["expires_at"] > db.now()),
            }
            for r in rows
        ]

    # --- limits and usage --------------------------------------------------------------
    def admit(
        self,
        bucket: str,
        *,
        per_minute: float,
        burst: int,
        org_id: str | None = None,
        daily_tokens: int = 0,
    ) -> tuple[str, float] | None:
        """One request against a rate bucket and, with `daily_tokens`, the org's token quota
        (one round trip for both): None when it may go ahead, else ("quota", 0.0) or ("rate",
        seconds to wait). A request refused by the quota takes no token."""
        if org_id is not None and daily_tokens and self.usage_today(org_id) >= daily_tokens:
            return "quota", 0.0
        wait = self.buckets.take(bucket, per_minute=per_minute, burst=burst)
        return ("rate", wait) if wait > 0 else None

    def add_usage(self, org_id: str, tokens: int) -> None:
        """Count model tokens spent by `org_id` today (UTC)."""
        if statements := self.usage_statements(org_id, tokens):
            self._transaction(statements)

    @staticmethod
    def usage_statements(org_id: str, tokens: int) -> list[tuple[str, list[Any]]]:
        """What add_usage writes (nothing for no tokens), to join another write's commit."""
        if tokens <= 0:
            return []
        return [
            (
                "INSERT INTO token_usage VALUES (?, ?, ?) "
                "ON CONFLICT DO UPDATE SET tokens = token_usage.tokens + excluded.tokens",
                [org_id, db.now().date(), tokens],
            )
        ]

    def usage_today(self, org_id: str) -> int:
        rows = self._query(
            "SELECT tokens FROM token_usage WHERE org_id = ? AND day = ?", [org_id, db.now().date()]
        )
        return rows[0]["tokens"] if rows else 0
