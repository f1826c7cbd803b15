"""Where a request's time goes inside the Serve graph, read from Serve's own access logs.

Each replica logs every call it serves (``CALL send OK 132.1ms``; the Ingress logs the HTTP
route), JSON-encoded with the request id, which Serve hands on to the calls a request makes;
so one HTTP request's calls can be collected across the deployments. For a request:

- ``http_proxy``: the client's time less the Ingress's (HTTP, the proxy, the hop to Ingress);
- ``ingress``: the Ingress's time less the Orchestrator's and the calls Ingress made itself
  (FastAPI, auth, dependencies, and the transit of its handle calls);
- ``orchestrator``: the Orchestrator's time less the time its callees were busy (the agent
  loop's own work and the transit of every handle call it made);
- one entry per callee deployment: the time its replica spent serving this request's calls
  (what the in-process path does too), and the number of calls.

Start the app with :func:`logging_options` to get such logs; a log line's timestamp is the
call's end, so a call spans ``[end - latency, end]``.
"""

from __future__ import annotations

import json
import re
import statistics
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

CALL = re.compile(r"^CALL (?P<method>\w+) \w+ (?P<ms>[\d.]+)ms$")
ROUTE = re.compile(r"^(?P<method>[A-Z]+) \S+ \d+ (?P<ms>[\d.]+)ms$")
TOP = ("Ingress", "Orchestrator")


def logging_options(logs_dir: Path) -> dict[str, Any]:
    """Application options that make every replica write JSON access logs to `logs_dir`."""
    return {
        "logging_config": {
            "encoding": "JSON",
            "enable_access_log": True,
            "logs_dir": str(logs_dir),
        }
    }


def read_calls(logs_dir: Path, request_ids: set[str]) -> dict[str, list[dict[str, Any]]]:
    """Every logged call of each request id: deployment, method, start and end (ms)."""
    calls: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for path in sorted(logs_dir.glob("replica_*.log")):
        for line in path.read_text(errors="replace").splitlines():
            if not line.startswith("{"):
                continue
            try:
                record = json.loads(line)
            except ValueError:
                continue
            rid = record.get("request_id")
            if rid not in request_ids:
                continue
            message = record.get("message", "")
            match = CALL.match(message) or ROUTE.match(message)
            if match is None:
                continue
            end = record["timestamp_ns"] / 1e6
            ms = float(match["ms"])
            deployment = str(record.get("deployment", "")).split("_", 1)[-1]
            calls[rid].append(
                {"deployment": deployment, "method": match["method"], "start": end - ms, "end": end}
            )
    return calls


def _busy_ms(spans: list[tuple[float, float]]) -> float:
    """The time covered by the union of `spans` (calls run in parallel count once)."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(spans):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


def breakdown(client_ms: float, calls: list[dict[str, Any]]) -> dict[str, Any] | None:
    """One request's time by part (see the module's doc); None when its top calls are not
    in the logs (a log line lost or not yet written)."""
    ingress = next((c for c in calls if c["deployment"] == "Ingress"), None)
    orch = next((c for c in calls if c["deployment"] == "Orchestrator"), None)
    if ingress is None or orch is None:
        return None
    inner = [c for c in calls if c["deployment"] not in TOP]
    # A call the Orchestrator made starts within its span. Its end may be logged after the
    # Orchestrator's: the callee writes its log line once its reply is on its way.
    in_orch = [c for c in inner if orch["start"] <= c["start"] <= orch["end"]]
    by_ingress = [c for c in inner if c not in in_orch]
    ingress_ms = ingress["end"] - ingress["start"]
    orch_ms = orch["end"] - orch["start"]
    ingress_busy = _busy_ms(
        [(orch["start"], orch["end"])] + [(c["start"], c["end"]) for c in by_ingress]
    )
    parts: dict[str, Any] = {
        "client_ms": client_ms,
        "http_proxy_ms": client_ms - ingress_ms,
        "ingress_ms": ingress_ms - ingress_busy,
        "orchestrator_ms": orch_ms - _busy_ms([(c["start"], c["end"]) for c in in_orch]),
        "calls": len(inner) + 1,
    }
    for c in inner:
        key = c["deployment"].lower()
        parts[f"{key}_ms"] = parts.get(f"{key}_ms", 0.0) + c["end"] - c["start"]
        parts[f"{key}_calls"] = parts.get(f"{key}_calls", 0) + 1
        where = "ingress" if c in by_ingress else "orchestrator"
        methods = parts.setdefault("methods", {})
        name = f"{where} -> {c['deployment']}.{c['method']}"
        methods[name] = methods.get(name, 0) + 1
    return parts


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians of each part over requests of one kind, and the call list of a typical one:
    the list most of them made (a request that refreshed the Ingress's key cache made one
    more call, and is not typical)."""
    if not rows:
        return {"n": 0}
    keys = sorted({k for r in rows for k in r if k != "methods"})
    out: dict[str, Any] = {"n": len(rows)}
    for key in keys:
        values = [float(r.get(key, 0)) for r in rows]
        out[key] = round(statistics.median(values), 2)
    lists = Counter(tuple(sorted(r.get("methods", {}).items())) for r in rows)
    out["methods"] = dict(lists.most_common(1)[0][0])
    return out
