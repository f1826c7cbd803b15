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


def _fields(model: type, prefix: str = "") -> list[str]:
    from pydantic import BaseModel

    names = []
    for name, info in model.model_fields.items():
        kind = info.annotation
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            names += _fields(kind, f"{prefix}{name}.")
        else:
            names.append(prefix + name)
    return names


def test_no_setting_holds_a_secret_only_where_to_read_it():
    """Application args are shown by the Ray dashboard and copied into reindex jobs'
    runtime_env: a secret must come from the environment or a file, named by a setting."""
    from crow.settings import AppSettings

    secret_words = {"token", "secret", "password", "credential", "credentials"}
    for name in _fields(AppSettings):
        leaf = name.rsplit(".", 1)[-1]
        if secret_words & set(leaf.split("_")) or "api_key" in leaf:
            assert leaf.endswith(("_env", "_file")), name


def test_the_gpu_profile_guards_every_route_and_reads_secrets_from_the_secret():
    service = yaml.safe_load((ROOT / "cluster" / "rayservice.yaml").read_text())
    served = yaml.safe_load(service["spec"]["serveConfigV2"])["applications"][0]["args"]
    gpu = yaml.safe_load((ROOT / "cluster" / "serve_config.gpu.yaml").read_text())
    args = gpu["applications"][0]["args"]
    assert served["auth"] == args["auth"] and served["quotas"] == args["quotas"]
    assert args["auth"].get("mode", "keys") == "keys" and args["auth"]["allowed_hosts"]
    # the in-cluster name the eval job calls /v1 by is an allowed Host
    assert f"{service['metadata']['name']}-serve-svc" in args["auth"]["allowed_hosts"]
    groups = [service["spec"]["rayClusterConfig"]["headGroupSpec"],
              *service["spec"]["rayClusterConfig"]["workerGroupSpecs"]]  # fmt: skip
    for group in groups:
        env = {e["name"]: e for e in group["template"]["spec"]["containers"][0]["env"]}
        token = env["ASK_CROW_OPERATOR_TOKEN"]["valueFrom"]["secretKeyRef"]
        assert token["name"] == "crow-secrets"
        assert "secretKeyRef" in env["OPENAI_API_KEY"]["valueFrom"]
    # the Ray dashboard / Jobs API is not published beyond the cluster
    text = (ROOT / "cluster" / "rayservice.yaml").read_text()
    assert "LoadBalancer" not in text and "NodePort" not in text


@pytest.mark.parametrize("path", CONFIGS)
def test_auth_off_is_never_configured_for_a_non_loopback_bind(path):
    config = yaml.safe_load(path.read_text())
    host = config.get("http_options", {}).get("host", "127.0.0.1")
    mode = (config["applications"][0]["args"].get("auth") or {}).get("mode", "keys")
    assert mode == "keys" or host in {"127.0.0.1", "localhost", "::1"}


def test_every_setting_is_read_somewhere():
    """A setting nothing reads is a promise the app doesn't keep: wire it or delete it."""
    from crow.settings import AppSettings

    sources = "\n".join(
        p.read_text()
        for folder in ("crow", "models", "jobs", "deployments", "indexes", "dashboard")
        for p in (ROOT / folder).rglob("*.py")
    )  # settings.py too: its properties read some (a declaration has no leading dot)
    unread = [name for name in _fields(AppSettings)
              if f".{name.rsplit('.', 1)[-1]}" not in sources]  # fmt: skip
    assert unread == []
