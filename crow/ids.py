"""Identifier rules shared by every layer (org ids end up in file paths)."""

from __future__ import annotations

import re
import uuid

ORG_ID_PATTERN = r"^[a-z0-9][a-z0-9-]{1,62}$"
ROW_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$"
_ORG_RE = re.compile(ORG_ID_PATTERN)


def is_valid_org_id(org_id: str) -> bool:
    # fullmatch: `$` alone also matches before a trailing newline ("acme-outdoor\n").
    return isinstance(org_id, str) and _ORG_RE.fullmatch(org_id) is not None


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:20]}"
