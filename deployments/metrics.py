"""The Ray sink of crow.metrics: ray.util.metrics Counters and Histograms, made on first use."""

from __future__ import annotations

import logging
from typing import Any

from ray.util import metrics as ray_metrics

from crow.metrics import METRICS

log = logging.getLogger("ray.serve")


class RayMetrics:
    def __init__(self) -> None:
        self._made: dict[str, Any] = {}

    def _metric(self, name: str) -> Any:
        if name not in self._made:
            d = METRICS[name]
            if d.kind == "counter":
                self._made[name] = ray_metrics.Counter(
                    d.name, description=d.description, tag_keys=d.tags
                )
            else:
                self._made[name] = ray_metrics.Histogram(
                    d.name,
                    description=d.description,
                    boundaries=list(d.boundaries),
                    tag_keys=d.tags,
                )
        return self._made[name]

    def inc(self, name: str, value: float = 1.0, **tags: str) -> None:
        if value <= 0:  # Ray counters take positive increments only
            return
        try:
            self._metric(name).inc(value, tags=tags or None)
        except Exception:  # a metric must never fail the request it describes
            log.exception("metric %s not recorded", name)

    def observe(self, name: str, value: float, **tags: str) -> None:
        try:
            self._metric(name).observe(value, tags=tags or None)
        except Exception:
            log.exception("metric %s not recorded", name)
