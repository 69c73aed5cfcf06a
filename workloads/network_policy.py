"""Only the job's own pods may connect to it: c10d rendezvous, NCCL and Gloo use ports chosen
at run time, so every port is open between peers and nothing is open to anyone else. Egress
stays open: object store, DNS, the registry and the fabric are outside the namespace."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

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
