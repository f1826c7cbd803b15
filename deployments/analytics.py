"""Analytics deployment: DuckDB queries over the Parquet data."""

from __future__ import annotations

from ray import serve

from crow.data.analytics import Analytics
from crow.data.lake import DataLake
from crow.settings import AppSettings


@serve.deployment(name="Analytics", max_ongoing_requests=64, ray_actor_options={"num_cpus": 0})
class AnalyticsDeployment(Analytics):
    def __init__(self, settings: AppSettings) -> None:
        super().__init__(DataLake(settings.data_dir))

    def check_health(self) -> None:
        if not self.lake.root.exists():
            raise RuntimeError(f"data root {self.lake.root} is missing")
