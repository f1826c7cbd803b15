from pathlib import Path

import pytest
from pydantic import ValidationError

from crow.settings import AppSettings
from crow.settings_env import EnvironmentSettingError
from tests.repo import ROOT


def test_args_fill_settings_and_derive_paths():
    s = AppSettings.from_args({"var_dir": "/srv/crow", "limits": {"max_message_chars": 99}})
    assert s.limits.max_message_chars == 99
    assert s.data_dir == Path("/srv/crow/data")
    assert s.chat_db_path == Path("/srv/crow/chat.duckdb")
    assert s.index_dir == Path("/srv/crow/indexes")


def test_environment_overrides_paths_and_addresses_only(monkeypatch):
    """Paths and the endpoint's address may come from the environment; anything else a
    CROW_* variable would set fails loudly instead of switching the app silently
    (more in tests/crow/test_config_env.py)."""
    monkeypatch.setenv("CROW_VAR_DIR", "/from/env")
    monkeypatch.setenv("CROW_LLM__BASE_URL", "http://llm.internal:8000/v1")
    s = AppSettings.from_args(
        {"var_dir": "/from/args", "limits": {"max_message_chars": 5}, "llm": {"backend": "openai"}}
    )
    assert s.var_dir == Path("/from/env")
    assert s.llm.base_url == "http://llm.internal:8000/v1" and s.llm.backend == "openai"
    assert s.limits.max_message_chars == 5
    monkeypatch.setenv("CROW_LLM__BACKEND", "openai")
    with pytest.raises(EnvironmentSettingError, match=r"CROW_LLM__BACKEND.*Set llm\.backend in"):
        AppSettings.from_args({})


@pytest.mark.parametrize(
    "args",
    [{"var_dri": "x"}, {"limits": {"max_mesage_chars": 1}}, {"llm": {"backend": "gpt"}}],
)
def test_typos_and_bad_values_are_rejected(args):
    with pytest.raises(ValidationError):
        AppSettings.from_args(args)


def test_agent_guidance_follows_the_backend_unless_set() -> None:
    """Small-model hints are on for the local model only; no config turns them on for a large
    model by leaving the agent block out (the GPU profile and its RayService omit it)."""
    root = ROOT
    assert AppSettings.from_serve_config(root / "serve_config.yaml").agent_guidance == "hints"
    gpu = AppSettings.from_serve_config(root / "cluster" / "serve_config.gpu.yaml")
    assert gpu.llm.backend == "vllm" and gpu.agent_guidance == "none"
    assert AppSettings.from_args({"llm": {"backend": "openai"}}).agent_guidance == "none"
    forced = AppSettings.from_args({"agent": {"guidance": "none"}})
    assert forced.agent_guidance == "none"


def test_git_credentials_never_ride_in_the_source_url():
    for url in ("https://bot:ghp_secret@github.com/acme/kb.git", "https://token@git.example/kb"):
        with pytest.raises(ValidationError, match="no credentials in the URL"):
            AppSettings.from_args(
                {"orgs": {"acme": {"knowledge_source": {"kind": "git", "location": url}}}}
            )
    ok = AppSettings.from_args(
        {
            "orgs": {
                "acme": {
                    "knowledge_source": {
                        "kind": "git",
                        "location": "https://github.com/acme/kb.git",
                    }
                }
            }
        }
    )
    assert ok.orgs["acme"].knowledge_source.location.startswith("https://github.com/")
