"""The job's namespace and service account: the workload identity binding lives on these."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from infra.contract import GpuCluster
from workloads.names import JobNames

meta = k8s.meta.v1


def namespace(name: str, names: JobNames, cluster: GpuCluster,
              opts: pulumi.ResourceOptions) -> k8s.core.v1.Namespace:
    """Pod Security Admission enforces `baseline` (the shared-FS init container runs as root
    with CHOWN, which `restricted` refuses), or `privileged` when the fabric needs a capability
    outside `baseline` (IPC_LOCK for RDMA) or a sidecar with host paths and NET_ADMIN (GKE
    GPUDirect's rxdm); it always warns and audits against `restricted`."""
    needs_privileged = (bool(cluster.interconnect.capabilities)
                        or cluster.interconnect.privileged_pod_security
                        or cluster.interconnect.raise_locked_memory)  # SYS_RESOURCE
    enforce = "privileged" if needs_privileged else "baseline"
    return k8s.core.v1.Namespace(
        name,
        metadata=meta.ObjectMetaArgs(name=names.namespace, labels={
            **names.common_labels,
            "pod-security.kubernetes.io/enforce": enforce,
            "pod-security.kubernetes.io/warn": "restricted",
            "pod-security.kubernetes.io/audit": "restricted",
        }),
        opts=opts,
    )


def service_account(name: str, names: JobNames, cluster: GpuCluster, ns: k8s.core.v1.Namespace,
                    opts: pulumi.ResourceOptions) -> k8s.core.v1.ServiceAccount:
    """Carries the cloud's workload identity annotations (IRSA role ARN, Azure client id, GCP
    service account): the only way the job gets cloud credentials."""
    return k8s.core.v1.ServiceAccount(
        name,
        metadata=meta.ObjectMetaArgs(
            name=names.service_account,
            namespace=ns.metadata.name,
            labels={**names.common_labels, **cluster.checkpoints.pod_labels},
            annotations=dict(cluster.checkpoints.service_account_annotations),
        ),
        automount_service_account_token=False,
        opts=opts,
    )
