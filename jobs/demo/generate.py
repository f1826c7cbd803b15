"""Deterministic demo rows for one organization profile.

Every random choice comes from a ``random.Random`` seeded with (seed, org, collection), so the
same seed and end date give the same rows, and the same Parquet bytes.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from crow.data.records import CHANNELS
from jobs.demo.profile import OrgProfile

DAYS = 90


def _rng(seed: int, org: OrgProfile, what: str) -> random.Random:
    return random.Random(f"{seed}:{org.org_id}:{what}")


def _end_of(end: date) -> datetime:
    return datetime.combine(end, time(0), tzinfo=UTC)


def products(org: OrgProfile, seed: int, count: int = 520) -> list[dict[str, Any]]:
    rng = _rng(seed, org, "products")
    combos = [
        (category, brand, item, variant)
        for category, items in org.catalog.items()
        for item in items
        for brand in org.category_brands.get(category, org.brands)
        for variant in org.category_variants.get(category, org.variants)
    ]
    picked = rng.sample(combos, min(count, len(combos)))
    rows = []
    for n, (category, brand, item, variant) in enumerate(picked, start=1):
        low, high = org.price_range[category]
        attrs = {key: rng.choice(values) for key, values in org.attributes.items()}
        rows.append(
            {
                "id": f"prd-{n:04d}",
                "title": f"{brand} {item} {variant}",
                "description": (
                    f"{brand} {item} {variant}: a {attrs[next(iter(attrs))]} {item.lower()} "
                    f"from our {category.lower()} range. "
                    + rng.choice(
                        (
                            "Customer favourite for value and reliability.",
                            "New this season with an improved design.",
                            "Top rated by our staff.",
                            "Made with recycled materials where possible.",
                            "Limited stock; popular at weekends.",
                        )
                    )
                ),
                "category": category,
                "price": round(rng.uniform(low, high), 2),
                "attributes": attrs,
            }
        )
    return rows


def interactions(
    org: OrgProfile,
    catalog: list[dict[str, Any]],
    seed: int,
    end: date,
    count: int = 20_000,
    chunk: int = 100_000,
) -> Iterator[list[dict[str, Any]]]:
    """`count` interactions over the DAYS before `end`, in chunks of `chunk` rows."""
    rng = _rng(seed, org, "interactions")
    start = _end_of(end) - timedelta(days=DAYS)
    ranked = catalog[:]
    rng.shuffle(ranked)
    popularity = [1.0 / (rank**0.9) for rank in range(1, len(ranked) + 1)]
    # Growth over the period and busier weekends in stores.
    day_weights = {
        ch: [
            (1.0 + 0.5 * d / DAYS)
            * (1.4 if ch == "cctv" and (start + timedelta(days=d)).weekday() >= 5 else 1.0)
            for d in range(DAYS)
        ]
        for ch in CHANNELS
    }
    templates = {"web": org.web_actions, "cctv": org.cctv_actions, "social": org.social_posts}
    batch: list[dict[str, Any]] = []
    for n in range(1, count + 1):
        channel = rng.choices(CHANNELS, weights=org.channel_weights)[0]
        day = rng.choices(range(DAYS), weights=day_weights[channel])[0]
        hour = (
            rng.randint(9, 19)
            if channel == "cctv"
            else rng.choice((7, 9, 12, 13, 18, 19, 20, 21, 22))
        )
        when = start + timedelta(
            days=day, hours=hour, minutes=rng.randint(0, 59), seconds=rng.randint(0, 59)
        )
        product = rng.choices(ranked, weights=popularity)[0]
        store = rng.choice(org.stores)
        text = rng.choice(templates[channel]).format(
            product=product["title"],
            category=product["category"],
            store=store,
            n=rng.randint(2, 9),
            secs=rng.randint(15, 240),
            step=rng.randint(2, 4),
            query=rng.choice(org.search_terms),
            stars=rng.randint(1, 5),
        )
        metadata: dict[str, Any] = (
            {"store": store}
            if channel != "web"
            else {"device": rng.choice(("mobile", "desktop", "app"))}
        )
        if channel == "social":
            metadata["sentiment"] = rng.choices(("positive", "neutral", "negative"), (5, 3, 2))[0]
        batch.append(
            {
                "id": f"int-{n:07d}",
                "channel": channel,
                "occurred_at": when,
                "text": text,
                "product_id": product["id"],
                "customer_id": f"cus-{rng.randint(1, max(3000, count // 7)):06d}",
                "metadata": metadata,
            }
        )
        if len(batch) >= chunk:
            yield batch
            batch = []
    if batch:
        yield batch


def patterns(
    org: OrgProfile, catalog: list[dict[str, Any]], seed: int, end: date, count: int = 40
) -> list[dict[str, Any]]:
    rng = _rng(seed, org, "patterns")
    categories = list(org.catalog)
    rows: list[dict[str, Any]] = []
    seen: set[str] = set()
    n = 0
    while len(rows) < count:
        n += 1
        kind, title_t, body_t = org.patterns[n % len(org.patterns)]
        category, store = rng.choice(categories), rng.choice(org.stores)
        values = {"category": category, "store": store, "pct": rng.randint(8, 65)}
        title = title_t.format(**values)
        if title in seen:
            continue
        seen.add(title)
        related = [p["id"] for p in catalog if p["category"] == category]
        rows.append(
            {
                "id": f"pat-{len(rows) + 1:03d}",
                "type": kind,
                "title": title,
                "description": body_t.format(**values),
                "detected_at": _end_of(end)
                - timedelta(days=rng.randint(0, DAYS - 1), hours=rng.randint(0, 23)),
                "confidence": round(rng.uniform(0.55, 0.98), 2),
                "related_ids": rng.sample(related, min(3, len(related))),
            }
        )
    return rows


def documents(org: OrgProfile, seed: int, end: date) -> list[dict[str, Any]]:
    rng = _rng(seed, org, "documents")
    return [
        {
            "id": f"doc-{n:03d}",
            "title": title,
            "context_type": context_type,
            "body": body,
            "updated_at": _end_of(end) - timedelta(days=rng.randint(1, 365)),
        }
        for n, (title, context_type, body) in enumerate(org.documents, start=1)
    ]
