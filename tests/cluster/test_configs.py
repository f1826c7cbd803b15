"""Both serve configs parse, their args validate against build_app's schema, and every
deployment they configure exists in the graph (a typo anywhere fails here)."""

import pytest
import yaml

from deployments.graph import resolve_settings
from tests.repo import ROOT

CONFIGS = [ROOT / "serve_config.yaml", ROOT / "cluster" / "serve_config.gpu.yaml"]
DEPLOYMENTS = {
    "Ingress",
    "ChatStore",
    "Orchestrator",
    "LLM",
    "Embedder",
    "Retriever",
    "Analytics",
    "ReindexControl",
}


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

    classes = [
        analytics.AnalyticsDeployment,
        chat_store.ChatStoreDeployment,
        embedder.EmbedderDeployment,
        ingress.Ingress,
        llm.LLMDeployment,
        orchestrator.OrchestratorDeployment,
        reindex_control.ReindexControlDeployment,
        retriever.RetrieverDeployment,
    ]
    return {c.name for c in classes}


def test_the_graph_has_the_documented_deployments():
    assert graph_deployment_names() == DEPLOYMENTS


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_serve_config_validates(path):
    config = yaml.safe_load(path.read_text())
    (app,) = config["applications"]
    assert app["import_path"] == "deployments.graph:build_app"
    resolve_settings(app["args"])
    assert {d["name"] for d in app["deployments"]} <= DEPLOYMENTS


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_a_typo_in_args_fails(path):
    app = yaml.safe_load(path.read_text())["applications"][0]
    with pytest.raises(ValueError):
        resolve_settings({**app["args"], "embeder": {"model": "x"}})
    with pytest.raises(ValueError):
        resolve_settings({**app["args"], "llm": {**app["args"]["llm"], "bakend": "local"}})
    # FAISS runs on the CPU in every profile: the old GPU switch is refused, not ignored
    with pytest.raises(ValueError, match="use_gpu"):
        resolve_settings({**app["args"], "search": {"use_gpu": True}})


def test_rayservice_serves_the_gpu_profile_verbatim():
    """serveConfigV2 is serve_config.gpu.yaml, character for character (cluster/render.py)."""
    service = yaml.safe_load((ROOT / "cluster" / "rayservice.yaml").read_text())
    gpu_text = (ROOT / "cluster" / "serve_config.gpu.yaml").read_text()
    assert service["spec"]["serveConfigV2"] == gpu_text, "run: python cluster/render.py"


def test_the_gpu_profile_is_the_large_model_profile():
    """The 70B reads the prompt alone (no small-model hints), its replica's GPUs fit on one
    node of the GPU group and are STRICT_PACKed there, and jobs know the vector size."""
    from crow.settings import AppSettings

    settings = AppSettings.from_serve_config(ROOT / "cluster" / "serve_config.gpu.yaml")
    assert settings.llm.backend == "vllm" and settings.agent_guidance == "none"
    assert settings.embedder.dim == 1024 and settings.embedder.fp16
    v = settings.llm.vllm
    assert v.placement_strategy == "STRICT_PACK" and v.accelerator_type is None
    cluster = yaml.safe_load((ROOT / "cluster" / "rayservice.yaml").read_text())["spec"][
        "rayClusterConfig"
    ]
    head = cluster["headGroupSpec"]["template"]["spec"]["containers"][0]
    assert "nvidia.com/gpu" not in head["resources"]["limits"]
    gpus = [
        int(c["resources"]["limits"]["nvidia.com/gpu"])
        for g in cluster["workerGroupSpecs"]
        for c in g["template"]["spec"]["containers"]
        if "nvidia.com/gpu" in c["resources"]["limits"]
    ]
    assert gpus and max(gpus) >= v.tensor_parallel_size * v.pipeline_parallel_size


def test_the_chat_store_runs_on_the_one_pod_with_its_own_disk():
    """ChatStore asks for the chat_store resource; exactly one worker group (of one pod)
    advertises it and mounts the ReadWriteOnce claim that holds chat_db."""
    from crow.settings import AppSettings

    gpu = yaml.safe_load((ROOT / "cluster" / "serve_config.gpu.yaml").read_text())
    (app,) = gpu["applications"]
    (store,) = [d for d in app["deployments"] if d["name"] == "ChatStore"]
    assert store["num_replicas"] == 1
    assert store["ray_actor_options"] == {"num_cpus": 0, "resources": {"chat_store": 1}}
    cluster = yaml.safe_load((ROOT / "cluster" / "rayservice.yaml").read_text())["spec"][
        "rayClusterConfig"
    ]
    groups = [g for g in cluster["workerGroupSpecs"] if "chat_store" in g.get("resources", {})]
    assert len(groups) == 1 and groups[0]["maxReplicas"] == 1
    # no CPU for Ray there: nothing but the ChatStore can be placed on that pod
    assert groups[0]["resources"] == {"CPU": "0", "chat_store": "1"}
    pod = groups[0]["template"]["spec"]
    claims = {
        v["name"]: v["persistentVolumeClaim"]["claimName"]
        for v in pod["volumes"]
        if "persistentVolumeClaim" in v
    }
    chat_db = AppSettings.from_args(app["args"]).chat_db_path
    (mount,) = [
        m for m in pod["containers"][0]["volumeMounts"] if chat_db.is_relative_to(m["mountPath"])
    ]
    pvcs = {
        d["metadata"]["name"]: d
        for d in yaml.safe_load_all((ROOT / "cluster" / "volumes.yaml").read_text())
    }
    assert pvcs[claims[mount["name"]]]["spec"]["accessModes"] == ["ReadWriteOnce"]
    others = [
        g for g in [cluster["headGroupSpec"], *cluster["workerGroupSpecs"]] if g not in groups
    ]
    for group in others:
        names = {
            v.get("persistentVolumeClaim", {}).get("claimName")
            for v in group["template"]["spec"].get("volumes", [])
        }
        assert claims[mount["name"]] not in names


def test_the_reindex_job_submits_to_the_serving_cluster():
    """Not a RayJob (it would start a cluster, or name one, and a RayService renames its
    cluster): the Jobs API of the head Service that follows the active cluster, with the
    args the app serves, its driver off the head, failing unless the Ray job succeeded."""
    job = yaml.safe_load((ROOT / "cluster" / "job-reindex.yaml").read_text())
    service = yaml.safe_load((ROOT / "cluster" / "rayservice.yaml").read_text())
    (container,) = job["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["RAY"] == f"http://{service['metadata']['name']}-head-svc:8265"
    script = container["command"][-1]
    assert 'ray job submit --address="$RAY"' in script and "--entrypoint-num-cpus=1" in script
    assert 'python -m jobs.reindex --org="$ORG" --full --config="$RAY"' in script
    assert script.rstrip().endswith("grep -q SUCCEEDED") and "e" in container["command"][1]


def test_eval_rayjob_evaluates_the_served_model_with_the_gpu_profile():
    import shlex

    from jobs.eval import build_parser

    job = yaml.safe_load((ROOT / "cluster" / "rayjob-eval.yaml").read_text())
    argv = shlex.split(job["spec"]["entrypoint"])
    assert argv[:3] == ["python", "-m", "jobs.eval"]
    args = build_parser().parse_args(argv[3:])
    service = yaml.safe_load((ROOT / "cluster" / "rayservice.yaml").read_text())
    # the args the app serves, from the serving cluster's dashboard (not the image's copy)
    assert args.config == f"http://{service['metadata']['name']}-head-svc:8265"
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
    groups = [
        service["spec"]["rayClusterConfig"]["headGroupSpec"],
        *service["spec"]["rayClusterConfig"]["workerGroupSpecs"],
    ]
    for group in groups:
        env = {e["name"]: e for e in group["template"]["spec"]["containers"][0]["env"]}
        token = env["ASK_CROW_OPERATOR_TOKEN"]["valueFrom"]["secretKeyRef"]
        assert token["name"] == "crow-secrets"
        assert env["HF_TOKEN"]["valueFrom"]["secretKeyRef"]["name"] == "crow-secrets"
        assert "OPENAI_API_KEY" not in env  # the eval key goes to the eval job alone
    job = yaml.safe_load((ROOT / "cluster" / "rayjob-eval.yaml").read_text())
    head = job["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e for e in head["env"]}
    assert env["OPENAI_API_KEY"]["valueFrom"]["secretKeyRef"]["name"] == "crow-secrets"
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
    unread = [name for name in _fields(AppSettings) if f".{name.rsplit('.', 1)[-1]}" not in sources]
    assert unread == []


def test_the_graph_parses_the_settings_once():
    """Deployments receive the validated settings model from the graph builder: no other
    deployment module parses args (one parse per app, not one per replica class)."""
    import re

    parsers = sorted(
        f.name
        for f in (ROOT / "deployments").glob("*.py")
        if re.search(r"AppSettings\.from_args|AppSettings\(|from_serve_config", f.read_text())
    )
    assert parsers == ["graph.py"]
    from deployments.graph import resolve_settings

    settings = resolve_settings({"var_dir": "var", "llm": {"backend": "local"}})
    assert settings.var_dir.is_absolute() and settings.llm.backend == "local"
