"""ChatStore deployment: the single writer of the chat-state DuckDB file."""

from __future__ import annotations

from ray import serve

from crow.settings import AppSettings
from crow.store.chat_store import ChatStore


@serve.deployment(
    name="ChatStore",
    # DuckDB allows one read-write process per file: exactly one replica, never autoscaled.
    num_replicas=1,
    max_ongoing_requests=64,
    ray_actor_options={"num_cpus": 0},
)
class ChatStoreDeployment(ChatStore):
    def __init__(self, settings: AppSettings) -> None:
        super().__init__(settings.chat_db_path)
