"""Where a job's settings come from: its ``--config`` names a serve_config file, the Ray
dashboard of the cluster serving the app (the args being served now), or ``none``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from crow.settings import AppSettings

CONFIG_HELP = (
    "a serve_config.yaml, a Ray dashboard (http://HOST:8265: the args the app serves), or "
    "'none': CROW_* variables only"
)
SERVE_APPLICATIONS = "/api/serve/applications/"
"""Ray's Serve REST API: the deployed config of every application (args included)."""


class ConfigError(ValueError):
    """The ``--config`` named cannot be read; the job must not run on defaults instead."""


def settings_from_config_arg(
    value: str | Path, *, app: str = "crow", timeout_s: float = 10.0
) -> AppSettings:
    """The settings a job's ``--config`` names.

    - ``none``: ``CROW_*`` variables only (how ReindexControl submits jobs);
    - ``http(s)://HOST:8265``: the args of ``app`` as that Ray dashboard's Serve API reports
      them (what the cluster serves, not a copy that may be older);
    - an existing file: that serve_config.yaml's app args.

    ``CROW_*`` variables override in every case. Anything else raises ConfigError: a typo
    must not run a job on the CPU defaults."""
    text = str(value).strip()
    if text.lower() == "none":
        return AppSettings()
    if text.startswith(("http://", "https://")):
        return AppSettings.from_args(served_args(text, app, timeout_s))
    if not Path(text).is_file():
        raise ConfigError(f"--config {value}: no such file")
    return AppSettings.from_serve_config(text)


def served_args(dashboard: str, app: str, timeout_s: float) -> dict[str, Any]:
    """The args of the application ``app`` the Ray dashboard at ``dashboard`` serves."""
    url = dashboard.rstrip("/") + SERVE_APPLICATIONS
    try:
        response = httpx.get(url, timeout=timeout_s)
        response.raise_for_status()
        applications = response.json().get("applications") or {}
    except (httpx.HTTPError, ValueError, AttributeError) as exc:
        raise ConfigError(f"--config {dashboard}: cannot read {url} ({exc})") from exc
    config = (applications.get(app) or {}).get("deployed_app_config")
    if not config:
        raise ConfigError(
            f"--config {dashboard}: no application {app!r} is deployed there "
            f"(deployed: {sorted(applications) or 'none'})"
        )
    return dict(config.get("args") or {})
