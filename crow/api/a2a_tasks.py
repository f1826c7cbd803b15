"""A2A tasks in the chat store: any Ingress replica answers GetTask, finished tasks expire.

a2a-sdk's TaskStore over the ChatStore (one writer, shared by every replica). A task is
stored as the protocol's JSON with its organization (the request's, from its API key), so
an organization sees only its own tasks; finished tasks are deleted after
``limits.a2a_task_retention_h``. Listing reuses the SDK's own filtering and paging.
"""

from __future__ import annotations

from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.tasks import InMemoryTaskStore, TaskStore
from a2a.types.a2a_pb2 import ListTasksRequest, ListTasksResponse, Task, TaskState
from google.protobuf.json_format import MessageToJson, Parse

FINAL_STATES = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_REJECTED,
    }
)


def _org_and_store(context: ServerCallContext) -> tuple[str, Any]:
    return str(context.state["org_id"]), context.state["services"].store


class ChatStoreTaskStore(TaskStore):
    async def save(self, task: Task, context: ServerCallContext) -> None:
        org_id, store = _org_and_store(context)
        retention_s = context.state["services"].settings.limits.a2a_task_retention_h * 3600
        await store.save_a2a_task(
            org_id,
            task.id,
            task.context_id,
            TaskState.Name(task.status.state),
            task.status.state in FINAL_STATES,
            MessageToJson(task),
            retention_s=retention_s,
        )

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        org_id, store = _org_and_store(context)
        body = await store.get_a2a_task(org_id, task_id)
        return None if body is None else Parse(body, Task())

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        org_id, store = _org_and_store(context)
        page = InMemoryTaskStore(owner_resolver=lambda _: org_id, use_copying=False)
        for body in await store.list_a2a_tasks(org_id, params.context_id or None):
            await page.save(Parse(body, Task()), context)
        return await page.list(params, context)

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        org_id, store = _org_and_store(context)
        await store.delete_a2a_task(org_id, task_id)
