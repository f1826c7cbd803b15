"""The real-model guard, the LLM response cache, and the GPU (vLLM) configuration."""

import pytest
import yaml

from crow.settings import AppSettings
from deployments.llm_vllm import vllm_llm_config
from models.cache import ResponseCache
from models.local import LocalChatModel, LocalModelConfig
from models.messages import AssistantTurn, Message, ModelParams, ToolSpec
from tests.repo import ROOT


def test_an_unmarked_test_cannot_load_a_real_model(tmp_path):
    with pytest.raises(AssertionError, match="real_model"):
        LocalChatModel(LocalModelConfig(cache_dir=tmp_path)).load()


def test_cache_answers_identical_deterministic_requests_only():
    cache = ResponseCache(max_entries=2)
    msgs, tools = [Message.user("How many?")], [ToolSpec(name="t")]
    key = ResponseCache.key("m", msgs, tools, ModelParams())
    assert cache.get(key) is None
    cache.put(key, AssistantTurn(text="42"))
    assert cache.get(ResponseCache.key("m", msgs, tools, ModelParams(timeout_s=5))).text == "42"
    assert ResponseCache.key("m", msgs, tools, ModelParams(temperature=0.7)) is None
    assert ResponseCache.key("m", [Message.user("How many??")], tools, ModelParams()) != key
    assert ResponseCache.key("other", msgs, tools, ModelParams()) != key
    for i in range(3):  # bounded: the oldest entry goes
        cache.put(f"k{i}", AssistantTurn(text=str(i)))
    assert cache.get(key) is None and cache.stats() == {"hits": 1, "misses": 2, "entries": 2}


def test_vllm_config_has_tensor_parallel_tool_calling_and_prefix_caching():
    gpu = yaml.safe_load((ROOT / "cluster" / "serve_config.gpu.yaml").read_text())
    args = gpu["applications"][0]["args"]
    settings = AppSettings.from_args(args)
    assert settings.llm.backend == "vllm"
    cfg = vllm_llm_config(settings)
    engine = cfg["engine_kwargs"]
    assert engine["tensor_parallel_size"] >= 2 and engine["quantization"] == "fp8"
    assert engine["enable_auto_tool_choice"] and engine["tool_call_parser"] == "llama3_json"
    assert engine["enable_prefix_caching"]
    assert cfg["model_loading_config"]["model_source"] == "meta-llama/Llama-3.3-70B-Instruct"
    assert cfg["deployment_config"]["autoscaling_config"]["max_replicas"] >= 1
