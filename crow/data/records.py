"""Row models of the analytics data: what ingestion validates and what Parquet stores.

Each collection has a pydantic row model (validation, with per-field errors) and an Arrow
schema (storage). Nested values (attributes, metadata) are stored as JSON text so every
Parquet part of a collection shares one schema and DuckDB can query them with ``->>``.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any, Literal, get_args

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field, field_validator

from crow.ids import ROW_ID_PATTERN

Channel = Literal["web", "cctv", "social"]
CHANNELS: tuple[str, ...] = get_args(Channel)
PatternType = Literal["trend", "anomaly", "segment", "seasonal", "churn-risk", "affinity"]
PATTERN_TYPES: tuple[str, ...] = get_args(PatternType)
Scalar = str | int | float | bool | None

_TS = pa.timestamp("us", tz="UTC")


class _Row(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    id: str = Field(pattern=ROW_ID_PATTERN)

    def to_record(self) -> dict[str, Any]:
        out = self.model_dump()
        for key, value in out.items():
            if isinstance(value, dict):
                out[key] = json.dumps(value, sort_keys=True)
        return out


def _json_text(value: Any) -> Any:
    if isinstance(value, str | bytes):
        try:
            return json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValueError(f"not valid JSON: {exc.msg}") from None
    return value


def _aware(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class Product(_Row):
    title: str = Field(min_length=1, max_length=300)
    description: str = Field("", max_length=5000)
    category: str = Field(min_length=1, max_length=100)
    price: float = Field(ge=0)
    attributes: dict[str, Scalar] = Field(default_factory=dict)

    _parse_attributes = field_validator("attributes", mode="before")(
        lambda v: {} if v is None else _json_text(v)
    )


class Interaction(_Row):
    channel: Channel
    occurred_at: datetime
    text: str = Field(min_length=1, max_length=5000)
    product_id: str | None = Field(None, pattern=ROW_ID_PATTERN)
    customer_id: str | None = Field(None, max_length=128)
    metadata: dict[str, Scalar] = Field(default_factory=dict)

    _parse_metadata = field_validator("metadata", mode="before")(
        lambda v: {} if v is None else _json_text(v)
    )
    _utc = field_validator("occurred_at")(_aware)


class Pattern(_Row):
    type: PatternType
    title: str = Field(min_length=1, max_length=300)
    description: str = Field("", max_length=5000)
    detected_at: datetime
    confidence: float = Field(ge=0, le=1)
    related_ids: list[str] = Field(default_factory=list)

    _parse_related = field_validator("related_ids", mode="before")(
        lambda v: [] if v is None else _json_text(v)
    )
    _utc = field_validator("detected_at")(_aware)


DOCUMENT_ORIGIN_PATTERN = r"^(api|ingest|source:(git|folder))$"


class Document(_Row):
    title: str = Field(min_length=1, max_length=300)
    context_type: str = Field(min_length=1, max_length=64)
    body: str = Field(min_length=1, max_length=200_000)
    updated_at: datetime
    origin: str = Field(
        "ingest",
        pattern=DOCUMENT_ORIGIN_PATTERN,
        description="How the document arrived: 'ingest' (an upload, the default), 'api' "
        "(POST /qna/index) or 'source:git' / 'source:folder' (the organization's knowledge "
        "source; a source reindex replaces exactly these). Rows stored before this field "
        "existed read as null.",
    )

    _utc = field_validator("updated_at")(_aware)


def _schema(columns: list[tuple[str, pa.DataType]]) -> pa.Schema:
    return pa.schema(columns)


class Collection(BaseModel):
    """A named dataset: its row model and its storage schema."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    name: str
    row_model: type[_Row]
    schema_: pa.Schema


COLLECTIONS: dict[str, Collection] = {
    c.name: c
    for c in (
        Collection(
            name="products",
            row_model=Product,
            schema_=_schema(
                [
                    ("id", pa.string()),
                    ("title", pa.string()),
                    ("description", pa.string()),
                    ("category", pa.string()),
                    ("price", pa.float64()),
                    ("attributes", pa.string()),
                ]
            ),
        ),
        Collection(
            name="interactions",
            row_model=Interaction,
            schema_=_schema(
                [
                    ("id", pa.string()),
                    ("channel", pa.string()),
                    ("occurred_at", _TS),
                    ("text", pa.string()),
                    ("product_id", pa.string()),
                    ("customer_id", pa.string()),
                    ("metadata", pa.string()),
                ]
            ),
        ),
        Collection(
            name="patterns",
            row_model=Pattern,
            schema_=_schema(
                [
                    ("id", pa.string()),
                    ("type", pa.string()),
                    ("title", pa.string()),
                    ("description", pa.string()),
                    ("detected_at", _TS),
                    ("confidence", pa.float64()),
                    ("related_ids", pa.list_(pa.string())),
                ]
            ),
        ),
        Collection(
            name="documents",
            row_model=Document,
            schema_=_schema(
                [
                    ("id", pa.string()),
                    ("title", pa.string()),
                    ("context_type", pa.string()),
                    ("body", pa.string()),
                    ("updated_at", _TS),
                    ("origin", pa.string()),
                ]
            ),
        ),
    )
}


def get_collection(name: str) -> Collection:
    try:
        return COLLECTIONS[name]
    except KeyError:
        raise KeyError(
            f"unknown collection {name!r}; use one of {', '.join(COLLECTIONS)}"
        ) from None
