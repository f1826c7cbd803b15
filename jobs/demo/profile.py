"""What a demo organization is made of: its catalog vocabulary, stores and documents."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class OrgProfile:
    org_id: str
    name: str
    brands: tuple[str, ...]
    # category -> item nouns sold in it
    catalog: dict[str, tuple[str, ...]]
    variants: tuple[str, ...]
    price_range: dict[str, tuple[float, float]]
    attributes: dict[str, tuple[str, ...]]
    stores: tuple[str, ...]
    web_actions: tuple[str, ...]
    cctv_actions: tuple[str, ...]
    social_posts: tuple[str, ...]
    search_terms: tuple[str, ...]
    channel_weights: tuple[float, float, float]  # web, cctv, social
    # (type, title template, description template); {category}, {store}, {channel}, {pct}
    patterns: tuple[tuple[str, str, str], ...]
    # (title, context_type, body)
    documents: tuple[tuple[str, str, str], ...]
    # optional per-category overrides where the generic lists make no sense
    category_brands: dict[str, tuple[str, ...]] = field(default_factory=dict)
    category_variants: dict[str, tuple[str, ...]] = field(default_factory=dict)
