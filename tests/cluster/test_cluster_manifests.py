"""Every Kubernetes manifest in cluster/ validates: ray.io kinds against KubeRay's CRD schemas
(vendored in cluster/crds/) and the rules its operator enforces in Go code (tests/cluster/kuberay_rules.py);
core kinds against Kubernetes' own strict JSON schemas (the kubernetes-validate package, offline);
any other kind fails. The negative tests break the real manifests in known ways and expect the
specific error, so each schema check and each rule is shown to be able to fail."""

from __future__ import annotations

import copy
import functools
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from jsonschema.protocols import Validator

from tests.cluster.kuberay_rules import (
    KUBERAY_TAG,
    code_rule_errors,
    ray_validator,
    schema_errors,
    to_jsonschema,
)
from tests.repo import ROOT

CLUSTER = ROOT / "cluster"
K8S_VERSION = "1.36"  # KubeRay v1.7.0 builds against k8s.io/api v0.36 (ray-operator/go.mod)
OBJECT_META = "https://kubernetes.io/api/_definitions.json#/$defs/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
Json = dict[str, Any]


# ---------------------------------------------------------------- core Kubernetes kinds
@functools.cache
def _k8s_schemas() -> tuple[Any, Any]:
    """kubernetes-validate's strict schemas of K8S_VERSION: their folder and a $ref registry."""
    from importlib.resources import files

    from referencing import Registry, Resource

    root = (
        files("kubernetes_validate") / "kubernetes-json-schema" / f"v{K8S_VERSION}.0-local-strict"
    )
    defs = json.loads((root / "_definitions.json").read_text())
    return root, Resource.from_contents(defs) @ Registry()


@functools.cache
def k8s_validator(api_version: str, kind: str) -> Validator | None:
    """Kubernetes' strict schema of a built-in kind, compiled once; None for any other kind."""
    group, _, version = api_version.rpartition("/")
    if group and "." in group and not group.endswith(".k8s.io"):
        return None  # a custom resource's group
    root, registry = _k8s_schemas()
    name = "-".join([kind.lower(), *([group.split(".")[0]] if group else []), version])
    path = root / f"{name}.json"
    if not path.is_file():
        return None
    return jsonschema.Draft202012Validator(json.loads(path.read_text()), registry=registry)


@functools.cache
def object_meta_validator() -> Validator:
    """A CRD's schema says only `metadata: {type: object}`; the API server checks ObjectMeta."""
    return jsonschema.Draft202012Validator({"$ref": OBJECT_META}, registry=_k8s_schemas()[1])


def manifest_errors(doc: Json) -> list[str]:
    """Everything wrong with one manifest, by its apiVersion and kind."""
    api_version, kind = doc.get("apiVersion", ""), doc.get("kind", "")
    crd_validator = ray_validator(api_version, kind)
    if crd_validator is not None:
        errors = schema_errors(crd_validator, doc)
        errors += schema_errors(object_meta_validator(), doc.get("metadata", {}), "metadata")
        try:
            return errors + code_rule_errors(doc)
        except (TypeError, AttributeError, ValueError):
            if not errors:  # the Go rules only ever see objects that match the schema
                raise
            return errors
    validator = k8s_validator(api_version, kind)
    if validator is None:
        return [f"{api_version} {kind}: no schema to validate it against (add one here)"]
    return schema_errors(validator, doc)


# ---------------------------------------------------------------- the manifests of cluster/
def manifests(path: Path) -> list[Json]:
    """The Kubernetes documents of a YAML file: those with an apiVersion and a kind."""
    docs = yaml.safe_load_all(path.read_text())
    return [d for d in docs if isinstance(d, dict) and "apiVersion" in d and "kind" in d]


# Cheap at collection: a file with a top-level `apiVersion:` line holds a manifest (the
# serve config and the cluster launcher's config have none and are not Kubernetes objects).
MANIFEST_FILES = sorted(
    p for p in CLUSTER.glob("*.y*ml") if re.search(r"(?m)^apiVersion:", p.read_text())
)


def object_name(doc: Json) -> str:
    metadata = doc.get("metadata") or {}
    return metadata.get("name") or f"{metadata.get('generateName', '')}<generated>"


def all_manifests() -> list[Json]:
    return [doc for path in MANIFEST_FILES for doc in manifests(path)]


def test_cluster_has_manifests():
    assert MANIFEST_FILES, "no Kubernetes manifest in cluster/"
    assert all(manifests(path) for path in MANIFEST_FILES)


@pytest.mark.parametrize("path", MANIFEST_FILES, ids=lambda p: p.name)
def test_manifest_validates(path: Path):
    found = {f"{d['kind']}/{object_name(d)}": manifest_errors(d) for d in manifests(path)}
    report = "\n".join(f"{obj}: {e}" for obj, errs in found.items() for e in errs)
    assert not report, f"{path.name} (KubeRay {KUBERAY_TAG}):\n{report}"


def test_ray_job_cluster_selectors_name_a_ray_cluster_of_cluster_dir():
    """RayJob's clusterSelector is no label selector: the operator reads its ray.io/cluster value
    as the name of an existing RayCluster and gets that object by name (rayjob_controller.go,
    initRayJobStatusIfNeed and getOrCreateRayClusterInstance). A RayService's RayCluster is named
    <rayservice>-<5 random characters> (utils.GenerateRayClusterName), so only a RayCluster
    defined here by name can be selected."""
    docs = all_manifests()
    clusters = {d["metadata"].get("name") for d in docs if d["kind"] == "RayCluster"}
    wrong = []
    for doc in docs:
        selector = doc.get("spec", {}).get("clusterSelector") if doc["kind"] == "RayJob" else None
        if selector and selector.get("ray.io/cluster") not in clusters:
            wrong.append(
                f"RayJob {object_name(doc)}: clusterSelector ray.io/cluster="
                f"{selector.get('ray.io/cluster')!r} names no RayCluster of cluster/ "
                f"(RayClusters there: {sorted(clusters)}; a RayService's is <name>-<random>)"
            )
    assert not wrong, "\n".join(wrong)


# ---------------------------------------------------------------- the checks can fail
def real(kind: str) -> Json:
    """A deep copy of the first manifest of a kind in cluster/ (a RayCluster: the RayService's)."""
    docs = all_manifests()
    if kind == "RayCluster" and not any(d["kind"] == kind for d in docs):
        service = real("RayService")
        return {
            "apiVersion": "ray.io/v1",
            "kind": kind,
            "metadata": service["metadata"],
            "spec": service["spec"]["rayClusterConfig"],
        }
    found = [d for d in docs if d["kind"] == kind]
    if not found:
        pytest.skip(f"no {kind} in cluster/")
    return copy.deepcopy(found[0])


def cluster_spec(doc: Json) -> Json:
    spec = doc["spec"]
    return spec.get("rayClusterConfig") or spec.get("rayClusterSpec") or spec


def head(doc: Json) -> Json:
    return cluster_spec(doc)["headGroupSpec"]


def worker(doc: Json) -> Json:
    return cluster_spec(doc)["workerGroupSpecs"][0]


def container(doc: Json) -> Json:  # the head's Ray container
    return head(doc)["template"]["spec"]["containers"][0]


Edit = Callable[[Json], Any]


def keep(doc: Json) -> None:
    pass


def spec(**fields: Any) -> Edit:
    return lambda doc: doc["spec"].update(copy.deepcopy(fields))


def own_cluster(**fields: Any) -> Edit:
    """The RayJob with a RayCluster of its own (the RayService's spec), not a clusterSelector."""

    def edit(job: Json) -> None:
        job["spec"].pop("clusterSelector", None)
        job["spec"].update(rayClusterSpec=real("RayService")["spec"]["rayClusterConfig"], **fields)

    return edit


def rules(*rules: tuple[str, str, int], shutdown: bool = False) -> Edit:
    return spec(
        shutdownAfterJobFinishes=shutdown,
        ttlSecondsAfterFinished=0,
        deletionStrategy={
            "deletionRules": [
                {"policy": p, "condition": {"jobStatus": s, "ttlSeconds": t}} for p, s, t in rules
            ]
        },
    )


SELECTOR = {"ray.io/cluster": "some-raycluster"}
TIMEOUT = "ray.io/initializing-timeout"
# name: (kind, a fix, a break, the error the break brings). The fixed manifest must not report
# that error, so a case tells even where the real manifest is wrong in that very way.
CASES: dict[str, tuple[str, Edit, Edit, str]] = {
    # the CRD schemas
    "unknown-field": (
        "RayService",
        keep,
        spec(rayClusterConfg={}),
        "spec: Additional properties are not allowed ('rayClusterConfg' was unexpected)",
    ),
    "unknown-field-in-pod": (
        "RayService",
        keep,
        lambda d: container(d).update(imagePullPolicyy="Always"),
        "containers[0]: Additional properties are not allowed ('imagePullPolicyy'",
    ),
    "wrong-type": (
        "RayService",
        keep,
        lambda d: head(d)["rayStartParams"].update({"num-cpus": 0}),
        "rayStartParams.num-cpus: 0 is not of type 'string'",
    ),
    "int-or-string": (
        "RayService",
        lambda d: container(d).update(resources={"limits": {"cpu": 8}}),
        lambda d: container(d).update(resources={"limits": {"cpu": [8]}}),
        "limits.cpu: [8] is not valid under any of the given schemas",
    ),
    "list-map-keys": (
        "RayService",
        keep,
        lambda d: container(d).update(env=[{"name": "A"}, {"name": "A"}]),
        'duplicate entries {"name": "A"} in a list of type map',
    ),
    "required": (
        "RayService",
        keep,
        lambda d: worker(d).pop("template"),
        "'template' is a required property",
    ),
    "enum": (
        "RayCluster",
        spec(upgradeStrategy={"type": "Recreate"}),
        spec(upgradeStrategy={"type": "Rolling"}),
        "'Rolling' is not one of ['Recreate', 'None']",
    ),
    "object-meta": (
        "RayJob",
        keep,
        lambda d: d["metadata"].update(lables={}),
        "('lables' was unexpected)",
    ),
    # validation.go: metadata
    "name-length": (
        "RayJob",
        lambda d: d["metadata"].update(name="j" * 47),
        lambda d: d["metadata"].update(name="j" * 48),
        "RayJob name should be no more than 47 characters",
    ),
    "generate-name": (
        "RayJob",
        lambda d: d["metadata"].update(name=None, generateName="crow-job-"),
        lambda d: d["metadata"].update(name=None, generateName="Crow-job-"),
        "RayJob name should be a valid DNS1035",
    ),
    "name-dns1035": (
        "RayService",
        keep,
        lambda d: d["metadata"].update(name="9crow"),
        "RayService name should be a valid DNS1035 label",
    ),
    "initializing-timeout": (
        "RayService",
        lambda d: d["metadata"].update(annotations={TIMEOUT: "30m"}),
        lambda d: d["metadata"].update(annotations={TIMEOUT: "0"}),
        "annotation ray.io/initializing-timeout must be positive",
    ),
    # validation.go: RayJob
    "ttl-needs-shutdown": (
        "RayJob",
        spec(shutdownAfterJobFinishes=True, ttlSecondsAfterFinished=3600),
        spec(shutdownAfterJobFinishes=False, ttlSecondsAfterFinished=3600),
        "shutdownAfterJobFinishes set to false cannot have TTLSecondsAfterFinished",
    ),
    "suspend-needs-shutdown": (
        "RayJob",
        own_cluster(),
        own_cluster(suspend=True, shutdownAfterJobFinishes=False),
        "shutdownAfterJobFinishes set to false is not allowed to be suspended",
    ),
    "selector-or-spec": (
        "RayJob",
        keep,
        lambda d: [d["spec"].pop(k, None) for k in ("clusterSelector", "rayClusterSpec")],
        "one of RayClusterSpec or ClusterSelector must be set",
    ),
    "selector-key": (
        "RayJob",
        spec(clusterSelector=SELECTOR),
        spec(clusterSelector={"app": "ask-crow"}),
        "cluster name in ClusterSelector should not be empty",
    ),
    "selector-sidecar": (
        "RayJob",
        spec(clusterSelector=SELECTOR, submissionMode="HTTPMode"),
        spec(clusterSelector=SELECTOR, submissionMode="SidecarMode"),
        "ClusterSelector is not supported in SidecarMode",
    ),
    "selector-backoff": (
        "RayJob",
        spec(clusterSelector=SELECTOR, backoffLimit=0),
        spec(clusterSelector=SELECTOR, backoffLimit=2),
        "BackoffLimit is incompatible with ClusterSelector mode",
    ),
    "deletion-rules-vs-shutdown": (
        "RayJob",
        rules(("DeleteSelf", "SUCCEEDED", 60)),
        rules(("DeleteSelf", "SUCCEEDED", 60), shutdown=True),
        "shutdownAfterJobFinishes and spec.deletionStrategy.deletionRules are mutually exclusive",
    ),
    "deletion-ttl-order": (
        "RayJob",
        own_cluster(),
        lambda d: [
            own_cluster()(d),
            rules(("DeleteCluster", "FAILED", 600), ("DeleteSelf", "FAILED", 60))(d),
        ],
        "for jobStatus 'FAILED': DeleteSelf TTL (60) must be >= DeleteCluster TTL (600)",
    ),
    "deletion-with-selector": (
        "RayJob",
        spec(clusterSelector=SELECTOR),
        spec(
            clusterSelector=SELECTOR,
            deletionStrategy={
                "onSuccess": {"policy": "DeleteCluster"},
                "onFailure": {"policy": "DeleteSelf"},
            },
        ),
        "the ClusterSelector mode doesn't support DeletionStrategy DeleteCluster or DeleteWorkers",
    ),
    # validation.go: RayService and its RayCluster spec
    "resources-twice": (
        "RayService",
        lambda d: head(d)["rayStartParams"].pop("num-cpus", None),
        lambda d: [
            head(d)["rayStartParams"].update({"num-cpus": "0"}),
            head(d).update(resources={"CPU": "1"}),
        ],
        "resource fields should not be set in both rayStartParams and Resources for Head group",
    ),
    "start-param-labels": (
        "RayService",
        keep,
        lambda d: worker(d)["rayStartParams"].update(labels="a=b"),
        "rayStartParams['labels'] is not supported",
    ),
    "group-label": (
        "RayService",
        lambda d: worker(d).update(labels={"ray.io/gpu": "h100"}),
        lambda d: worker(d).update(labels={"-gpu": "h100"}),
        "label key '-gpu': name part must be",
    ),
    "min-max": (
        "RayService",
        lambda d: worker(d).update(minReplicas=1, maxReplicas=2),
        lambda d: worker(d).update(minReplicas=3, maxReplicas=2),
        "has minReplicas 3 greater than maxReplicas 2",
    ),
    "idle-timeout-v2": (
        "RayService",
        lambda d: [
            worker(d).update(idleTimeoutSeconds=60),
            cluster_spec(d).update(
                enableInTreeAutoscaling=True, autoscalerOptions={"version": "v2"}
            ),
        ],
        lambda d: [
            worker(d).update(idleTimeoutSeconds=60),
            cluster_spec(d).pop("autoscalerOptions", None),
        ],
        "idleTimeoutSeconds is set, but autoscaler v2 is not enabled",
    ),
    "head-containers": (
        "RayService",
        keep,
        lambda d: head(d)["template"]["spec"].update(containers=[]),
        "headGroupSpec should have at least one container",
    ),
    "redis-username": (
        "RayService",
        keep,
        lambda d: container(d).update(env=[{"name": "REDIS_USERNAME", "value": "u"}]),
        "cannot set redis username",
    ),
    "head-service-name": (
        "RayService",
        keep,
        lambda d: head(d).update(headService={"metadata": {"name": "x"}}),
        "headService.metadata.name should not be set",
    ),
    "incremental-upgrade": (
        "RayService",
        spec(upgradeStrategy={"type": "NewCluster"}),
        spec(upgradeStrategy={"type": "NewClusterWithIncrementalUpgrade"}),
        "ClusterUpgradeOptions are required for NewClusterWithIncrementalUpgrade",
    ),
    "unused-field": (
        "RayService",
        lambda d: d["spec"].pop("serviceUnhealthySecondThreshold", None),
        spec(serviceUnhealthySecondThreshold=900),
        "spec.serviceUnhealthySecondThreshold is deprecated",
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_a_broken_manifest_reports_the_error(case: str):
    kind, fix, breaker, expected = CASES[case]
    fixed, broken = real(kind), real(kind)
    fix(fixed)
    breaker(broken)
    assert not [e for e in manifest_errors(fixed) if expected in e], case
    assert [e for e in manifest_errors(broken) if expected in e], (case, manifest_errors(broken))


def k8s_doc(api_version: str, kind: str, **body: Any) -> Json:
    return {"apiVersion": api_version, "kind": kind, "metadata": {"name": "crow-data"}, **body}


PVC = {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "500Gi"}}}
JOB = {
    "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "a", "image": "b"}]}}
}
K8S_CASES = {  # name: (a manifest, the error it has; "" for none)
    "pvc": (k8s_doc("v1", "PersistentVolumeClaim", spec=PVC), ""),
    "pvc-unknown-field": (
        k8s_doc("v1", "PersistentVolumeClaim", spec={**PVC, "accessMode": []}),
        "('accessMode' was unexpected)",
    ),
    "secret": (k8s_doc("v1", "Secret", stringData={"operator-token": "t"}), ""),
    "secret-wrong-type": (
        k8s_doc("v1", "Secret", stringData={"port": 8000}),
        "stringData.port: 8000 is not of type 'string'",
    ),
    "job": (k8s_doc("batch/v1", "Job", spec=JOB), ""),
    "job-wrong-type": (
        k8s_doc("batch/v1", "Job", spec={**JOB, "backoffLimit": "3"}),
        "spec.backoffLimit: '3' is not of type",
    ),
    "job-object-meta": (
        k8s_doc("batch/v1", "Job", spec=JOB, metadata={"name": "j", "label": {}}),
        "('label' was unexpected)",
    ),
    "unknown-group": (
        k8s_doc("cert-manager.io/v1", "Certificate"),
        "no schema to validate it against",
    ),
    "unknown-kind": (k8s_doc("v1", "RayService"), "no schema to validate it against"),
    "other-ray-version": (
        k8s_doc("ray.io/v1alpha1", "RayService"),
        "no schema to validate it against",
    ),
}


@pytest.mark.parametrize("case", K8S_CASES)
def test_core_kinds_and_unknown_kinds(case: str):
    doc, expected = K8S_CASES[case]
    errors = manifest_errors(doc)
    assert [e for e in errors if expected in e] if expected else not errors, (case, errors)


def test_structural_schema_conversion():
    node = {
        "type": "object",
        "required": ["a", "b"],
        "properties": {
            "a": {"type": "integer", "default": 1},
            "b": {"x-kubernetes-int-or-string": True},
            "c": {"type": "string", "nullable": True},
            "d": {
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": True,
                "properties": {"y": {}},
            },
        },
    }
    validator = jsonschema.Draft4Validator(to_jsonschema(node))
    assert validator.is_valid({"b": 1}) and validator.is_valid(
        {"b": "50%", "c": None, "d": {"x": 1}}
    )
    assert not validator.is_valid({"a": 1})  # b is required, a has a default
    assert not validator.is_valid({"b": 1.5}) and not validator.is_valid({"b": 1, "e": 1})
