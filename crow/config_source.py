"""Where a job's settings come from: its ``--config``.

- a serve_config.yaml: its app's args;
- ``http(s)://HOST:8265``: the args of the app as that Ray dashboard's Serve API reports them
  (what the cluster serves now, not a copy that may be older);
- ``env``: the args in the ``CROW_APP_ARGS`` variable, one JSON object. This is how
  ReindexControl submits jobs (:func:`app_args_env` makes the variable): the job sees exactly
  the args the app runs with, read as args, not as environment overrides;
- ``none``: the defaults (tests, a scratch run), e.g. with ``CROW_VAR_DIR``.

In every case the environment's allowlisted paths and addresses (``CROW_VAR_DIR``,
``CROW_LLM__BASE_URL``, ...) override the args, and any other ``CROW_*`` variable stops the job
(:mod:`crow.settings_env`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx

from crow.settings import AppSettings
from crow.settings_env import APP_ARGS_ENV, EnvironmentSettingError

CONFIG_HELP = (
    "a serve_config.yaml, a Ray dashboard (http://HOST:8265: the args the app serves), "
    f"'env': the app args in ${APP_ARGS_ENV} (how the app submits jobs), or 'none': the "
    "defaults; CROW_VAR_DIR and the other allowlisted path variables override any of them"
)
SERVE_APPLICATIONS = "/api/serve/applications/"
"""Ray's Serve REST API: the deployed config of every application (args included)."""


class ConfigError(ValueError):
    """The ``--config`` named cannot be read; the job must not run on defaults instead."""


def settings_from_config_arg(
    value: str | Path, *, app: str = "crow", timeout_s: float = 10.0
) -> AppSettings:
    """The settings a job's ``--config`` names (see the module docstring).

    Anything else raises ConfigError: a typo must not run a job on the CPU defaults. So does a
    refused ``CROW_*`` variable, with the message of :mod:`crow.settings_env`."""
    text = str(value).strip()
    try:
        if text.lower() == "none":
            return AppSettings()
        if text.lower() == "env":
            return AppSettings.from_args(args_from_env(os.environ))
        if text.startswith(("http://", "https://")):
            return AppSettings.from_args(served_args(text, app, timeout_s))
        if not Path(text).is_file():
            raise ConfigError(f"--config {value}: no such file")
        return AppSettings.from_serve_config(text)
    except EnvironmentSettingError as exc:
        raise ConfigError(str(exc)) from exc


def app_args_env(args: dict[str, Any]) -> dict[str, str]:
    """The environment that hands the app's `args` to a job run with ``--config env``."""
    return {APP_ARGS_ENV: json.dumps(args)}


def args_from_env(environ: Mapping[str, str]) -> dict[str, Any]:
    """The app args :func:`app_args_env` put in `environ`."""
    text = environ.get(APP_ARGS_ENV)
    if text is None:
        raise ConfigError(f"--config env: {APP_ARGS_ENV} is not set")
    try:
        args = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"--config env: {APP_ARGS_ENV} is not JSON ({exc})") from exc
    if not isinstance(args, dict):
        raise ConfigError(f"--config env: {APP_ARGS_ENV} is not a JSON object of app args")
    return args


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
