"""API keys: random, shown once, stored as a hash under a short public id.

A key reads ``crow_<id>_<secret>``: the id (12 hex digits) finds the stored record, the
secret (32 random bytes) is checked against its SHA-256. A fast hash is right for secrets of
256 random bits (no dictionary to guess from); the comparison is constant-time.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import asdict, dataclass
from typing import Any, Literal

Role = Literal["reader", "editor", "admin"]
ROLES: tuple[Role, ...] = ("reader", "editor", "admin")  # each may do what the ones before may
PLATFORM = "platform"  # the operator token's role: every organization's list, no org data
PREFIX = "crow_"
_KEY = re.compile(r"crow_([0-9a-f]{12})_([A-Za-z0-9_-]{43})")


@dataclass(frozen=True)
class Principal:
    """Who a request is: a key of one organization with one role (or the platform operator)."""

    key_id: str
    org_id: str | None  # None only for the platform operator
    role: str

    def may(self, role: Role) -> bool:
        """This principal has `role` or a stronger one of its organization."""
        return self.role in ROLES and ROLES.index(self.role) >= ROLES.index(role)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def new_key() -> tuple[str, str, str]:
    """(key id, secret hash, the key as the client sends it)."""
    key_id, secret = secrets.token_hex(6), secrets.token_urlsafe(32)
    return key_id, hash_secret(secret), f"{PREFIX}{key_id}_{secret}"


def split_key(key: str) -> tuple[str, str] | None:
    """(key id, secret) of a well-formed key, else None."""
    match = _KEY.fullmatch(key)
    return (match[1], match[2]) if match else None


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def secret_matches(secret: str, stored_hash: str) -> bool:
    return hmac.compare_digest(hash_secret(secret), stored_hash)


def same_secret(given: str, expected: str) -> bool:
    """A constant-time comparison of two secrets (the operator token)."""
    return hmac.compare_digest(given.encode(), expected.encode())
