"""Turn captured `kubernetes:*` registrations into manifests, validate and write them.

Mocks write no YAML (TESTING.md), so the manifests are rebuilt from what the program passed:
wire names are already Kubernetes field names; numbers come back as floats and secrets wrapped.
Used by test_workloads.py and by the cloud tests on full stack runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import json

import jsonschema
import kubernetes_validate
import yaml

from tests.harness import Captured, Run

SECRET_SIG = "4dabf18193072939515e22adb298388d"  # Pulumi's marker for a secret value
POD_TEMPLATE_PATHS = {  # where a custom resource without a schema here keeps its pod templates
    "PyTorchJob": lambda m: [r.get("template") for r in
                             m["spec"].get("pytorchReplicaSpecs", {}).values()],
}
# Custom resources whose CRD schema is vendored (tests/schemas): checked whole, and their
# embedded batch/v1 Job templates against Kubernetes' own Job schema. JobSet: the newest release in
# infra/addon_versions.py (the older ones lack only fields this program does not use).
SCHEMAS = Path(__file__).with_name("schemas")
CRD_SCHEMAS = {
    "JobSet": SCHEMAS / "jobset-v0.12.0.json",
    # Kueue's kueue.x-k8s.io/v1beta2 kinds at the release in infra/addon_versions.py.
    **{kind: SCHEMAS / f"kueue-{kind.lower()}-v0.19.2.json"
       for kind in ("ResourceFlavor", "ClusterQueue", "LocalQueue", "AdmissionCheck",
                    "ProvisioningRequestConfig")},
}


def _jobset_jobs(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    name = manifest["metadata"]["name"]
    namespace = manifest["metadata"].get("namespace", "default")
    return [{"apiVersion": "batch/v1", "kind": "Job",
             "metadata": {"name": f"{name}-{r['name']}-0", "namespace": namespace},
             "spec": r["template"]["spec"]} for r in manifest["spec"]["replicatedJobs"]]


def validate_custom_resource(manifest: dict[str, Any]) -> list[str]:
    """Problems of a custom resource against its vendored CRD schema (strict: no unknown keys
    where the CRD does not preserve them)."""
    schema = json.loads(CRD_SCHEMAS[manifest["kind"]].read_text())["schema"]
    strict = _no_additional_properties(schema)
    validator = jsonschema.Draft7Validator(strict)
    return [f"{manifest['kind']}/{manifest['metadata']['name']}: "
            f"{'.'.join(map(str, e.path))}: {e.message}" for e in validator.iter_errors(manifest)]


def _no_additional_properties(schema: Any) -> Any:
    """OpenAPI structural schemas prune unknown fields; a test should refuse them instead."""
    if isinstance(schema, dict):
        out = {k: _no_additional_properties(v) for k, v in schema.items()
               if not k.startswith("x-kubernetes")}
        if isinstance(out.get("pattern"), str) and out["pattern"].startswith("^(?i)"):
            # RE2 (the API server's) takes a flag group anywhere; Python's re only at the start.
            out["pattern"] = "(?i)^" + out["pattern"][len("^(?i)"):]
        if ("properties" in schema and "additionalProperties" not in schema
                and not schema.get("x-kubernetes-preserve-unknown-fields")):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [_no_additional_properties(v) for v in schema]
    return schema


def clean(value: Any) -> Any:
    """Unwrap secrets, whole floats back to ints, drop None (the engine omits them too)."""
    if isinstance(value, dict):
        if value.get(SECRET_SIG) is not None and "value" in value:
            return clean(value["value"])
        return {k: clean(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [clean(v) for v in value if v is not None]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _api_version_and_kind(type_token: str) -> tuple[str, str]:
    """`kubernetes:batch/v1:Job` -> ("batch/v1", "Job"); core/v1 is plain "v1"."""
    _, group_version, kind = type_token.split(":", 2)
    return (group_version.removeprefix("core/"), kind)


NOT_OBJECTS = ("kubernetes:helm.sh/v3:Release",)  # provider-side Helm installs, not manifests


def is_kubernetes_object(resource: Captured) -> bool:
    """An object the API server receives (not a component such as a chart, nor a Helm release)."""
    return (resource.custom and resource.type.startswith("kubernetes:")
            and resource.type not in NOT_OBJECTS)


def is_custom_resource(manifest: dict[str, Any]) -> bool:
    """An instance of a CRD: its group has a dot and is not one of Kubernetes' own (*.k8s.io;
    the SIGs' projects, *.x-k8s.io, are CRDs)."""
    group = manifest["apiVersion"].rpartition("/")[0]
    return "." in group and (group.endswith(".x-k8s.io") or not group.endswith("k8s.io"))


def manifest_of(resource: Captured) -> dict[str, Any]:
    api_version, kind = _api_version_and_kind(resource.type)
    body = clean(resource.inputs)
    if "name" not in body.get("metadata", {}):  # auto-named by Pulumi: the name it was given
        body.setdefault("metadata", {})["name"] = resource.outputs["metadata"]["name"]
    return {"apiVersion": body.pop("apiVersion", api_version), "kind": body.pop("kind", kind),
            **body}


def manifests_of(run: Run) -> list[dict[str, Any]]:
    """Every Kubernetes object a run registered, as the API server would receive it."""
    return [manifest_of(r) for r in run.resources if is_kubernetes_object(r)]


def _schema_checkable(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """The manifest itself, or for a custom resource its pod templates as v1 PodTemplates
    (none when its CRD's schema is not known here: the operator's webhook checks those)."""
    if manifest["kind"] == "JobSet":
        return _jobset_jobs(manifest)
    templates = POD_TEMPLATE_PATHS.get(manifest["kind"])
    if templates is None:
        return [] if is_custom_resource(manifest) else [manifest]
    name = manifest["metadata"]["name"]
    return [{"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": f"{name}-{i}"},
             "template": template} for i, template in enumerate(templates(manifest))]


def validate_manifests(run: Run, kubernetes_version: str) -> list[dict[str, Any]]:
    """Validate every manifest against the official schema of `kubernetes_version` ("1.33")
    in strict mode (unknown keys are errors); raise one AssertionError listing every problem.
    Custom resources are checked through their pod templates (POD_TEMPLATE_PATHS) only."""
    version = f"{kubernetes_version}.0" if kubernetes_version.count(".") == 1 else kubernetes_version
    manifests = manifests_of(run)
    errors: list[str] = []
    for manifest in manifests:
        if manifest["kind"] in CRD_SCHEMAS:
            errors += validate_custom_resource(manifest)
        for checkable in _schema_checkable(manifest):
            label = f"{manifest['kind']}/{manifest.get('metadata', {}).get('name')}"
            try:
                kubernetes_validate.validate(checkable, version, strict=True)
            except kubernetes_validate.ValidationError as error:
                path = ".".join(str(p) for p in error.path)
                errors.append(f"{label}: {path}: {error.message}")
            except kubernetes_validate.SchemaNotFoundError as error:
                errors.append(f"{label}: no schema in Kubernetes {version} ({error}); add its "
                              "pod templates to POD_TEMPLATE_PATHS")
    assert not errors, "invalid Kubernetes manifests:\n  " + "\n  ".join(errors)
    return manifests


def write_manifests(run: Run, directory: Path) -> list[Path]:
    """One YAML file per object (`<kind>-<name>.yaml`), e.g. for checkov or a golden diff."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    # A scanner that does not know JobSet still checks the pods, through its child Jobs.
    every = [m for manifest in manifests_of(run)
             for m in ([manifest, *_jobset_jobs(manifest)] if manifest["kind"] == "JobSet"
                       else [manifest])]
    for manifest in every:
        name = manifest.get("metadata", {}).get("name", "unnamed")
        path = directory / f"{manifest['kind'].lower()}-{name}.yaml"
        path.write_text(yaml.safe_dump(manifest, sort_keys=False))
        paths.append(path)
    return paths
