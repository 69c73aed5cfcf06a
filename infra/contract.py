"""The cluster contract: everything the workload layer may know about a cloud's GPU cluster.

Each cloud component (infra/aws, infra/azure, infra/gcp) returns one `GpuCluster`; workloads/
consumes it and nothing else, so the Kubernetes objects never depend on which cloud made them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import pulumi
import pulumi_kubernetes as k8s

from infra.catalog.cloud import Cloud
from infra.catalog.machines import Machine


@dataclass(frozen=True)
class Taint:
    """A node taint the job must tolerate to land on a pool."""

    key: str
    value: str
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = "NoSchedule"


@dataclass(frozen=True)
class GpuPool:
    """One GPU node pool as the scheduler sees it."""

    name: str
    machine: Machine
    min_nodes: int
    desired_nodes: int
    max_nodes: int
    spot: bool
    node_labels: Mapping[str, str]  # labels every node of this pool carries: the job selects on them
    taints: Sequence[Taint]


@dataclass(frozen=True)
class CsiVolumeSource:
    """A static PersistentVolume backed by a CSI driver (FSx for Lustre)."""

    driver: str
    volume_handle: pulumi.Input[str]
    volume_attributes: Mapping[str, pulumi.Input[str]]


@dataclass(frozen=True)
class NfsVolumeSource:
    """A static PersistentVolume backed by an NFS export (Azure NetApp Files, Filestore)."""

    server: pulumi.Input[str]
    path: pulumi.Input[str]


@dataclass(frozen=True)
class SharedFileSystem:
    """The high-throughput file system every pod mounts."""

    source: CsiVolumeSource | NfsVolumeSource
    capacity_gib: int
    mount_path: str
    mount_options: Sequence[str]
    file_system_id: pulumi.Output[str]
    ready: pulumi.Resource  # the job waits for this resource


@dataclass(frozen=True)
class CheckpointStore:
    """Where checkpoints go, and the identity that lets the job (and only the job) write there."""

    uri: pulumi.Output[str]  # s3://bucket/prefix, az://container/prefix, gs://bucket/prefix
    bucket: pulumi.Output[str]
    service_account_annotations: Mapping[str, pulumi.Input[str]]
    pod_labels: Mapping[str, str]
    env: Mapping[str, pulumi.Input[str]] = field(default_factory=dict)  # e.g. AZURE_STORAGE_ACCOUNT_NAME (adlfs)


@dataclass(frozen=True)
class PreparationIdentity:
    """The dataset preparation's own cloud identity, on its own Kubernetes service account
    (`job.serviceAccount` + "-prepare"): it reads the preparation's bucket source and nothing
    else, no checkpoint write, no node rights. Empty (the default) when the source is a folder
    on the shared file system: the preparation then gets no cloud identity at all."""

    service_account_annotations: Mapping[str, pulumi.Input[str]] = field(default_factory=dict)
    pod_labels: Mapping[str, str] = field(default_factory=dict)
    env: Mapping[str, pulumi.Input[str]] = field(default_factory=dict)
    ready: Sequence[pulumi.Resource] = ()  # its federation and grants: the Job waits for them


@dataclass(frozen=True)
class InterconnectSpec:
    """What a pod needs to use the fabric: device resources, environment, capabilities, and
    (GKE GPUDirect) the pod-side pieces a fabric brings: annotations, host volumes, and the
    receive-datapath manager that runs beside the trainer. Every field past `env` defaults to
    nothing, so a fabric that needs only devices and environment (EFA, InfiniBand) sets none."""

    # Device counts or Kubernetes quantities, requested and limited alike,
    # e.g. {"vpc.amazonaws.com/efa": 32, "hugepages-2Mi": "5120Mi"}
    pod_resources: Mapping[str, int | str]
    env: Mapping[str, str]  # NCCL / libfabric / UCX settings
    capabilities: Sequence[str] = ()  # e.g. ("IPC_LOCK",) to pin memory for RDMA
    # Pod annotations, e.g. GKE multi-networking (networking.gke.io/interfaces) and the NRI
    # device injector's per-container device list (devices.gke.io/container.<name>).
    pod_annotations: Mapping[str, str] = field(default_factory=dict)
    volumes: Sequence[k8s.core.v1.VolumeArgs] = ()  # added to the pod's own volumes
    trainer_volume_mounts: Sequence[k8s.core.v1.VolumeMountArgs] = ()  # into the trainer
    # Containers that run beside the trainer for its whole life (GPUDirect's rxdm). Each is a
    # Kubernetes native sidecar: an init container with restart_policy "Always", which the
    # kubelet stops once the trainer has exited, so a batch pod still completes.
    sidecars: Sequence[k8s.core.v1.ContainerArgs] = ()
    # True when a sidecar needs what only the Pod Security "privileged" level admits (hostPath
    # volumes, capabilities outside "baseline" such as NET_ADMIN): the job's namespace then
    # enforces "privileged" (workloads/identity.py).
    privileged_pod_security: bool = False
    # RDMA registers (pins) the trainer's memory, which counts against RLIMIT_MEMLOCK; a node
    # whose containers start with a small limit (AKS: 64 KiB) cannot be fixed from the pod spec,
    # and IPC_LOCK does nothing for a non-root process. True: the trainer container starts as
    # root holding only SYS_RESOURCE, SETUID and SETGID; the launcher raises the limit and drops
    # to the trainer's uid before anything else runs (trainer/launch.py).
    raise_locked_memory: bool = False
    # The fabric NICs NCCL must use on every node (EFA interfaces, InfiniBand HCAs); the fabric
    # gate fails a node where NCCL found fewer (a dead HCA or EFA device). 0 = not checked.
    fabric_rails: int = 0
    # True: the trainer container runs as root (uid 0), for a fabric whose vendor runs its NCCL
    # only so (GKE GPUDirect-TCPX/TCPXO); still not privileged, no privilege escalation, every
    # capability dropped but `capabilities`.
    trainer_runs_as_root: bool = False
    # The NCCL version ("2.29.7") every rank must have loaded (GKE GPUDirect: torch's own, which
    # the fabric's plugin runs under); the fabric gate fails, before any collective, a node
    # whose ranks loaded another. "" = not checked.
    nccl_version: str = ""


@dataclass(frozen=True)
class GpuCluster:
    """The whole contract one cloud component hands to the workload layer."""

    cloud: Cloud
    name: pulumi.Output[str]
    kubeconfig: pulumi.Output[str]  # secret
    provider: k8s.Provider  # built from the kubeconfig; depends on pools and add-ons
    gpu_pools: Mapping[str, GpuPool]  # keyed "onDemand" / "spot", as in the settings
    shared_file_system: SharedFileSystem
    checkpoints: CheckpointStore
    interconnect: InterconnectSpec
    trainer_image: pulumi.Input[str]
    ready: Sequence[pulumi.Resource]  # pools, add-ons: the job is created after all of them
    # Annotations every training pod carries for the cloud's node lifecycle, e.g. AWS: Cluster
    # Autoscaler must not remove a node while a training pod runs on it.
    pod_annotations: Mapping[str, str] = field(default_factory=dict)
    # The control plane's version on this run (infra/kubernetes_release.py): the exact build
    # where the cloud names one, else the minor.
    kubernetes_version: str | None = None
    # The version the GPU nodes run, where the cloud lets it lag the control plane's (GKE
    # upgrades nodes after the control plane); pod settings derived from the version (the spot
    # stop budget) read it. None: the nodes run kubernetes_version.
    node_version: str | None = None
    # Addresses no pod of the job may reach (CIDRs), e.g. AKS's instance metadata service;
    # denied by a CiliumNetworkPolicy, so set only where Cilium enforces policy (AKS):
    # workloads/network_policy.py deny_egress.
    pod_egress_denied: Sequence[str] = ()
    # The dataset preparation's identity (empty: none, its source is on the shared FS).
    preparation: PreparationIdentity = field(default_factory=PreparationIdentity)
    # Stack outputs a cloud adds, e.g. Azure's derived globally unique names
    # ({"storage_account": ..., "registry": ...}), which the user's CLI commands need.
    exports: Mapping[str, pulumi.Input[str | bool | Mapping[str, str]]] = field(
        default_factory=dict)


@dataclass(frozen=True)
class GpuClusterArgs:
    """What every cloud component is built from: the validated settings and a name prefix."""

    settings: "Settings"  # kubernetes.version holds the minor chosen for this run
    name_prefix: str  # "<project>-<stack>", so two stacks can live in one account
    release: "Release"  # the Kubernetes version for this run: asked of the cloud, or kept
    previous: "PreviousRun"  # the stack's outputs from its last update (empty: first run)


from infra.kubernetes_release import Release  # noqa: E402
from infra.previous_run import PreviousRun  # noqa: E402
# typing only; avoids an import cycle
from infra.settings.model.stack_file import Settings  # noqa: E402
