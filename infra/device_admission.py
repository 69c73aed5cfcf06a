"""Only the job's namespace may ask for a node's fabric devices (an extended resource such as
AWS's `vpc.amazonaws.com/efa`).

A device plugin hands a node's fabric devices to any pod that requests the resource, and RDMA
traffic over them bypasses the CNI: the job's NetworkPolicy does not cover it. A ResourceQuota
cannot say "zero everywhere but here" (it is per namespace, and a namespace created later has
none), so a ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1, GA since Kubernetes
1.30; https://kubernetes.io/docs/reference/access-authn-authz/validating-admission-policy/)
denies a pod that requests or limits the resource in any container or init container, bound to
every namespace except the job's (`kubernetes.io/metadata.name`, which the API server sets to
the namespace's name and nobody can change). The same design as Azure's `rdma/ib` policy
(infra/azure/rdma_admission.py).
"""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
ADMISSION = k8s.admissionregistration.v1
# Every container that gets devices (ephemeral containers take no resources).
CONTAINERS = ("object.spec.containers + "
              "(has(object.spec.initContainers) ? object.spec.initContainers : [])")


def no_device_expression(resource: str) -> str:
    """CEL: no container requests or limits `resource`."""
    return (f"!variables.containers.exists(c, has(c.resources) && "
            f"((has(c.resources.requests) && '{resource}' in c.resources.requests) || "
            f"(has(c.resources.limits) && '{resource}' in c.resources.limits)))")


def restrict_device(prefix: str, short: str, resource: str, what: str, job_namespace: str,
                    opts: pulumi.ResourceOptions) -> list[pulumi.Resource]:
    """The policy `<short>-only-in-the-training-namespace` and its binding (Deny); the job
    waits for both. `what` says what the resource gives, for the refusal message."""
    name = f"{short}-only-in-the-training-namespace"
    policy = ADMISSION.ValidatingAdmissionPolicy(
        f"{prefix}-{short}-policy",
        metadata=k8s.meta.v1.ObjectMetaArgs(name=name),
        spec=ADMISSION.ValidatingAdmissionPolicySpecArgs(
            failure_policy="Fail",
            match_constraints=ADMISSION.MatchResourcesArgs(resource_rules=[
                ADMISSION.NamedRuleWithOperationsArgs(
                    api_groups=[""], api_versions=["v1"], operations=["CREATE"],
                    resources=["pods"])]),
            variables=[ADMISSION.VariableArgs(name="containers", expression=CONTAINERS)],
            validations=[ADMISSION.ValidationArgs(
                expression=no_device_expression(resource),
                message_expression=(f"'{resource} ({what}) is only for namespace "
                                    f"{job_namespace}, not ' + namespaceObject.metadata.name"),
                reason="Forbidden")]),
        opts=opts)
    return [policy, deny_binding(f"{prefix}-{short}-policy-binding", policy, name, "NotIn",
                                 job_namespace, opts)]


def deny_binding(resource_name: str, policy: pulumi.Resource, policy_name: str, operator: str,
                 namespace: str, opts: pulumi.ResourceOptions,
                 labels: dict[str, str] | None = None) -> pulumi.Resource:
    """The binding (Deny) of `policy_name` to the namespaces that are (operator "In") or are
    not ("NotIn") `namespace`, made after the policy."""
    return ADMISSION.ValidatingAdmissionPolicyBinding(
        resource_name,
        metadata=k8s.meta.v1.ObjectMetaArgs(name=policy_name, labels=labels),
        spec=ADMISSION.ValidatingAdmissionPolicyBindingSpecArgs(
            policy_name=policy_name,
            validation_actions=["Deny"],
            match_resources=ADMISSION.MatchResourcesArgs(
                namespace_selector=k8s.meta.v1.LabelSelectorArgs(match_expressions=[
                    k8s.meta.v1.LabelSelectorRequirementArgs(
                        key=NAMESPACE_NAME_LABEL, operator=operator, values=[namespace])]))),
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[policy])))
