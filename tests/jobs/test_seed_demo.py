"""The demo data set: deterministic to the byte, and as large and varied as promised."""

from datetime import date, timedelta

import duckdb
import pytest

from crow.data.lake import DataLake
from jobs.seed_demo import main

END = "2026-11-29"


def _files(root):
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*.parquet"))}


@pytest.fixture(scope="module")
def seeded(tmp_path_factory):
    root = tmp_path_factory.mktemp("seed")
    assert main(["--data-root", str(root / "a"), "--end", END]) == 0
    return root


def test_same_seed_gives_the_same_bytes(seeded):
    assert main(["--data-root", str(seeded / "b"), "--end", END]) == 0
    a, b = _files(seeded / "a"), _files(seeded / "b")
    assert len(a) == 8 and a == b


def test_another_seed_gives_other_data(seeded, tmp_path):
    assert (
        main(["--data-root", str(tmp_path), "--end", END, "--seed", "8", "--org", "fresh-mart"])
        == 0
    )
    a = _files(seeded / "a")
    c = _files(tmp_path)
    key = next(k for k in c if k.startswith("fresh-mart/.interactions"))
    assert c[key] != a[key]


@pytest.mark.parametrize("org", ["acme-outdoor", "fresh-mart"])
def test_each_org_has_the_promised_data(seeded, org):
    lake = DataLake(seeded / "a")
    assert lake.count(org, "products") >= 500
    assert lake.count(org, "interactions") >= 20_000
    assert lake.count(org, "patterns") == 40
    assert lake.count(org, "documents") >= 25
    con = duckdb.connect()
    glob = lake.parquet_glob(org, "interactions")
    channels = dict(con.execute(f"SELECT channel, count(*) FROM '{glob}' GROUP BY 1").fetchall())
    assert set(channels) == {"web", "cctv", "social"} and min(channels.values()) > 2000
    lo, hi, texts = con.execute(
        f"SELECT min(occurred_at)::DATE, max(occurred_at)::DATE, count(DISTINCT text) FROM '{glob}'"
    ).fetchone()
    end = date.fromisoformat(END)
    assert lo >= end - timedelta(days=90) and hi < end and (hi - lo).days >= 85
    assert texts > 5000  # varied natural-language text
    types = con.execute(
        f"SELECT count(DISTINCT type) FROM '{lake.parquet_glob(org, 'patterns')}'"
    ).fetchone()
    assert types[0] >= 5
    kinds = {
        r[0]
        for r in con.execute(
            f"SELECT context_type FROM '{lake.parquet_glob(org, 'documents')}'"
        ).fetchall()
    }
    assert {"profile", "market", "values", "locations", "competitors", "policy", "guide"} <= kinds


def test_if_missing_leaves_existing_orgs_alone(seeded, capsys):
    root = seeded / "a"
    before = _files(root)
    assert main(["--data-root", str(root), "--end", "2026-01-01", "--if-missing"]) == 0
    assert "already seeded" in capsys.readouterr().out
    assert _files(root) == before


def test_interactions_flag_scales_one_org(tmp_path):
    assert (
        main(
            [
                "--data-root",
                str(tmp_path),
                "--end",
                END,
                "--org",
                "acme-outdoor",
                "--interactions",
                "120000",
            ]
        )
        == 0
    )
    lake = DataLake(tmp_path)
    assert lake.count("acme-outdoor", "interactions") == 120_000
    assert not lake.org_exists("fresh-mart")
