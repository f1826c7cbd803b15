import duckdb
import pytest

from crow.store.chat_store import ChatStore
from crow.store.migrations import MIGRATIONS, migrate

TABLES = {"organizations", "sessions", "messages", "index_versions", "job_runs", "_migrations"}


def _tables(con) -> set[str]:
    return {
        r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()
    }


def test_migrates_an_empty_file_and_records_each_migration(tmp_path):
    path = tmp_path / "chat.duckdb"
    store = ChatStore(path)
    assert store.applied_migrations == [m.__name__ for m in MIGRATIONS]
    store.close()
    with duckdb.connect(str(path)) as con:
        assert _tables(con) >= TABLES
        recorded = con.execute("SELECT id, name FROM _migrations ORDER BY id").fetchall()
    assert recorded == [(i, m.__name__) for i, m in enumerate(MIGRATIONS, start=1)]


def test_rerun_applies_nothing_and_keeps_data(tmp_path):
    path = tmp_path / "chat.duckdb"
    store = ChatStore(path)
    session = store.create_session("acme-outdoor")
    store.close()
    again = ChatStore(path)
    assert again.applied_migrations == []
    assert again.get_session("acme-outdoor", session["id"]) is not None
    again.close()


def test_applies_only_the_missing_migrations(tmp_path):
    path = tmp_path / "chat.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute(
            "CREATE TABLE _migrations (id INTEGER PRIMARY KEY, name VARCHAR, applied_at TIMESTAMP)"
        )
        MIGRATIONS[0](con)
        con.execute("INSERT INTO _migrations VALUES (1, ?, now())", [MIGRATIONS[0].__name__])
        assert "job_runs" not in _tables(con)
    with duckdb.connect(str(path)) as con:
        assert migrate(con) == [m.__name__ for m in MIGRATIONS[1:]]
        assert _tables(con) >= TABLES


def test_a_failing_migration_is_rolled_back(tmp_path, monkeypatch):
    def broken(con):
        con.execute("CREATE TABLE half_done (x INTEGER)")
        raise RuntimeError("boom")

    monkeypatch.setattr("crow.store.migrations.MIGRATIONS", [*MIGRATIONS, broken])
    with duckdb.connect(str(tmp_path / "c.duckdb")) as con:
        with pytest.raises(RuntimeError):
            migrate(con)
        assert "half_done" not in _tables(con)
        assert con.execute("SELECT count(*) FROM _migrations").fetchone()[0] == len(MIGRATIONS)
