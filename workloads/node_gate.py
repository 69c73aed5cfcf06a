"""The least privilege the fabric gate needs to leave a bad node out (trainer/node_taint.py).

RBAC cannot say "patch only this field": a ClusterRole lets the job's service account get, list
and patch nodes, and a ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1, GA since
Kubernetes 1.30; every cluster here runs 1.34+) narrows what that account's writes may change
to one thing: adding or removing the taint `status-taint.cluster-autoscaler.kubernetes.io/torchrec-cloud-unhealthy:NoSchedule` (value
`fabric-gate`). Labels, annotations, `unschedulable` and every other taint must stay as they
were, and so must finalizers and owner references (a finalizer would block the node's deletion,
an owner reference would let the garbage collector delete it), so the account can neither
attract nor repel other workloads, nor lift a cloud's own taints, nor keep or remove a node. Only
GPU nodes (those carrying one GPU pool's labels) may be written at all: system nodes, where the
cluster's own controllers run, are refused whole. No delete, no update verb. The token reaches only the trainer container (a projected
volume in workloads/pod.py), and the job's pods do not tolerate the taint.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import pulumi
import pulumi_kubernetes as k8s

from trainer.node_taint import TAINT_KEY, TAINT_VALUE
from workloads.names import JobNames

meta = k8s.meta.v1
adm = k8s.admissionregistration.v1

_TAINTS = "(has({o}.spec.taints) ? {o}.spec.taints.filter(t, t.key != '{k}') : [])"
_MAP = "(has({o}.metadata.{f}) ? {o}.metadata.{f} : {{}})"
VALIDATIONS = [
    (_TAINTS.format(o="object", k=TAINT_KEY) + " == " + _TAINTS.format(o="oldObject", k=TAINT_KEY),
     f"the training job's service account may change no taint but {TAINT_KEY}"),
    (f"!has(object.spec.taints) || object.spec.taints.all(t, t.key != '{TAINT_KEY}' || "
     f"(t.effect == 'NoSchedule' && has(t.value) && t.value == '{TAINT_VALUE}'))",
     f"{TAINT_KEY} must be NoSchedule with value {TAINT_VALUE}"),
    (_MAP.format(o="object", f="labels") + " == " + _MAP.format(o="oldObject", f="labels"),
     "the training job's service account may not change a node's labels"),
    (_MAP.format(o="object", f="annotations") + " == "
     + _MAP.format(o="oldObject", f="annotations"),
     "the training job's service account may not change a node's annotations"),
    ("(has(object.spec.unschedulable) && object.spec.unschedulable) == "
     "(has(oldObject.spec.unschedulable) && oldObject.spec.unschedulable)",
     "the training job's service account may not cordon or uncordon a node"),
    ("(has(object.metadata.finalizers) ? object.metadata.finalizers : []) == "
     "(has(oldObject.metadata.finalizers) ? oldObject.metadata.finalizers : [])",
     "the training job's service account may not change a node's finalizers"),
    ("(has(object.metadata.ownerReferences) ? object.metadata.ownerReferences : []) == "
     "(has(oldObject.metadata.ownerReferences) ? oldObject.metadata.ownerReferences : [])",
     "the training job's service account may not change a node's owner references"),
]


def _cel_text(text: str) -> str:
    """A CEL string literal (JSON's double-quoted escapes are CEL's)."""
    return json.dumps(text)


def gpu_node_validation(gpu_node_labels: Sequence[Mapping[str, str]]) -> tuple[str, str]:
    """The node written must be a GPU node: it carries every label of one GPU pool (the
    labels the job selects on, infra/contract.py GpuPool.node_labels), judged on the node as
    it was, so the write cannot add them."""
    pools = [" && ".join(f"{_cel_text(k)} in oldObject.metadata.labels && "
                         f"oldObject.metadata.labels[{_cel_text(k)}] == {_cel_text(v)}"
                         for k, v in sorted(labels.items()))
             for labels in gpu_node_labels if labels]
    expression = ("has(oldObject.metadata.labels) && ("
                  + (" || ".join(f"({p})" for p in pools) or "false") + ")")
    return expression, "the training job's service account may taint GPU nodes only"


def validations(gpu_node_labels: Sequence[Mapping[str, str]]) -> list[tuple[str, str]]:
    """Every rule the policy checks: the node is a GPU node, and nothing but the one taint
    changes."""
    return [gpu_node_validation(gpu_node_labels), *VALIDATIONS]


def object_name(names: JobNames) -> str:
    """Cluster-scoped objects: one set per job, named after its namespace and name."""
    return f"{names.namespace}-{names.job}-node-gate"


def service_account_user(names: JobNames) -> str:
    return f"system:serviceaccount:{names.namespace}:{names.service_account}"


def node_gate_access(name: str, names: JobNames, opts: pulumi.ResourceOptions,
                     gpu_node_labels: Sequence[Mapping[str, str]] = ()
                     ) -> list[pulumi.CustomResource]:
    """ClusterRole and its binding to the job's service account, and the admission policy and
    its binding that keep that account's node writes to the one taint."""
    cluster_name = object_name(names)
    labels = names.common_labels
    role = k8s.rbac.v1.ClusterRole(
        f"{name}-role", metadata=meta.ObjectMetaArgs(name=cluster_name, labels=labels),
        rules=[k8s.rbac.v1.PolicyRuleArgs(api_groups=[""], resources=["nodes"],
                                          verbs=["get", "list", "patch"])],
        opts=opts)
    policy = adm.ValidatingAdmissionPolicy(
        f"{name}-policy", metadata=meta.ObjectMetaArgs(name=cluster_name, labels=labels),
        spec=adm.ValidatingAdmissionPolicySpecArgs(
            failure_policy="Fail",
            match_constraints=adm.MatchResourcesArgs(resource_rules=[
                adm.NamedRuleWithOperationsArgs(api_groups=[""], api_versions=["v1"],
                                                operations=["UPDATE"], resources=["nodes"])]),
            # Only this job's account: the kubelet, controllers and admins are not judged.
            match_conditions=[adm.MatchConditionArgs(
                name="training-job-service-account",
                expression=f"request.userInfo.username == '{service_account_user(names)}'")],
            validations=[adm.ValidationArgs(expression=expression, message=message)
                         for expression, message in validations(gpu_node_labels)]),
        opts=opts)
    policy_binding = adm.ValidatingAdmissionPolicyBinding(
        f"{name}-policy-binding", metadata=meta.ObjectMetaArgs(name=cluster_name, labels=labels),
        spec=adm.ValidatingAdmissionPolicyBindingSpecArgs(policy_name=cluster_name,
                                                           validation_actions=["Deny"]),
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[policy])))
    # The grant comes last: until the policy binds, the account has no write on nodes at all.
    binding = k8s.rbac.v1.ClusterRoleBinding(
        f"{name}-role-binding", metadata=meta.ObjectMetaArgs(name=cluster_name, labels=labels),
        role_ref=k8s.rbac.v1.RoleRefArgs(api_group="rbac.authorization.k8s.io",
                                         kind="ClusterRole", name=cluster_name),
        subjects=[k8s.rbac.v1.SubjectArgs(kind="ServiceAccount", name=names.service_account,
                                          namespace=names.namespace)],
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[role, policy_binding])))
    return [role, policy, policy_binding, binding]
