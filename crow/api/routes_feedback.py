"""Feedback on answers: a rating of an assistant message with an optional comment and
correction, and its export as evaluation questions (JSONL in the format `make eval` reads:
a rating down with a correction becomes a question whose answer must state the correction).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field

from crow.api.deps import EditorOrg, OrgDep, ServicesDep
from crow.api.errors import ApiError

router = APIRouter(tags=["feedback"])
MESSAGE = "/api/v1/chat/sessions/{session_id}/messages/{message_id}/feedback"
TEXT_MAX = 2000


class FeedbackIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rating: Literal["up", "down"]
    comment: str | None = Field(None, max_length=TEXT_MAX, description="What was good or wrong.")
    correction: str | None = Field(
        None,
        max_length=TEXT_MAX,
        description="What the answer should have said: the export makes it a fact the answer "
        "to this question must state.",
    )


def _text(value: str | None) -> str | None:
    return value.strip() or None if value else None


@router.put(MESSAGE, summary="Rate an answer (again: the new rating replaces the last)")
async def put_feedback(
    session_id: str, message_id: str, body: FeedbackIn, org_id: OrgDep, services: ServicesDep
) -> dict[str, Any]:
    stored = await services.store.set_feedback(
        org_id,
        session_id,
        message_id,
        body.rating,
        comment=_text(body.comment),
        correction=_text(body.correction),
    )
    if stored is None:
        raise ApiError(404, "message_not_found", "no answer with this id in this chat")
    return stored


@router.delete(MESSAGE, status_code=204, summary="Take a rating back")
async def delete_feedback(
    session_id: str, message_id: str, org_id: OrgDep, services: ServicesDep
) -> None:
    if not await services.store.delete_feedback(org_id, session_id, message_id):
        raise ApiError(404, "feedback_not_found", "this answer has no rating")


@router.get(
    "/api/v1/feedback",
    summary="The organization's feedback as evaluation questions (JSONL)",
    response_class=Response,
    responses={200: {"content": {"application/x-ndjson": {}}}},
)
async def export_feedback(
    org_id: EditorOrg,
    services: ServicesDep,
    since: Annotated[
        datetime | None, Query(description="Only feedback given or changed at or after this.")
    ] = None,
    rating: Literal["up", "down"] | None = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
) -> Response:
    if since is not None and since.tzinfo is not None:
        since = since.astimezone(UTC).replace(tzinfo=None)
    rows = await services.store.feedback_rows(org_id, since=since, rating=rating, limit=limit)
    lines = [json.dumps(eval_item(org_id, row), ensure_ascii=False) for row in rows]
    return Response("".join(f"{line}\n" for line in lines), media_type="application/x-ndjson")


def eval_item(org_id: str, row: dict[str, Any]) -> dict[str, Any]:
    """One feedback as an evaluation question: the rated question (with the chat's earlier
    questions as its history), the tools the rated answer called as `expect_tools` (check
    them before keeping a rating down), and a correction as the fact the answer must state."""
    feedback, answer = row["feedback"], row["answer"]
    item: dict[str, Any] = {
        "id": f"fb-{feedback['message_id']}",
        "org": org_id,
        "kind": "feedback",
        "query": row["question"],
        "history": row["history"],
        "expect_tools": sorted({s["name"] for s in answer["tool_steps"] if s.get("name")}),
        "feedback": {**feedback, "answer": answer["content"]},
    }
    if feedback["correction"]:
        item["truth"] = {"facts": [feedback["correction"]]}
    return item
