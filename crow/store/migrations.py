"""Numbered schema migrations of the chat-state database, recorded in ``_migrations``.

Append new migrations to the end of MIGRATIONS; never edit one that has shipped.
"""

from __future__ import annotations

from collections.abc import Callable

import duckdb

Migration = Callable[[duckdb.DuckDBPyConnection], None]


def m001_core(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(
        """
        CREATE TABLE organizations (
            id VARCHAR PRIMARY KEY,
            name VARCHAR NOT NULL,
            created_at TIMESTAMP NOT NULL
        )
        """
    )
    # Chat and Q&A sessions share a shape; `kind` keeps them apart.
    con.execute(
        """
        CREATE TABLE sessions (
            id VARCHAR PRIMARY KEY,
            kind VARCHAR NOT NULL CHECK (kind IN ('chat', 'qna')),
            org_id VARCHAR NOT NULL,
            title VARCHAR,
            created_at TIMESTAMP NOT NULL,
            updated_at TIMESTAMP NOT NULL
        )
        """
    )
    con.execute("CREATE INDEX sessions_org ON sessions (org_id, kind, updated_at)")
    con.execute(
        """
        CREATE TABLE messages (
            id VARCHAR PRIMARY KEY,
            session_id VARCHAR NOT NULL,
            org_id VARCHAR NOT NULL,
            seq BIGINT NOT NULL,
            role VARCHAR NOT NULL CHECK (role IN ('user', 'assistant', 'system')),
            content VARCHAR NOT NULL,
            sources JSON NOT NULL DEFAULT '[]',
            tool_steps JSON NOT NULL DEFAULT '[]',
            timings JSON NOT NULL DEFAULT '{}',
            created_at TIMESTAMP NOT NULL
        )
        """
    )
    con.execute("CREATE UNIQUE INDEX messages_seq ON messages (session_id, seq)")


def m002_indexes_and_jobs(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(
        """
        CREATE TABLE index_versions (
            org_id VARCHAR NOT NULL,
            collection VARCHAR NOT NULL,
            version VARCHAR NOT NULL,
            kind VARCHAR NOT NULL,
            row_count BIGINT NOT NULL,
            model VARCHAR NOT NULL,
            created_at TIMESTAMP NOT NULL,
            PRIMARY KEY (org_id, collection, version)
        )
        """
    )
    con.execute(
        """
        CREATE TABLE job_runs (
            id VARCHAR PRIMARY KEY,
            org_id VARCHAR NOT NULL,
            kind VARCHAR NOT NULL,
            state VARCHAR NOT NULL
                CHECK (state IN ('pending', 'running', 'succeeded', 'failed', 'stopped')),
            rows_done BIGINT NOT NULL DEFAULT 0,
            rows_total BIGINT,
            detail VARCHAR,
            created_at TIMESTAMP NOT NULL,
            updated_at TIMESTAMP NOT NULL
        )
        """
    )


def m003_keys_and_usage(con: duckdb.DuckDBPyConnection) -> None:
    # API keys: the secret only as its SHA-256 (crow.auth.keys); `id` is the key's public part.
    con.execute(
        """
        CREATE TABLE api_keys (
            id VARCHAR PRIMARY KEY,
            org_id VARCHAR NOT NULL,
            role VARCHAR NOT NULL CHECK (role IN ('reader', 'editor', 'admin')),
            name VARCHAR,
            secret_hash VARCHAR NOT NULL,
            created_at TIMESTAMP NOT NULL,
            expires_at TIMESTAMP,
            revoked_at TIMESTAMP
        )
        """
    )
    con.execute("CREATE INDEX api_keys_org ON api_keys (org_id)")
    # The collections a job reindexes: one running job per organization and collection.
    con.execute("ALTER TABLE job_runs ADD COLUMN collections VARCHAR")
    # Model tokens spent per organization and UTC day (the daily quota).
    con.execute(
        """
        CREATE TABLE token_usage (
            org_id VARCHAR NOT NULL,
            day DATE NOT NULL,
            tokens BIGINT NOT NULL,
            PRIMARY KEY (org_id, day)
        )
        """
    )


def m004_a2a(con: duckdb.DuckDBPyConnection) -> None:
    # A2A tasks (the protocol's JSON of each) and conversation ids -> chat sessions, per
    # organization, so that any Ingress replica answers GetTask and continues a context.
    con.execute(
        """
        CREATE TABLE a2a_tasks (
            org_id VARCHAR NOT NULL,
            id VARCHAR NOT NULL,
            context_id VARCHAR NOT NULL,
            state VARCHAR NOT NULL,
            final BOOLEAN NOT NULL,
            body VARCHAR NOT NULL,
            updated_at TIMESTAMP NOT NULL,
            PRIMARY KEY (org_id, id)
        )
        """
    )
    con.execute(
        """
        CREATE TABLE a2a_contexts (
            org_id VARCHAR NOT NULL,
            external_id VARCHAR NOT NULL,
            session_id VARCHAR NOT NULL,
            PRIMARY KEY (org_id, external_id)
        )
        """
    )


def m005_answer_claims(con: duckdb.DuckDBPyConnection) -> None:
    # Who is answering a client's message id right now (one answer per id, any replica).
    con.execute(
        """
        CREATE TABLE answer_claims (
            id VARCHAR PRIMARY KEY,
            org_id VARCHAR NOT NULL,
            claimed_at TIMESTAMP NOT NULL
        )
        """
    )


def m006_job_timings(con: duckdb.DuckDBPyConnection) -> None:
    # Seconds per stage of a reindex (crow.retrieval.stages), as a JSON object.
    con.execute("ALTER TABLE job_runs ADD COLUMN timings VARCHAR")


def m007_feedback(con: duckdb.DuckDBPyConnection) -> None:
    # A rating of an assistant message (one per message, the latest wins), for the evaluation.
    con.execute(
        """
        CREATE TABLE feedback (
            message_id VARCHAR PRIMARY KEY,
            org_id VARCHAR NOT NULL,
            session_id VARCHAR NOT NULL,
            rating VARCHAR NOT NULL CHECK (rating IN ('up', 'down')),
            comment VARCHAR,
            correction VARCHAR,
            created_at TIMESTAMP NOT NULL,
            updated_at TIMESTAMP NOT NULL
        )
        """
    )


def m008_answer_state(con: duckdb.DuckDBPyConnection) -> None:
    # An answer the user stopped (its partial text stored), and the answer a regenerated one
    # answers again (both stay in the history).
    con.execute("ALTER TABLE messages ADD COLUMN stopped BOOLEAN DEFAULT false")
    con.execute("ALTER TABLE messages ADD COLUMN regenerated_from VARCHAR")


MIGRATIONS: list[Migration] = [
    m001_core,
    m002_indexes_and_jobs,
    m003_keys_and_usage,
    m004_a2a,
    m005_answer_claims,
    m006_job_timings,
    m007_feedback,
    m008_answer_state,
]


def migrate(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Apply the migrations not yet recorded, each in its own transaction; returns their names."""
    con.execute(
        "CREATE TABLE IF NOT EXISTS _migrations "
        "(id INTEGER PRIMARY KEY, name VARCHAR NOT NULL, applied_at TIMESTAMP NOT NULL)"
    )
    done = {row[0] for row in con.execute("SELECT id FROM _migrations").fetchall()}
    applied = []
    for number, migration in enumerate(MIGRATIONS, start=1):
        if number in done:
            continue
        con.execute("BEGIN TRANSACTION")
        try:
            migration(con)
            con.execute(
                "INSERT INTO _migrations VALUES (?, ?, current_timestamp::TIMESTAMP)",
                [number, migration.__name__],
            )
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        applied.append(migration.__name__)
    return applied
