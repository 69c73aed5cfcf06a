"""Only the job's own pods may connect to it: c10d rendezvous, NCCL and Gloo use ports chosen
at run time, so every port is open between peers and nothing is open to anyone else. Egress
stays open: object store, DNS, the registry and the fabric are outside the namespace; but for
the addresses the cloud says no pod of the job needs (cluster.pod_egress_denied: AKS's
instance metadata service, whose kubelet identity tokens a pod could otherwise take), denied
by a Cilium policy (deny_egress)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from collections.abc import Sequence

from workloads.names import JobNames

networking = k8s.networking.v1


def same_job_only_spec(names: JobNames) -> dict[str, Any]:
    """The spec, as the API server takes it: the stack's job (`pulumi up`) and a submitted one
    (`torchrec-cloud submit`, workloads/submitted.py) both render it here."""
    selector = {"matchLabels": dict(names.selector)}
    return {"podSelector": selector, "policyTypes": ["Ingress", "Egress"],
            "ingress": [{"from": [{"podSelector": selector}]}],
            "egress": [{}]}  # one empty rule: all egress


def same_job_only_manifest(names: JobNames, labels: Mapping[str, str]) -> dict[str, Any]:
    """The whole object, for a job `pulumi up` does not own."""
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": names.network_policy, "namespace": names.namespace,
                         "labels": dict(labels)},
            "spec": same_job_only_spec(names)}


def same_job_only(name: str, names: JobNames, opts: pulumi.ResourceOptions) -> networking.NetworkPolicy:
    return networking.NetworkPolicy(
        name,
        metadata=k8s.meta.v1.ObjectMetaArgs(name=names.network_policy, namespace=names.namespace,
                                            labels=names.common_labels),
        spec=same_job_only_spec(names),
        opts=opts,
    )


def prepare_no_ingress(name: str, names: JobNames,
                       opts: pulumi.ResourceOptions) -> networking.NetworkPolicy:
    """The dataset preparation pod serves nothing: no ingress at all. Egress stays open: it
    reads the bucket (object store endpoints, the cloud's token service) and DNS, and writes
    the shared file system (NFS or Lustre servers outside the namespace)."""
    return networking.NetworkPolicy(
        name,
        metadata=k8s.meta.v1.ObjectMetaArgs(name=names.prepare_network_policy,
                                            namespace=names.namespace, labels=names.common_labels),
        spec=networking.NetworkPolicySpecArgs(
            pod_selector=k8s.meta.v1.LabelSelectorArgs(match_labels=names.prepare_selector),
            policy_types=["Ingress", "Egress"],
            ingress=[],
            egress=[networking.NetworkPolicyEgressRuleArgs()],  # one empty rule: all egress
        ),
        opts=opts,
    )


# Cilium's policy CRD (cilium.io/v2 CiliumNetworkPolicy), installed with the Cilium dataplane
# that enforces network policy on AKS (infra/azure/cluster.py).
CILIUM_POLICY = {"api_version": "cilium.io/v2", "kind": "CiliumNetworkPolicy"}


def deny_egress(name: str, names: JobNames, cidrs: Sequence[str],
                opts: pulumi.ResourceOptions) -> k8s.apiextensions.CustomResource | None:
    """Every pod of the job's namespace (trainers, preparation, gate) refused `cidrs`, and
    nothing else changed.

    Why a Cilium deny rule, not the Kubernetes NetworkPolicy's egress as "0.0.0.0/0 except
    169.254.169.254/32": Cilium implements ipBlock `except`, but its CIDR rules never select
    the cluster's pods or nodes (AKS, "Azure CNI Powered by Cilium", Limitations: "Network
    policies cannot use ipBlock to allow access to node or pod IPs",
    https://learn.microsoft.com/azure/aks/azure-cni-powered-by-cilium) nor, after the service
    translation, the API server, which carries Cilium's reserved kube-apiserver identity
    (cilium/cilium#20550, open-telemetry/opentelemetry-operator#5624): an allow-list of
    CIDRs would cut the fabric gate's Kubernetes API calls. A deny rule takes precedence over
    every allow, the Kubernetes NetworkPolicy's included
    (https://docs.cilium.io/en/latest/security/policy/deny/), so the job keeps its open egress
    but for these addresses. Azure workload identity needs no IMDS: the pod exchanges its
    projected service-account token at Entra ID (login.microsoftonline.com)
    (https://azure.github.io/azure-workload-identity/docs/introduction.html)."""
    if not cidrs:
        return None
    return k8s.apiextensions.CustomResource(
        name,
        **CILIUM_POLICY,
        metadata=k8s.meta.v1.ObjectMetaArgs(name=names.egress_deny_policy,
                                            namespace=names.namespace, labels=names.common_labels),
        spec={"endpointSelector": {},  # every pod of the namespace
              "egressDeny": [{"toCIDR": list(cidrs)}]},
        opts=opts,
    )
