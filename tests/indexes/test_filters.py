from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from indexes.filters import SearchFilter, allowed_positions, ids_table


@pytest.fixture
def interactions(tmp_path: Path) -> str:
    part = tmp_path / "interactions"
    part.mkdir()
    start = datetime(2025, 1, 1)
    rows = [
        ("i-1", "web", start),
        ("i-2", "cctv", start + timedelta(days=1)),
        ("i-3", "social", start + timedelta(days=2)),
        ("i-4", "cctv", start + timedelta(days=3)),
    ]
    for n, chunk in enumerate((rows[:2], rows[2:])):  # two files: the glob reads both
        table = pa.table(
            {
                "id": [r[0] for r in chunk],
                "channel": [r[1] for r in chunk],
                "occurred_at": pa.array([r[2] for r in chunk], pa.timestamp("us")),
                "text": ["..." for _ in chunk],
            }
        )
        pq.write_table(table, part / f"part-{n}.parquet")
    return str(part / "*.parquet")


# Index positions differ from Parquet order; "i-9" is indexed but absent from the data.
INDEX_IDS = np.array(["i-4", "i-9", "i-1", "i-3", "i-2"])


def test_empty_filter_means_no_restriction(interactions: str) -> None:
    assert allowed_positions(interactions, INDEX_IDS, "interactions", SearchFilter()) is None


def test_channel_filter_maps_ids_to_positions(interactions: str) -> None:
    got = allowed_positions(interactions, INDEX_IDS, "interactions", SearchFilter(channel="cctv"))
    assert got is not None and got.dtype == np.int64
    assert got.tolist() == [0, 4]  # i-4, i-2


def test_time_window_and_channel(interactions: str) -> None:
    flt = SearchFilter(since=datetime(2025, 1, 2), until=datetime(2025, 1, 4))
    assert allowed_positions(interactions, INDEX_IDS, "interactions", flt).tolist() == [3, 4]
    both = SearchFilter(channel="cctv", since=datetime(2025, 1, 2, tzinfo=UTC))
    assert allowed_positions(interactions, ids_table(INDEX_IDS), "interactions", both).tolist() == [
        0,
        4,
    ]
    # 2025-01-02T01:00+02:00 is 2025-01-01T23:00Z, so i-2 (2025-01-02T00:00) is included.
    tz = SearchFilter(since=datetime(2025, 1, 2, 1, tzinfo=timezone(timedelta(hours=2))))
    assert allowed_positions(interactions, INDEX_IDS, "interactions", tz).tolist() == [0, 3, 4]


def test_no_match_gives_empty_positions(interactions: str) -> None:
    got = allowed_positions(interactions, INDEX_IDS, "interactions", SearchFilter(channel="fax"))
    assert got is not None and got.tolist() == []


def test_filter_values_are_parameters_not_sql(interactions: str) -> None:
    flt = SearchFilter(channel="web' OR '1'='1")
    assert allowed_positions(interactions, INDEX_IDS, "interactions", flt).tolist() == []


def test_other_collections_use_their_columns(tmp_path: Path) -> None:
    pq.write_table(
        pa.table({"id": ["p1", "p2"], "category": ["shoes", "hats"], "name": ["a", "b"]}),
        tmp_path / "products.parquet",
    )
    pq.write_table(
        pa.table(
            {
                "id": ["t1", "t2"],
                "type": ["trend", "anomaly"],
                "detected_at": pa.array(
                    [datetime(2025, 3, 1, tzinfo=UTC), datetime(2025, 4, 1, tzinfo=UTC)],
                    pa.timestamp("us", tz="UTC"),
                ),
            }
        ),
        tmp_path / "patterns.parquet",
    )
    ids = np.array(["p2", "p1"])
    products = str(tmp_path / "products.parquet")
    got = allowed_positions(products, ids, "products", SearchFilter(category="shoes"))
    assert got.tolist() == [1]
    patterns = str(tmp_path / "patterns.parquet")
    flt = SearchFilter(pattern_type="anomaly", since=datetime(2025, 3, 15))
    assert allowed_positions(patterns, np.array(["t1", "t2"]), "patterns", flt).tolist() == [1]


def test_filters_that_do_not_apply_are_rejected(interactions: str) -> None:
    with pytest.raises(ValueError, match="category"):
        allowed_positions(interactions, INDEX_IDS, "interactions", SearchFilter(category="x"))
    with pytest.raises(ValueError, match="since"):
        allowed_positions("unused", INDEX_IDS, "products", SearchFilter(since=datetime.now()))


def test_title_words_match_whole_words_in_the_singular_or_plural(tmp_path: Path) -> None:
    titles = {
        "p1": "Oat Milk Value Size",
        "p2": "Whole Milks Organic",
        "p3": "Buttermilk Pancake Mix",  # milk inside a word: not milk
        "p4": "Frozen Berries Mini",
        "p5": "Berry Tea Sampler",
        "p6": "Ribeye Steak",  # tea inside a word: not tea
        "p7": "Oat (Milk) [x+]",  # a title's punctuation is no pattern
        "p8": "Veggie Burgers 4 pack",
        "p9": "Gift Box",
        "p10": "Bath Toys",
    }
    pq.write_table(
        pa.table({"id": list(titles), "title": list(titles.values())}),
        tmp_path / "products.parquet",
    )
    products, ids = str(tmp_path / "products.parquet"), np.array(list(titles))

    def named(*words: str) -> list[str]:
        flt = SearchFilter(title_words=words)
        return [str(ids[p]) for p in allowed_positions(products, ids, "products", flt)]

    assert named("milk") == ["p1", "p2", "p7"]
    assert named("oat", "milk") == ["p1", "p7"]
    assert named("berrie") == named("berry") == ["p4", "p5"]  # a plural's stem, or the singular
    assert named("tea") == ["p5"]
    assert named("veggie") == ["p8"]  # a singular in -ie, and its plural
    assert named("boxe") == named("box") == ["p9"]  # the stem of "boxes"
    assert named("toy") == ["p10"]  # a vowel before the y: toys, not toies
    assert named("x+") == []  # a word is matched as text, never as a pattern
    with pytest.raises(ValueError, match="title_words"):
        allowed_positions("unused", INDEX_IDS, "interactions", SearchFilter(title_words=("a",)))
