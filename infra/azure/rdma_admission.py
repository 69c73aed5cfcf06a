"""Only the job's namespace may ask for `rdma/ib`, the node's InfiniBand HCAs.

The RDMA shared device plugin hands every HCA of a node to any pod that requests one `rdma/ib`
([aks-ib] rdmaHcaMax 63, infra/azure/interconnect.py), and InfiniBand traffic bypasses Cilium:
the job's NetworkPolicy does not cover it. A ResourceQuota cannot say "zero everywhere but
here" (it is per namespace, and a namespace created later has none), so a
ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1, GA since Kubernetes 1.30;
https://kubernetes.io/docs/reference/access-authn-authz/validating-admission-policy/) denies a
pod that requests or limits `rdma/ib` in any container or init container, bound to every
namespace except the job's (`kubernetes.io/metadata.name`, which the API server sets to the
namespace's name and nobody can change).
"""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from infra.azure.interconnect import RDMA_RESOURCE

POLICY_NAME = "rdma-ib-only-in-the-training-namespace"
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
ADMISSION = k8s.admissionregistration.v1
# Every container that gets devices (ephemeral containers take no resources).
CONTAINERS = ("object.spec.containers + "
              "(has(object.spec.initContainers) ? object.spec.initContainers : [])")
NO_RDMA = (f"!variables.containers.exists(c, has(c.resources) && "
           f"((has(c.resources.requests) && '{RDMA_RESOURCE}' in c.resources.requests) || "
           f"(has(c.resources.limits) && '{RDMA_RESOURCE}' in c.resources.limits)))")


def restrict_rdma(prefix: str, job_namespace: str,
                  opts: pulumi.ResourceOptions) -> list[pulumi.Resource]:
    """The policy and its binding (Deny); the job waits for both."""
    policy = ADMISSION.ValidatingAdmissionPolicy(
        f"{prefix}-rdma-ib-policy",
        metadata=k8s.meta.v1.ObjectMetaArgs(name=POLICY_NAME),
        spec=ADMISSION.ValidatingAdmissionPolicySpecArgs(
            failure_policy="Fail",
            match_constraints=ADMISSION.MatchResourcesArgs(resource_rules=[
                ADMISSION.NamedRuleWithOperationsArgs(
                    api_groups=[""], api_versions=["v1"], operations=["CREATE"],
                    resources=["pods"])]),
            variables=[ADMISSION.VariableArgs(name="containers", expression=CONTAINERS)],
            validations=[ADMISSION.ValidationArgs(
                expression=NO_RDMA,
                message_expression=(f"'{RDMA_RESOURCE} (every InfiniBand HCA of the node, "
                                    f"outside network policy) is only for namespace "
                                    f"{job_namespace}, not ' + namespaceObject.metadata.name"),
                reason="Forbidden")]),
        opts=opts)
    binding = ADMISSION.ValidatingAdmissionPolicyBinding(
        f"{prefix}-rdma-ib-policy-binding",
        metadata=k8s.meta.v1.ObjectMetaArgs(name=POLICY_NAME),
        spec=ADMISSION.ValidatingAdmissionPolicyBindingSpecArgs(
            policy_name=POLICY_NAME,
            validation_actions=["Deny"],
            match_resources=ADMISSION.MatchResourcesArgs(
                namespace_selector=k8s.meta.v1.LabelSelectorArgs(match_expressions=[
                    k8s.meta.v1.LabelSelectorRequirementArgs(
                        key=NAMESPACE_NAME_LABEL, operator="NotIn",
                        values=[job_namespace])]))),
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[policy])))
    return [policy, binding]
