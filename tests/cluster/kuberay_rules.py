"""KubeRay's checks of a ray.io/v1 RayService, RayJob or RayCluster manifest (helpers, not tests):
`ray_validator` compiles the CRD schema vendored in cluster/crds/ (its README says how);
`code_rule_errors` applies the rules the operator enforces in Go code, validation.go at KUBERAY_TAG
(each function names the Go one it mirrors). Errors are human-readable; none means valid."""

from __future__ import annotations

import functools
import itertools
import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

import jsonschema
import yaml
from jsonschema.protocols import Validator

from tests.repo import ROOT

KUBERAY_TAG = "v1.7.0"
CRD_DIR = ROOT / "cluster" / "crds"
RAY_KINDS = ("RayService", "RayJob", "RayCluster")
# The operator's feature gates at their v1.7.0 defaults (ray-operator/pkg/features/features.go).
GATES = {
    "RayJobDeletionPolicy": True,
    "RayServiceIncrementalUpgrade": True,
    "RayClusterMTLS": False,
    "RayClusterNetworkPolicy": False,
    "RayClusterHistoryServer": False,
    "GCSFaultToleranceEmbeddedStorage": False,
}
Json = dict[str, Any]


def _failed(checks: list[tuple[Any, str]]) -> list[str]:  # the messages of failed checks
    return [message for bad, message in checks if bad]


def to_jsonschema(node: Json) -> Json:
    """A structural-schema node of a CRD as JSON Schema (cluster/crds/README.md says why)."""
    out: Json = {}
    for key, value in node.items():
        if key == "properties":
            out[key] = {name: to_jsonschema(sub) for name, sub in value.items()}
        elif key in ("items", "additionalProperties", "not") and isinstance(value, dict):
            out[key] = to_jsonschema(value)
        elif key in ("allOf", "anyOf", "oneOf"):
            out[key] = [to_jsonschema(sub) for sub in value]
        else:
            out[key] = value
    if out.get("x-kubernetes-int-or-string") and "anyOf" not in out:
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if out.pop("nullable", False) and "type" in out:
        out["type"] = [out["type"], "null"]
    props = out.get("properties", {})
    required = [name for name in out.pop("required", []) if "default" not in props.get(name, {})]
    if required:  # a field with a default is never missing: the API server defaults first
        out["required"] = required
    if (
        props
        and "additionalProperties" not in out
        and not out.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False  # the API server would prune it silently
    return out


def _list_type(validator: Validator, list_type: str, instance: Any, schema: Json) -> Iterator[Any]:
    """x-kubernetes-list-type: a `set` holds unique items, a `map` unique list-map-keys."""
    if not validator.is_type(instance, "array") or list_type not in ("set", "map"):
        return
    defaults = {
        k: v.get("default") for k, v in schema.get("items", {}).get("properties", {}).items()
    }
    keys = [
        json.dumps(
            {k: item.get(k, defaults.get(k)) for k in schema.get("x-kubernetes-list-map-keys", [])}
            if list_type == "map" and isinstance(item, dict)
            else item,
            sort_keys=True,
        )
        for item in instance
    ]
    for key in sorted({k for k in keys if keys.count(k) > 1}):
        yield jsonschema.ValidationError(f"duplicate entries {key} in a list of type {list_type}")


_FORMATS = jsonschema.FormatChecker(formats=())
for _name, _bits in (("int32", 31), ("int64", 63)):
    _FORMATS.checks(_name)(lambda v, b=_bits: not isinstance(v, int) or -(2**b) <= v < 2**b)
_CrdValidator = jsonschema.validators.extend(
    jsonschema.Draft4Validator, {"x-kubernetes-list-type": _list_type}
)


@functools.cache
def ray_validator(api_version: str, kind: str) -> Validator | None:
    """The vendored CRD schema of a manifest's apiVersion and kind, compiled once; None if none."""
    if api_version != "ray.io/v1" or kind not in RAY_KINDS:
        return None
    schema = json.loads((CRD_DIR / f"ray.io_v1_{kind.lower()}.json").read_text())
    return _CrdValidator(to_jsonschema(schema), format_checker=_FORMATS)


def schema_errors(validator: Validator, instance: Any, prefix: str = "") -> list[str]:
    def where(error: jsonschema.ValidationError) -> str:
        path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
        return (prefix + path).lstrip(".") or "<root>"

    return sorted(f"{where(e)}: {e.message}" for e in validator.iter_errors(instance))


# k8s.io/apimachinery's validation primitives
_DNS1035 = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_DNS1123 = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_QUALIFIED = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_QUALIFIED_RULE = "1-63 characters of [A-Za-z0-9-_.], starting and ending alphanumeric"


def is_dns1035_label(value: str) -> list[str]:  # validation.IsDNS1035Label
    return _failed(
        [
            (len(value) > 63, "must be no more than 63 characters"),
            (
                not _DNS1035.fullmatch(value),
                "a DNS-1035 label must consist of lower case alphanumeric "
                "characters or '-', start with a letter, and end with an alphanumeric character",
            ),
        ]
    )


def label_errors(key: str, value: str) -> list[str]:
    """validation.IsQualifiedName of a label key, validation.IsValidLabelValue of its value."""
    prefix, slash, name = key.rpartition("/")
    return _failed(
        [
            (
                slash and not (len(prefix) <= 253 and _DNS1123.fullmatch(prefix)),
                f"label key '{key}': prefix part must be a DNS-1123 subdomain",
            ),
            (
                len(name) > 63 or not _QUALIFIED.fullmatch(name),
                f"label key '{key}': name part must be {_QUALIFIED_RULE}",
            ),
            (
                len(value) > 63 or (value and not _QUALIFIED.fullmatch(value)),
                f"label value '{value}' must be empty or {_QUALIFIED_RULE}",
            ),
        ]
    )


def parse_version(value: str) -> tuple[int, ...]:  # version.ParseGeneric; () if unparsable
    match = re.match(r"\s*v?([0-9]+(?:\.[0-9]+)+)", value)
    return tuple(int(n) for n in match.group(1).split(".")) if match else ()


# What time.ParseDuration accepts.
_GO_DURATION = re.compile(r"[-+]?((\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h))+|[-+]?0")


# ---------------------------------------------------------------- validation.go, mirrored
def _env(container: Json) -> dict[str, Json]:  # env vars by name
    return {e.get("name"): e for e in container.get("env") or []}


def _pod(group: Json) -> Json:  # a group's pod spec
    return (group.get("template") or {}).get("spec") or {}


def validate_metadata(kind: str, metadata: Json) -> list[str]:
    """Validate{RayCluster,RayJob,RayService}Metadata, with validateInitializingTimeout."""
    name = metadata.get("name") or metadata.get("generateName", "")[:58] + "x" * 5  # + 5 random
    limit = 53 if kind == "RayCluster" else 47  # Max{RayCluster,RayJob,RayService}NameLength
    errs = _failed([(len(name) > limit, f"{kind} name should be no more than {limit} characters")])
    errs += [f"{kind} name should be a valid DNS1035 label: {e}" for e in is_dns1035_label(name)]
    timeout = (metadata.get("annotations") or {}).get("ray.io/initializing-timeout", "")
    if kind == "RayService" and timeout:
        valid = _GO_DURATION.fullmatch(timeout) or re.fullmatch(r"[-+]?\d+", timeout)  # or Atoi
        positive = re.search(r"[1-9]", timeout) and not timeout.startswith("-")
        errs += _failed(
            [
                (
                    not valid,
                    f"annotation ray.io/initializing-timeout has invalid format: {timeout}",
                ),
                (valid and not positive, "annotation ray.io/initializing-timeout must be positive"),
            ]
        )
    return errs


def _group_errors(name: str, group: Json) -> list[str]:
    """validateRayGroupResources and validateRayGroupLabels."""
    start = group.get("rayStartParams") or {}
    in_start = any(start.get(k) for k in ("num-cpus", "num-gpus", "memory", "resources"))
    errs = _failed(
        [
            (
                in_start and group.get("resources"),
                "resource fields should not be set in both "
                f"rayStartParams and Resources for {name} group; please use only one",
            ),
            ("labels" in start, f"rayStartParams['labels'] is not supported for {name} group"),
        ]
    )
    labels = (group.get("labels") or {}).items()
    return errs + [f"{name} group: {e}" for key, value in labels for e in label_errors(key, value)]


def _worker_errors(group: Json, autoscaling: bool, v2: bool, ray_version: str) -> list[str]:
    """ValidateRayClusterSpec's worker loop, validateWorkerGroupIdleTimeout and ...Priority."""
    name, idle, priority = (
        group.get("groupName", ""),
        group.get("idleTimeoutSeconds"),
        group.get("priority"),
    )
    low, high = group.get("minReplicas", 0), group.get("maxReplicas", 2**31 - 1)  # CRD defaults
    return _failed(
        [
            (
                not _pod(group).get("containers"),
                "workerGroupSpec should have at least one container",
            ),
            (low < 0, f"worker group {name} has negative minReplicas {low}"),
            (high < 0, f"worker group {name} has negative maxReplicas {high}"),
            (
                low > high,
                f"worker group {name} has minReplicas {low} greater than maxReplicas {high}",
            ),
            (
                idle is not None and idle < 0,
                f"worker group {name}: idleTimeoutSeconds must be non-negative",
            ),
            (
                idle is not None and idle >= 0 and not v2,
                f"worker group {name}: idleTimeoutSeconds is set, but autoscaler v2 is not enabled",
            ),
            (
                priority and parse_version(ray_version) < (2, 56, 0),
                f"worker group {name}: priority is set, but Ray version 2.56.0 or later is required",
            ),
            (
                priority and not v2,
                f"worker group {name}: priority is set, but autoscaler v2 is not enabled",
            ),
            (
                group.get("suspend") and autoscaling,
                f"worker group {name} cannot be suspended with Autoscaler enabled",
            ),
        ]
    ) + _group_errors(name, group)


def validate_ray_cluster_spec(spec: Json, annotations: Mapping[str, str]) -> list[str]:
    """ValidateRayClusterSpec (what sits behind a feature gate: with the gates of GATES), with
    validateGcsFaultToleranceBackend; validateNetworkPolicy and validateTLSOptions stop at
    their gates, off by default."""
    head = spec.get("headGroupSpec") or {}
    if not _pod(head).get("containers"):
        return ["headGroupSpec should have at least one container"]
    head_env, start = _env(_pod(head)["containers"][0]), head.get("rayStartParams") or {}
    autoscaling = spec.get("enableInTreeAutoscaling") is True  # IsAutoscalingEnabled
    options, workers = spec.get("autoscalerOptions") or {}, spec.get("workerGroupSpecs") or []
    env_v2 = (head_env.get("RAY_enable_autoscaler_v2") or {}).get("value") in ("1", "true")
    errs = _group_errors("Head", head)
    for group in workers:
        v2 = options.get("version") == "v2" or env_v2
        errs += _worker_errors(group, autoscaling, v2, spec.get("rayVersion", ""))
    ft, ft_note = spec.get("gcsFaultToleranceOptions"), annotations.get("ray.io/ft-enabled", "")
    errs += _failed(
        [
            (
                ft_note and ft is not None,
                "ray.io/ft-enabled annotation and GcsFaultToleranceOptions are both set",
            ),
            (
                ft_note.lower() != "true" and ft is None and "RAY_REDIS_ADDRESS" in head_env,
                "RAY_REDIS_ADDRESS is set, which enables GCS fault tolerance, but GcsFaultToleranceOptions is not",
            ),
            (
                start.get("redis-username") or "REDIS_USERNAME" in head_env,
                "cannot set redis username in rayStartParams or environment variables",
            ),
            (
                not autoscaling and env_v2,
                "RAY_enable_autoscaler_v2 cannot be set when enableInTreeAutoscaling is false",
            ),
            (
                autoscaling and options.get("version") and "RAY_enable_autoscaler_v2" in head_env,
                "both .spec.autoscalerOptions.version and head Pod env var RAY_enable_autoscaler_v2 are set",
            ),
            (
                options.get("idleTimeoutSeconds", 0) < 0,
                "autoscalerOptions.idleTimeoutSeconds must be non-negative",
            ),
            (
                "KUBERAY_GEN_AUTOSCALER_START_CMD" in _env(options),
                "autoscalerOptions.env must not contain KUBERAY_GEN_AUTOSCALER_START_CMD",
            ),
        ]
    )
    if ft is not None:
        backend, with_ft = ft.get("backend") or "redis", "when GcsFaultToleranceOptions is enabled"
        errs += _failed(
            [
                (
                    start.get("redis-password"),
                    f"cannot set `redis-password` in rayStartParams {with_ft}",
                ),
                (
                    "REDIS_PASSWORD" in head_env,
                    f"cannot set `REDIS_PASSWORD` env var in head Pod {with_ft}",
                ),
                (
                    "RAY_REDIS_ADDRESS" in head_env,
                    f"cannot set `RAY_REDIS_ADDRESS` env var in head Pod {with_ft}",
                ),
                (
                    annotations.get("ray.io/external-storage-namespace"),
                    f"cannot set `ray.io/external-storage-namespace` annotation {with_ft}",
                ),
                (
                    backend == "rocksdb" and not GATES["GCSFaultToleranceEmbeddedStorage"],
                    "the rocksdb GCS FT backend requires the GCSFaultToleranceEmbeddedStorage feature gate",
                ),
                (
                    backend != "rocksdb" and ft.get("storage") is not None,
                    "cannot set GcsFaultToleranceOptions.Storage when backend is 'redis'",
                ),
            ]
        )
    if autoscaling and options.get("version") == "v2":
        groups = [("head Pod", head)] + [(f"worker group {g.get('groupName')}", g) for g in workers]
        errs += [
            f"restartPolicy for {where} should be Never or unset when using autoscaler V2"
            for where, g in groups
            if _pod(g).get("restartPolicy", "Never") != "Never"
        ]
    gated = (
        ("historyServerOptions", "RayClusterHistoryServer"),
        ("networkPolicy", "RayClusterNetworkPolicy"),
        ("tlsOptions", "RayClusterMTLS"),
    )
    errs += [
        f"spec.{field} requires the {gate} feature gate to be enabled"
        for field, gate in gated
        if spec.get(field) is not None and not GATES[gate]
    ]
    auth = spec.get("authOptions") or {}
    token, k8s_auth = auth.get("mode") == "token", auth.get("enableK8sTokenAuth") is True
    version = parse_version(spec.get("rayVersion", ""))
    return errs + _failed(
        [
            (
                token and version < (2, 52, 0),
                "authOptions.mode is 'token': Ray version 2.52.0 or later is required",
            ),
            (
                token and k8s_auth and version < (2, 55, 0),
                "authOptions.enableK8sTokenAuth: Ray version 2.55.0 or later is required",
            ),
            (
                token and k8s_auth and auth.get("secretName"),
                "authOptions.enableK8sTokenAuth is enabled and authOptions.secretName is also set",
            ),
            (
                not token and k8s_auth,
                "authOptions.enableK8sTokenAuth is enabled but authOptions.mode is not 'token'",
            ),
        ]
    )


def _deletion_rules_errors(rules: list[Json], selector: bool, autoscaling: bool) -> list[str]:
    """validateDeletionRules, validateDeletionCondition and validateTTLConsistency."""
    errs, ttls = [], {}
    for i, rule in enumerate(rules):
        cond, policy = rule.get("condition") or {}, rule.get("policy")
        statuses = [(k, cond[k]) for k in ("jobStatus", "jobDeploymentStatus") if k in cond]
        by_policy = ttls.setdefault(statuses[0], {}) if len(statuses) == 1 else {}
        found = _failed(
            [
                (
                    len(statuses) != 1,
                    "exactly one of JobStatus and JobDeploymentStatus must be set",
                ),
                (cond.get("ttlSeconds", 0) < 0, "TTLSeconds must be non-negative"),
                (
                    selector and policy in ("DeleteCluster", "DeleteWorkers"),
                    f"DeletionPolicyType '{policy}' not supported when ClusterSelector is set",
                ),
                (
                    autoscaling and policy == "DeleteWorkers",
                    "'DeleteWorkers' not supported with autoscaling enabled",
                ),
                (
                    policy in by_policy,
                    f"duplicate rule for DeletionPolicyType '{policy}' and {statuses[:1]}",
                ),
            ]
        )[:1]
        errs += [f"deletionRules[{i}]: {message}" for message in found]  # Go: a rule's first
        if not found:
            by_policy[policy] = cond.get("ttlSeconds", 0)
    for (status, value), by_policy in ttls.items():
        order = [
            (p, by_policy[p])
            for p in ("DeleteWorkers", "DeleteCluster", "DeleteSelf")
            if p in by_policy
        ]
        errs += [
            f"for {status} '{value}': {p} TTL ({t}) must be >= {q} TTL ({s})"
            for (q, s), (p, t) in itertools.pairwise(order)
            if t < s
        ]
    return errs


def _deletion_errors(spec: Json, selector: bool) -> list[str]:
    """validateDeletionConfiguration and validateLegacyDeletionPolicies."""
    shutdown, strategy = spec.get("shutdownAfterJobFinishes", False), spec.get("deletionStrategy")
    errs = _failed(
        [
            (
                not shutdown and spec.get("ttlSecondsAfterFinished", 0) > 0,
                "a RayJob with shutdownAfterJobFinishes set to false cannot have TTLSecondsAfterFinished",
            )
        ]
    )
    if strategy is None:
        return errs
    autoscaling = (spec.get("rayClusterSpec") or {}).get("enableInTreeAutoscaling") is True
    legacy, rules = (
        [strategy.get("onSuccess"), strategy.get("onFailure")],
        strategy.get("deletionRules") or [],
    )
    has_legacy, policies = legacy != [None, None], [(p or {}).get("policy") for p in legacy]
    errs += _failed(
        [
            (
                not GATES["RayJobDeletionPolicy"],
                "RayJobDeletionPolicy feature gate must be enabled to use DeletionStrategy",
            ),
            (
                rules and shutdown,
                "spec.shutdownAfterJobFinishes and spec.deletionStrategy.deletionRules are mutually exclusive",
            ),
            (
                rules and has_legacy,
                "Cannot use both legacy onSuccess/onFailure fields and deletionRules simultaneously",
            ),
            (
                not rules and not has_legacy,
                "DeletionStrategy requires either BOTH onSuccess and onFailure, OR the deletionRules field",
            ),
            (
                has_legacy and None in policies,
                "both DeletionStrategy.OnSuccess and DeletionStrategy.OnFailure must be set, with a policy",
            ),
        ]
    )
    if has_legacy:
        return errs + _failed(
            [
                (
                    selector and {"DeleteCluster", "DeleteWorkers"} & set(policies),
                    "the ClusterSelector mode doesn't support DeletionStrategy DeleteCluster or DeleteWorkers",
                ),
                (
                    "DeleteWorkers" in policies and autoscaling,
                    "DeletionStrategy=DeleteWorkers currently does not support RayCluster with autoscaling enabled",
                ),
                (
                    shutdown and "DeleteNone" in policies,
                    "shutdownAfterJobFinishes is set to 'true' while deletion policy is 'DeleteNone'",
                ),
            ]
        )
    return errs + _deletion_rules_errors(rules, selector, autoscaling)


def validate_ray_job_spec(doc: Json) -> list[str]:
    """ValidateRayJobSpec (with dashboardclient.UnmarshalRuntimeEnvYAML: YAML for a map)."""
    spec, annotations = doc.get("spec") or {}, (doc.get("metadata") or {}).get("annotations") or {}
    suspend, mode = spec.get("suspend", False), spec.get("submissionMode", "K8sJobMode")
    selector, cluster = spec.get("clusterSelector") or {}, spec.get("rayClusterSpec")
    backoff, sidecar = spec.get("backoffLimit") or 0, mode == "SidecarMode"
    try:
        runtime_env = yaml.safe_load(spec.get("runtimeEnvYAML", "")) or {}
        bad_env = "" if isinstance(runtime_env, dict) else "runtimeEnvYAML is not a YAML mapping"
    except yaml.YAMLError as exc:
        bad_env = f"failed to unmarshal RuntimeEnvYAML: {exc}"
    errs = (
        _failed(
            [
                (
                    suspend and not spec.get("shutdownAfterJobFinishes"),
                    "a RayJob with shutdownAfterJobFinishes set to false is not allowed to be suspended",
                ),
                (
                    spec.get("ttlSecondsAfterFinished", 0) < 0,
                    "TTLSecondsAfterFinished must be a non-negative integer",
                ),
            ]
        )
        + _deletion_errors(spec, bool(selector))
        + _failed(
            [
                (
                    suspend and selector,
                    "the ClusterSelector mode doesn't support the suspend operation",
                ),
                (
                    cluster is None and not selector,
                    "one of RayClusterSpec or ClusterSelector must be set",
                ),
                (
                    selector and not selector.get("ray.io/cluster"),
                    "cluster name in ClusterSelector should not be empty",
                ),
                (selector and sidecar, "ClusterSelector is not supported in SidecarMode"),
                (
                    selector and backoff > 0,
                    "BackoffLimit is incompatible with ClusterSelector mode",
                ),
                (
                    mode == "InteractiveMode" and backoff > 0,
                    "BackoffLimit is incompatible with InteractiveMode",
                ),
                (
                    sidecar and "submitterPodTemplate" in spec,
                    "Currently, SidecarMode doesn't support SubmitterPodTemplate",
                ),
                (
                    sidecar and "submitterConfig" in spec,
                    "Currently, SidecarMode doesn't support SubmitterConfig",
                ),
                (
                    sidecar
                    and _pod((cluster or {}).get("headGroupSpec") or {}).get(
                        "restartPolicy", "Never"
                    )
                    != "Never",
                    "restartPolicy for head Pod should be Never or unset when using SidecarMode",
                ),
                (
                    ((cluster or {}).get("authOptions") or {}).get("enableK8sTokenAuth") is True,
                    "K8s token auth mode is currently not supported for RayJob",
                ),
            ]
        )
    )
    if cluster is not None:
        errs += [f"rayClusterSpec: {e}" for e in validate_ray_cluster_spec(cluster, annotations)]
    return errs + _failed(
        [
            (bad_env, bad_env),
            (
                spec.get("activeDeadlineSeconds", 1) <= 0,
                "activeDeadlineSeconds must be a positive integer",
            ),
            (
                spec.get("preRunningDeadlineSeconds", 1) <= 0,
                "preRunningDeadlineSeconds must be a positive integer",
            ),
            (backoff < 0, "backoffLimit must be a positive integer"),
        ]
    )


def validate_ray_service_spec(doc: Json) -> list[str]:
    """ValidateRayServiceSpec and its ValidateClusterUpgradeOptions."""
    spec, annotations = doc.get("spec") or {}, (doc.get("metadata") or {}).get("annotations") or {}
    cluster, upgrade = spec.get("rayClusterConfig") or {}, spec.get("upgradeStrategy") or {}
    head_service = (cluster.get("headGroupSpec") or {}).get("headService") or {}
    errs = (
        _failed(
            [
                (
                    (cluster.get("authOptions") or {}).get("enableK8sTokenAuth") is True,
                    "K8s token auth mode is currently not supported for RayService",
                ),
            ]
        )
        + [f"rayClusterConfig: {e}" for e in validate_ray_cluster_spec(cluster, annotations)]
        + _failed(
            [
                (
                    (head_service.get("metadata") or {}).get("name"),
                    "spec.rayClusterConfig.headGroupSpec.headService.metadata.name should not be set",
                ),
                (
                    upgrade.get("type")
                    not in (None, "None", "NewCluster", "NewClusterWithIncrementalUpgrade"),
                    f"Spec.UpgradeStrategy.Type value {upgrade.get('type')} is invalid",
                ),
                (
                    spec.get("rayClusterDeletionDelaySeconds", 0) < 0,
                    "Spec.RayClusterDeletionDelaySeconds should be a non-negative integer",
                ),
            ]
        )
    )
    if (
        upgrade.get("type") != "NewClusterWithIncrementalUpgrade"
        or not GATES["RayServiceIncrementalUpgrade"]
    ):
        return errs
    options = upgrade.get("clusterUpgradeOptions") or {}
    surge, step, interval = (
        options.get("maxSurgePercent", 100),
        options.get("stepSizePercent"),
        options.get("intervalSeconds"),
    )
    return errs + _failed(
        [
            (
                cluster.get("enableInTreeAutoscaling") is not True,
                "Ray Autoscaler is required for NewClusterWithIncrementalUpgrade",
            ),
            (
                not options,
                "ClusterUpgradeOptions are required for NewClusterWithIncrementalUpgrade",
            ),
            (options and not 0 <= surge <= 100, "maxSurgePercent must be between 0 and 100"),
            (
                options and (step is None or not 0 <= step <= 100),
                "stepSizePercent must be between 0 and 100",
            ),
            (
                step is not None and step > surge,
                "stepSizePercent must be less than or equal to maxSurgePercent",
            ),
            (
                options and (interval is None or interval <= 0),
                "intervalSeconds must be greater than 0",
            ),
            (
                options and not options.get("gatewayClassName"),
                "gatewayClassName is required for NewClusterWithIncrementalUpgrade",
            ),
        ]
    )


def validate_ray_cluster(doc: Json) -> list[str]:
    """ValidateRayClusterSpec and ValidateRayClusterUpgradeOptions, for a RayCluster object."""
    spec, metadata = doc.get("spec") or {}, doc.get("metadata") or {}
    upgrade = (spec.get("upgradeStrategy") or {}).get("type")
    created_by = (metadata.get("labels") or {}).get("ray.io/originated-from-crd")
    return validate_ray_cluster_spec(spec, metadata.get("annotations") or {}) + _failed(
        [
            (
                upgrade not in (None, "Recreate", "None"),
                f"Spec.UpgradeStrategy.Type value {upgrade} is invalid",
            ),
            (
                upgrade and created_by in ("RayJob", "RayService"),
                f"upgradeStrategy cannot be set when RayCluster is created by {created_by}",
            ),
        ]
    )


# Not from validation.go: v1 fields the CRD keeps but KubeRay no longer reads (rayservice_types.go:94-99)
UNUSED_FIELDS = {
    "RayService": ("serviceUnhealthySecondThreshold", "deploymentUnhealthySecondThreshold")
}


def code_rule_errors(doc: Json) -> list[str]:
    """The operator's Go-code rules for one ray.io object: what its reconciler would reject."""
    kind, spec = doc.get("kind", ""), doc.get("spec") or {}
    errs = validate_metadata(kind, doc.get("metadata") or {})
    errs += {
        "RayJob": validate_ray_job_spec,
        "RayService": validate_ray_service_spec,
        "RayCluster": validate_ray_cluster,
    }[kind](doc)
    return errs + [
        f"spec.{field} is deprecated: KubeRay {KUBERAY_TAG} ignores it"
        for field in UNUSED_FIELDS.get(kind, ())
        if field in spec
    ]
