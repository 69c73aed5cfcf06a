"""The job's namespace and service account: the workload identity binding lives on these."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from infra.contract import GpuCluster
from workloads.names import JobNames
from workloads.pod_security import fabric_exceptions

meta = k8s.meta.v1


def namespace(name: str, names: JobNames, cluster: GpuCluster,
              opts: pulumi.ResourceOptions) -> k8s.core.v1.Namespace:
    """Pod Security Admission enforces the lowest level the pods fit: `baseline` (the shared-FS
    init container runs as root with CHOWN, which `restricted` refuses), or `privileged` only
    when the fabric needs what `baseline` refuses (workloads/pod_security.py: AKS InfiniBand's
    SYS_RESOURCE, GKE GPUDirect's host paths and the rxdm's NET_ADMIN); there a
    ValidatingAdmissionPolicy puts baseline back but for exactly those exceptions. It always
    warns and audits against `restricted`."""
    enforce = "privileged" if fabric_exceptions(cluster).any else "baseline"
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


def prepare_service_account(name: str, names: JobNames, cluster: GpuCluster,
                            ns: k8s.core.v1.Namespace,
                            opts: pulumi.ResourceOptions) -> k8s.core.v1.ServiceAccount:
    """The dataset preparation's own account: the cloud identity that reads its bucket source
    (cluster.preparation), or none when the source is on the shared file system; never the
    trainer's, which writes checkpoints and may patch nodes (issue 33)."""
    return k8s.core.v1.ServiceAccount(
        name,
        metadata=meta.ObjectMetaArgs(
            name=names.prepare_service_account,
            namespace=ns.metadata.name,
            labels={**names.common_labels, **cluster.preparation.pod_labels},
            annotations=dict(cluster.preparation.service_account_annotations) or None,
        ),
        automount_service_account_token=False,
        opts=opts,
    )
