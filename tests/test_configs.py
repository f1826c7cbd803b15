"""Both serve configs parse, their args validate against build_app's schema, and every
deployment they configure exists in the graph (a typo anywhere fails here)."""

from pathlib import Path

import pytest
import yaml

from deployments.graph import resolve_args

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = [ROOT / "serve_config.yaml", ROOT / "cluster" / "serve_config.gpu.yaml"]
DEPLOYMENTS = {"Ingress", "ChatStore", "Orchestrator", "LLM", "Embedder", "Retriever", "Analytics",
               "ReindexControl"}  # fmt: skip


def graph_deployment_names() -> set[str]:
    from deployments import (
        analytics,
        chat_store,
        embedder,
        ingress,
        llm,
        orchestrator,
        reindex_control,
        retriever,
    )

    classes = [analytics.AnalyticsDeployment, chat_store.ChatStoreDeployment, embedder.EmbedderDeployment,
               ingress.Ingress, llm.LLMDeployment, orchestrator.OrchestratorDeployment,
               reindex_control.ReindexControlDeployment, retriever.RetrieverDeployment]  # fmt: skip
    return {c.name for c in classes}


def test_the_graph_has_the_documented_deployments():
    assert graph_deployment_names() == DEPLOYMENTS


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_serve_config_validates(path):
    config = yaml.safe_load(path.read_text())
    (app,) = config["applications"]
    assert app["import_path"] == "deployments.graph:build_app"
    resolve_args(app["args"])
    assert {d["name"] for d in app["deployments"]} <= DEPLOYMENTS


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_a_typo_in_args_fails(path):
    app = yaml.safe_load(path.read_text())["applications"][0]
    with pytest.raises(ValueError):
        resolve_args({**app["args"], "embeder": {"model": "x"}})
    with pytest.raises(ValueError):
        resolve_args({**app["args"], "llm": {**app["args"]["llm"], "bakend": "local"}})


def test_rayservice_serve_config_matches_the_gpu_profile():
    service = yaml.safe_load((ROOT / "cluster" / "rayservice.yaml").read_text())
    embedded = yaml.safe_load(service["spec"]["serveConfigV2"])
    gpu = yaml.safe_load((ROOT / "cluster" / "serve_config.gpu.yaml").read_text())
    (app,) = embedded["applications"]
    assert app["import_path"] == "deployments.graph:build_app"
    settings = resolve_args(app["args"])
    assert settings["llm"] == gpu["applications"][0]["args"]["llm"]
    assert {d["name"] for d in app["deployments"]} <= DEPLOYMENTS
    head = service["spec"]["rayClusterConfig"]["headGroupSpec"]
    assert "nvidia.com/gpu" not in head["template"]["spec"]["containers"][0]["resources"]["limits"]
    gpus = [g for g in service["spec"]["rayClusterConfig"]["workerGroupSpecs"]
            if "nvidia.com/gpu" in g["template"]["spec"]["containers"][0]["resources"]["limits"]]  # fmt: skip
    per_node = int(
        gpus[0]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"]
    )
    assert per_node >= app["args"]["llm"]["vllm"]["tensor_parallel_size"]


def test_rayjob_runs_the_reindex_module():
    job = yaml.safe_load((ROOT / "cluster" / "rayjob-reindex.yaml").read_text())
    assert job["spec"]["entrypoint"].startswith("python -m jobs.reindex --org ")


def test_eval_rayjob_evaluates_the_served_model_with_the_gpu_profile():
    import shlex

    from jobs.eval import build_parser

    job = yaml.safe_load((ROOT / "cluster" / "rayjob-eval.yaml").read_text())
    argv = shlex.split(job["spec"]["entrypoint"])
    assert argv[:3] == ["python", "-m", "jobs.eval"]
    args = build_parser().parse_args(argv[3:])
    assert (ROOT / args.config).is_file() and args.config.name == "serve_config.gpu.yaml"
    service = yaml.safe_load((ROOT / "cluster" / "rayservice.yaml").read_text())
    port = yaml.safe_load(service["spec"]["serveConfigV2"])["http_options"]["port"]
    assert args.llm_url == f"http://{service['metadata']['name']}-serve-svc:{port}/v1"
