"""The GPU profile's vLLM deployment is correct by construction, checked on CPU.

The generated LLMConfig kwargs are checked against (1) the argument names of vLLM 0.29.0,
vendored in tests/data/vllm_args.json from the release's source (tests/data/
vllm_args_extract.py), and (2) the installed Ray 2.60: its real LLMConfig is constructed,
and its real VLLMEngineConfig sorts the engine kwargs and makes the placement bundles, with
vLLM's two argument dataclasses stood in for by dataclasses of the vendored names (where
vLLM itself is installed, the real ones are used and compared with the vendored list).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import sys
import types
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import ValidationError

from crow.settings import AppSettings, VLLMSettings, serve_config_args
from deployments.llm_vllm import CHAT_TEMPLATES, one_call_per_message, vllm_llm_config
from models.messages import Message, ModelParams, ToolCall
from models.openai_wire import request_body
from tests.models.tools_fixture import TOOLS
from tests.repo import ROOT

VLLM = json.loads((ROOT / "tests" / "data" / "vllm_args.json").read_text())
ENGINE_ARGS, FRONTEND_ARGS = set(VLLM["engine_args"]), set(VLLM["frontend_args"])
HAS_VLLM = importlib.util.find_spec("vllm") is not None


def gpu_profile() -> AppSettings:
    """The GPU profile's llm settings (its other sections are test_configs.py's)."""
    return AppSettings(llm=serve_config_args(ROOT / "cluster" / "serve_config.gpu.yaml")["llm"])


def with_vllm(**vllm: Any) -> AppSettings:
    return AppSettings(llm={"backend": "vllm", "model": "llama", "vllm": vllm})


@pytest.fixture
def ray_vllm(monkeypatch: pytest.MonkeyPatch) -> Iterator[type]:
    """Ray 2.60's VLLMEngineConfig; without vLLM, over stand-ins for vLLM's AsyncEngineArgs
    and FrontendArgs with the vendored field names (all Ray reads of them)."""
    before = set(sys.modules)
    if not HAS_VLLM:

        def stand_in(name: str, fields: set[str]) -> type:
            return dataclasses.make_dataclass(name, [(f, Any, None) for f in sorted(fields)])

        modules = {
            "vllm": {},
            "vllm.engine": {},
            "vllm.engine.arg_utils": {"AsyncEngineArgs": stand_in("AsyncEngineArgs", ENGINE_ARGS)},
            "vllm.entrypoints": {},
            "vllm.entrypoints.launchers": {},
            "vllm.entrypoints.launchers.cli_args": {
                "FrontendArgs": stand_in("FrontendArgs", FRONTEND_ARGS)
            },
        }
        for name, attrs in modules.items():
            module = types.ModuleType(name)
            module.__dict__.update(attrs)
            monkeypatch.setitem(sys.modules, name, module)
    from ray.llm._internal.serve.engines.vllm.vllm_models import VLLMEngineConfig

    yield VLLMEngineConfig
    if not HAS_VLLM:  # modules imported over the stand-ins go with them
        for name in set(sys.modules) - before:
            if name.startswith("ray.llm._internal.serve.engines"):
                del sys.modules[name]


def llm_config(settings: AppSettings) -> Any:
    """Ray's LLMConfig of the settings (the internal class: ray.serve.llm's public subclass,
    which adds nothing, imports vLLM's protocol models)."""
    from ray.llm._internal.serve.core.configs.llm_config import LLMConfig

    return LLMConfig(**vllm_llm_config(settings))


# -- vLLM 0.29.0's argument names -----------------------------------------------------------


def test_the_vendored_names_are_vllm_0_29_0s() -> None:
    assert VLLM["vllm_version"] == "0.29.0"
    assert {"tensor_parallel_size", "quantization", "enable_log_requests"} <= ENGINE_ARGS
    assert {"chat_template", "tool_call_parser", "enable_auto_tool_choice"} <= FRONTEND_ARGS
    assert not {"chat_template", "tool_call_parser", "enable_auto_tool_choice"} & ENGINE_ARGS


@pytest.mark.parametrize("profile", [gpu_profile, AppSettings], ids=["gpu", "defaults"])
def test_every_engine_kwarg_is_a_vllm_0_29_argument(profile: Any) -> None:
    engine = vllm_llm_config(profile())["engine_kwargs"]
    unknown = set(engine) - ENGINE_ARGS - FRONTEND_ARGS
    assert not unknown, f"not vLLM 0.29.0 arguments: {sorted(unknown)}"
    assert not {"model", "served_model_name", "distributed_executor_backend"} & set(engine)
    assert engine["tool_call_parser"] in VLLM["tool_parsers"]
    assert engine["quantization"] in VLLM["quantization_methods"]
    assert engine["enable_auto_tool_choice"] is True


def test_a_misspelt_engine_kwarg_is_caught(ray_vllm: type) -> None:
    settings = with_vllm(engine_kwargs={"enable_prefix_cache": True})  # vLLM: _caching
    assert set(vllm_llm_config(settings)["engine_kwargs"]) - ENGINE_ARGS - FRONTEND_ARGS
    with pytest.raises(ValueError, match="Unknown engine argument: enable_prefix_cache"):
        ray_vllm.from_llm_config(llm_config(settings))


# -- Ray 2.60's LLMConfig --------------------------------------------------------------------


def test_the_gpu_profile_builds_rays_llm_config() -> None:
    from ray.llm._internal.serve.core.configs.accelerators import GPUConfig
    from ray.llm._internal.serve.core.configs.llm_config import LLMConfig

    settings = gpu_profile()
    kwargs = vllm_llm_config(settings)
    assert set(kwargs) <= set(LLMConfig.model_fields)
    config = LLMConfig(**kwargs)
    assert config.model_id == settings.llm.model == "llama-3.3-70b-instruct"
    assert config.model_loading_config.model_source == "meta-llama/Llama-3.3-70B-Instruct"
    assert isinstance(config.accelerator_config, GPUConfig)  # inferred from the GPU bundles


def test_ray_sorts_engine_and_frontend_args_as_vllm_reads_them(ray_vllm: type) -> None:
    engine_config = ray_vllm.from_llm_config(llm_config(gpu_profile()))
    template = str(CHAT_TEMPLATES / "tool_chat_template_llama3.1_json.jinja")
    assert engine_config.frontend_kwargs == {
        "enable_auto_tool_choice": True,
        "tool_call_parser": "llama3_json",
        "chat_template": template,
    }
    assert engine_config.engine_kwargs["tensor_parallel_size"] == 4
    assert engine_config.engine_kwargs["quantization"] == "fp8"
    init = engine_config.get_initialization_kwargs()  # what AsyncEngineArgs(**...) receives
    assert init["model"] == "meta-llama/Llama-3.3-70B-Instruct"
    assert init["served_model_name"] == ["llama-3.3-70b-instruct"]
    assert init["distributed_executor_backend"] == "ray"
    assert set(init) <= ENGINE_ARGS


def test_one_gpu_bundle_per_rank_strictly_packed_on_one_node(ray_vllm: type) -> None:
    settings = with_vllm(tensor_parallel_size=4)
    engine_config = ray_vllm.from_llm_config(llm_config(settings))
    assert engine_config.placement_strategy == "STRICT_PACK"
    assert engine_config.placement_bundles == [{"GPU": 1.0}] * 4
    two_stages = with_vllm(
        tensor_parallel_size=2, pipeline_parallel_size=2, placement_strategy="PACK"
    )
    engine_config = ray_vllm.from_llm_config(llm_config(two_stages))
    assert engine_config.placement_strategy == "PACK"
    assert engine_config.placement_bundles == [{"GPU": 1.0}] * 4


def test_no_accelerator_type_resource_unless_set(ray_vllm: type) -> None:
    """Ray Serve LLM adds `accelerator_type:<X>` to every bundle (and to the engine-config task)
    when accelerator_type is set; the KubeRay autoscaler cannot see that resource on a node
    not yet started, so it is off by default."""
    from ray.llm._internal.serve.core.configs.accelerators import GPUAccelerator

    assert VLLMSettings().accelerator_type is None
    kwargs = vllm_llm_config(with_vllm())
    assert "accelerator_type" not in kwargs
    engine_config = ray_vllm.from_llm_config(llm_config(with_vllm()))
    assert not any("accelerator_type" in k for b in engine_config.placement_bundles for k in b)
    assert "accelerator_type" not in GPUAccelerator().get_remote_options(None)

    engine_config = ray_vllm.from_llm_config(llm_config(with_vllm(accelerator_type="H100")))
    assert all(b.get("accelerator_type:H100") for b in engine_config.placement_bundles)


def test_an_accelerator_type_ray_does_not_know_is_refused() -> None:
    with pytest.raises(ValidationError, match="Unsupported accelerator type"):
        llm_config(with_vllm(accelerator_type="H101"))


# -- settings ---------------------------------------------------------------------------------


def test_chat_template_resolution() -> None:
    shipped = CHAT_TEMPLATES / "tool_chat_template_llama3.1_json.jinja"
    assert vllm_llm_config(with_vllm())["engine_kwargs"]["chat_template"] == str(shipped)
    absolute = vllm_llm_config(with_vllm(chat_template=str(shipped)))
    assert absolute["engine_kwargs"]["chat_template"] == str(shipped)
    with pytest.raises(FileNotFoundError, match=r"no such file .*llama9\.jinja.*shipped: \["):
        vllm_llm_config(with_vllm(chat_template="llama9.jinja"))
    with pytest.raises(FileNotFoundError, match="no such file"):
        vllm_llm_config(with_vllm(chat_template="/nonexistent/t.jinja"))
    with pytest.raises(ValidationError, match="a file name or an absolute path"):
        with_vllm(chat_template="chat_templates/t.jinja")
    none = vllm_llm_config(with_vllm(chat_template=None))["engine_kwargs"]
    assert "chat_template" not in none and none["tool_call_parser"] == "llama3_json"


def test_no_tool_call_parser_means_no_auto_tool_choice() -> None:
    """vLLM refuses enable_auto_tool_choice without a parser (vllm serve checks it; Ray not)."""
    engine = vllm_llm_config(with_vllm(tool_call_parser=None))["engine_kwargs"]
    assert "tool_call_parser" not in engine and "enable_auto_tool_choice" not in engine


def test_engine_kwargs_cannot_set_what_a_setting_sets() -> None:
    for key in ("tool_call_parser", "chat_template", "tensor_parallel_size", "model"):
        with pytest.raises(ValidationError, match=f"engine_kwargs \\['{key}'\\]"):
            with_vllm(engine_kwargs={key: "x"})
    extra = vllm_llm_config(with_vllm(engine_kwargs={"enforce_eager": True}))["engine_kwargs"]
    assert extra["enforce_eager"] is True


# -- the shipped chat template -----------------------------------------------------------------


def render(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
    """As vLLM renders a request: tool-call arguments parsed to dicts, then transformers."""
    from transformers.utils.chat_template_utils import render_jinja_template

    for message in messages:
        for call in message.get("tool_calls") or []:
            call["function"]["arguments"] = json.loads(call["function"]["arguments"])
    template = (CHAT_TEMPLATES / "tool_chat_template_llama3.1_json.jinja").read_text()
    rendered, _ = render_jinja_template(
        [messages],
        tools=tools,
        chat_template=template,
        add_generation_prompt=True,
        bos_token="<|begin_of_text|>",
    )
    return rendered[0]


def conversation(*calls: ToolCall) -> list[Message]:
    return [
        Message.system("You answer retail questions."),
        Message.user("find tents"),
        Message.assistant("", calls),
        *(Message.tool(f"result {c.id}", tool_call_id=c.id) for c in calls),
    ]


def test_the_template_renders_the_agents_tool_conversation() -> None:
    call = ToolCall(id="c0", name="search_products", arguments={"query": "tents"})
    body = request_body("llama", conversation(call), TOOLS, ModelParams(), stream=True)
    text = render(body["messages"], body["tools"])
    assert text.startswith("<|begin_of_text|><|start_header_id|>system<|end_header_id|>")
    assert '"name": "search_products"' in text and "You answer retail questions." in text
    assert '{"name": "search_products", "parameters": {"query": "tents"}}<|eot_id|>' in text
    assert '<|start_header_id|>ipython<|end_header_id|>\n\n{"output": "result c0"}' in text
    assert text.endswith("<|start_header_id|>assistant<|end_header_id|>\n\n")


def test_several_calls_in_one_turn_are_sent_one_per_message() -> None:
    import jinja2

    calls = [
        ToolCall(id=f"c{i}", name="search_products", arguments={"query": q})
        for i, q in enumerate(("tents", "stoves"))
    ]
    body = request_body("llama", conversation(*calls), TOOLS, ModelParams(), stream=True)
    with pytest.raises(jinja2.TemplateError, match="only supports single tool-calls"):
        render(json.loads(json.dumps(body["messages"])), body["tools"])
    messages = one_call_per_message(body["messages"])
    assert [(m["role"], m.get("tool_call_id")) for m in messages[2:]] == [
        ("assistant", None),
        ("tool", "c0"),
        ("assistant", None),
        ("tool", "c1"),
    ]
    assert [m["tool_calls"][0]["id"] for m in messages if m.get("tool_calls")] == ["c0", "c1"]
    text = render(messages, body["tools"])
    assert text.index('"tents"}}') < text.index("result c0") < text.index('"stoves"}}')
    assert one_call_per_message(body["messages"][:2]) == body["messages"][:2]
