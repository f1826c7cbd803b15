"""What the environment may set of the app settings: paths and addresses, nothing else.

The serve config's application ``args`` are the app's configuration; the environment holds
only what belongs to the machine a process runs on. :data:`ENV_SETTINGS` is that allowlist:
the paths of the state (``CROW_VAR_DIR``, ``CROW_DATA_ROOT``, ``CROW_INDEX_ROOT``,
``CROW_CHAT_DB``, ``CROW_MODEL_CACHE``) and the OpenAI-compatible endpoint's address
(``CROW_LLM__BASE_URL``). Such a variable overrides the value of the args. Secrets are no
settings: a setting names the variable or file a secret is in (``auth.operator_token_env``,
``llm.api_key_env``, ``*_file``), and :func:`crow.settings.read_secret` reads it.

Any other ``CROW_*`` variable in the environment (``CROW_LLM__BACKEND``, ``CROW_AUTH__MODE``,
a typo) stops the settings from being built with :class:`EnvironmentSettingError`, which
names it and says where to set it instead: neither a silent switch of the backend or of auth,
nor a silently ignored variable. :data:`NOT_SETTINGS` names the ``CROW_*`` variables that are
no settings and are let through: ``CROW_APP_ARGS`` (the app's args handed to the jobs it
submits, read by ``--config env``, see :mod:`crow.config_source`) and ``CROW_JOB_ID`` (a
reindex job's default ``--job-id``). Names are compared case-insensitively, as pydantic-settings did.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from pydantic.fields import FieldInfo
from pydantic_settings import PydanticBaseSettingsSource

ENV_PREFIX = "CROW_"
ENV_SETTINGS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "CROW_VAR_DIR": ("var_dir",),
        "CROW_DATA_ROOT": ("data_root",),
        "CROW_INDEX_ROOT": ("index_root",),
        "CROW_CHAT_DB": ("chat_db",),
        "CROW_MODEL_CACHE": ("model_cache",),
        "CROW_LLM__BASE_URL": ("llm", "base_url"),
    }
)
"""The only ``CROW_*`` variables that set a setting: variable -> path of the setting."""
APP_ARGS_ENV = "CROW_APP_ARGS"
"""The app's args as one JSON object, for the jobs the app submits (``--config env``)."""
JOB_ID_ENV = "CROW_JOB_ID"
NOT_SETTINGS = frozenset({APP_ARGS_ENV, JOB_ID_ENV})
"""``CROW_*`` variables that are no settings; the settings neither read nor refuse them."""


class EnvironmentSettingError(ValueError):
    """A ``CROW_*`` variable sets what belongs in the serve config's args."""


def refused_variables(environ: Mapping[str, str]) -> list[str]:
    """The ``CROW_*`` variables of `environ` that are neither allowed settings nor known
    non-settings, sorted."""
    return sorted(
        name
        for name in environ
        if (key := name.upper()).startswith(ENV_PREFIX)
        and key not in ENV_SETTINGS
        and key not in NOT_SETTINGS
    )


def check_environment(environ: Mapping[str, str] | None = None) -> None:
    """Raise EnvironmentSettingError naming every refused ``CROW_*`` variable."""
    refused = refused_variables(os.environ if environ is None else environ)
    if not refused:
        return
    settings = ", ".join(".".join(name[len(ENV_PREFIX) :].lower().split("__")) for name in refused)
    raise EnvironmentSettingError(
        f"environment variable{'s' if len(refused) > 1 else ''} {', '.join(refused)}: the "
        f"environment may set only paths and addresses ({', '.join(ENV_SETTINGS)}). Set "
        f"{settings} in the serve config's application args instead (serve_config.yaml, "
        "cluster/serve_config.gpu.yaml, the RayService's serveConfigV2) and unset "
        f"{'them' if len(refused) > 1 else 'it'}; a secret goes in the variable or file its "
        "setting names (auth.operator_token_env, llm.api_key_env, *_file)."
    )


def environment_values(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The allowed settings `environ` sets, nested as the args are; refused variables raise."""
    environ = os.environ if environ is None else environ
    check_environment(environ)
    values: dict[str, Any] = {}
    for name, value in environ.items():
        if (path := ENV_SETTINGS.get(name.upper())) is None:
            continue
        *sections, field = path
        target = values
        for section in sections:
            target = target.setdefault(section, {})
        target[field] = value
    return values


class AllowlistedEnvSource(PydanticBaseSettingsSource):
    """The settings source of the environment: :func:`environment_values`."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # unused: __call__ reads the environment at once

    def __call__(self) -> dict[str, Any]:
        return environment_values()
