"""Stand-ins shared by the reindex job's tests."""

from __future__ import annotations


class RecordingJob:
    """A JobRecorder that keeps the job record's updates in memory."""

    def __init__(self) -> None:
        self.updates: list[dict] = []

    def update(self, **fields) -> None:
        self.updates.append(fields)

    def record_index(self, collection, meta) -> None:
        pass
