"""The environment sets paths and addresses only (crow.settings_env), and the jobs the app
submits get the app's args as args: CROW_APP_ARGS, read by ``--config env``."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from crow.config_source import CONFIG_HELP, ConfigError, app_args_env, settings_from_config_arg
from crow.settings import AppSettings, serve_config_args
from crow.settings_env import (
    APP_ARGS_ENV,
    ENV_SETTINGS,
    NOT_SETTINGS,
    EnvironmentSettingError,
    refused_variables,
)
from tests.repo import ROOT

GPU_CONFIG = ROOT / "cluster" / "serve_config.gpu.yaml"


@pytest.mark.parametrize(
    ("name", "setting"),
    [
        ("CROW_LLM__BACKEND", "llm.backend"),
        ("CROW_AUTH__MODE", "auth.mode"),
        ("CROW_LIMITS__MAX_MESSAGE_CHARS", "limits.max_message_chars"),
        ("CROW_EMBEDDER", "embedder"),
        ("crow_quotas__daily_tokens", "quotas.daily_tokens"),  # names are case-insensitive
        ("CROW_VAR_DIRR", "var_dirr"),  # a typo of an allowed one is no less loud
    ],
)
def test_a_setting_in_the_environment_fails_naming_it(monkeypatch, name, setting) -> None:
    monkeypatch.setenv(name, "off")
    with pytest.raises(EnvironmentSettingError) as info:
        AppSettings.from_args({"auth": {"mode": "keys"}})
    message = str(info.value)
    assert f"environment variable {name}:" in message
    assert f"Set {setting} in the serve config's application args instead" in message
    assert "CROW_VAR_DIR" in message and "CROW_LLM__BASE_URL" in message  # what is allowed


def test_every_refused_variable_is_named_at_once(monkeypatch) -> None:
    monkeypatch.setenv("CROW_AUTH__MODE", "off")
    monkeypatch.setenv("CROW_LLM__BACKEND", "openai")
    with pytest.raises(
        EnvironmentSettingError, match="variables CROW_AUTH__MODE, CROW_LLM__BACKEND:"
    ):
        AppSettings()


def test_paths_and_the_llm_address_override_the_args(monkeypatch, tmp_path) -> None:
    values = {
        "CROW_VAR_DIR": tmp_path / "var",
        "CROW_DATA_ROOT": tmp_path / "data",
        "CROW_INDEX_ROOT": tmp_path / "idx",
        "CROW_CHAT_DB": tmp_path / "chat.duckdb",
        "CROW_MODEL_CACHE": tmp_path / "models",
    }
    for name, value in values.items():
        monkeypatch.setenv(name, str(value))
    monkeypatch.setenv("CROW_LLM__BASE_URL", "http://vllm.internal:8000/v1")
    args = {
        "var_dir": "/args",
        "data_root": "/args/data",
        "llm": {"backend": "openai", "model": "m"},
    }
    s = AppSettings.from_args(args)
    assert (s.var_dir, s.data_dir, s.index_dir) == (
        tmp_path / "var",
        tmp_path / "data",
        tmp_path / "idx",
    )
    assert (s.chat_db_path, s.model_cache_dir) == (tmp_path / "chat.duckdb", tmp_path / "models")
    # the address joins the args' llm section instead of replacing it
    assert (s.llm.backend, s.llm.model) == ("openai", "m")
    assert s.llm.base_url == "http://vllm.internal:8000/v1"
    assert set(ENV_SETTINGS) == {*values, "CROW_LLM__BASE_URL"}


def test_non_settings_and_other_names_are_let_through(monkeypatch) -> None:
    for name in NOT_SETTINGS:
        monkeypatch.setenv(name, "{}" if name == APP_ARGS_ENV else "x")
    monkeypatch.setenv("ASK_CROW_OPERATOR_TOKEN", "op-secret-0123456789")  # a secret, not CROW_*
    monkeypatch.setenv("MY_CROW_THING", "x")
    assert AppSettings.from_args({}).var_dir == Path("var")
    assert refused_variables({"CROW_JOB_ID": "j", "CROW_APP_ARGS": "{}", "XCROW_A": ""}) == []


def test_every_crow_variable_the_code_reads_is_allowed_or_no_setting() -> None:
    """A CROW_* name the code reads from the environment must not make every settings
    construction fail: each is an allowed setting or listed in NOT_SETTINGS."""
    files = subprocess.run(
        [
            "git",
            "ls-files",
            "--cached",
            "--others",
            "--exclude-standard",
            "*.py",
            "*.yaml",
            "*.yml",
            "Makefile",
            "*.sh",
            "Dockerfile*",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    files = [f for f in files if not f.startswith("tests/")]  # tests set refused ones on purpose
    assert "jobs/reindex.py" in files and "cluster/rayservice.yaml" in files
    # os.environ.get("X") / os.environ["X"] / os.getenv("X"), a manifest's `name: X`, `-e X`
    read = re.compile(
        r"""(?:environ(?:\.get\()?\[?|getenv\(|name:\s*|-e\s+)["']?(CROW_[A-Z0-9_]+)"""
    )
    found = {m for f in files if (ROOT / f).is_file() for m in read.findall((ROOT / f).read_text())}
    assert found <= set(ENV_SETTINGS) | NOT_SETTINGS


def test_the_job_transport_round_trips_the_gpu_profile(monkeypatch) -> None:
    """ReindexControl's app_args_env + the job's ``--config env``: the same settings as the
    GPU profile's serve config, nested sections, lists and nulls included."""
    args = serve_config_args(GPU_CONFIG)
    assert args["llm"]["backend"] == "vllm" and isinstance(args["embedder"], dict)
    env = app_args_env(args)
    assert list(env) == [APP_ARGS_ENV] and json.loads(env[APP_ARGS_ENV]) == args
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    from_env = settings_from_config_arg("env")
    assert from_env == AppSettings.from_args(args) == settings_from_config_arg(GPU_CONFIG)
    assert from_env.model_dump() == AppSettings.from_serve_config(GPU_CONFIG).model_dump()


def test_config_env_refuses_missing_or_broken_args(monkeypatch) -> None:
    monkeypatch.delenv(APP_ARGS_ENV, raising=False)
    with pytest.raises(ConfigError, match="--config env: CROW_APP_ARGS is not set"):
        settings_from_config_arg("env")
    monkeypatch.setenv(APP_ARGS_ENV, "{not json")
    with pytest.raises(ConfigError, match="CROW_APP_ARGS is not JSON"):
        settings_from_config_arg("env")
    monkeypatch.setenv(APP_ARGS_ENV, "[1, 2]")
    with pytest.raises(ConfigError, match="not a JSON object of app args"):
        settings_from_config_arg("env")
    monkeypatch.setenv(APP_ARGS_ENV, json.dumps({"llm": {"backend": "gpt"}}))
    with pytest.raises(ValueError, match="backend"):  # validated as args are
        settings_from_config_arg("env")
    assert "'env'" in CONFIG_HELP and APP_ARGS_ENV in CONFIG_HELP


def test_a_refused_variable_is_a_config_error_for_every_config_kind(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("CROW_AUTH__MODE", "off")
    monkeypatch.setenv(APP_ARGS_ENV, "{}")
    for config in ("none", "env", str(GPU_CONFIG)):
        with pytest.raises(ConfigError, match="CROW_AUTH__MODE"):
            settings_from_config_arg(config)


def test_reindex_job_runs_with_the_env_of_reindex_control(monkeypatch, tmp_path, capsys) -> None:
    """jobs.reindex parses what ReindexControl submits: its --config and its environment."""
    from jobs import reindex

    args = {"var_dir": str(tmp_path / "var"), "reindex": {"batch_size": 32}}
    for name, value in app_args_env(args).items():
        monkeypatch.setenv(name, value)
    # gets as far as the (empty) data lake of the args' var_dir
    assert reindex.main(["--org", "nobody", "--job-id", "job_1", "--config", "env"]) == 2
    assert "unknown organization 'nobody'" in capsys.readouterr().err
