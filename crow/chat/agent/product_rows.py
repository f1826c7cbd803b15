"""A product as the product search gives it to the model."""

from __future__ import annotations

import json
from typing import Any


def product_row(hit: dict[str, Any], described: bool = False) -> dict[str, Any]:
    """A product as the model reads it; `described`: with its attributes (diet, material,
    ...), for the product the query names (asked one's diet label, a 1.5B read none and
    answered "vegan" for a keto loaf). Not for every row: each token read costs a small model
    time."""
    row = {
        "id": hit["id"],
        "title": hit["title"],
        "category": hit["category"],
        "price": hit["price"],
        "interactions": hit["interactions"]["total"],
    }
    if described and (attributes := attributes_text(hit.get("attributes"))):
        row["attributes"] = attributes
    return row


def attributes_text(raw: Any) -> str:
    """A product's attributes as "diet keto, origin local" (stored as JSON text)."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return ""
    if not isinstance(raw, dict):
        return ""
    return ", ".join(f"{k} {v}" for k, v in raw.items() if v not in (None, ""))
