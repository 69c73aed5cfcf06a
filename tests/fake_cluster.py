"""Hand-made GpuCluster contracts, one per cloud flavour, for testing workloads/ alone.

The values mirror what each cloud component hands over (CSI FSx + EFA on AWS, NFS + InfiniBand
on Azure, NFS without a fabric on GCP, or with GPUDirect on A3), built from catalog machines so the tests read the same
facts the program does. Call `fake_cluster` inside a mocked program: it creates resources.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from infra.catalog.cloud import Cloud
from infra.catalog.machines import machine
from infra.contract import (CheckpointStore, CsiVolumeSource, GpuCluster, GpuPool,
                            InterconnectSpec, NfsVolumeSource, PreparationIdentity,
                            SharedFileSystem, Taint)
from tests.fakes.common import FAKE_KUBECONFIG

IMAGE = f"registry.example.com/torchrec/trainer:0123abcd@sha256:{'a' * 64}"


class FakeResource(pulumi.CustomResource):
    """Stands in for a node pool, an add-on or a file system: something to wait for."""

    def __init__(self, type_name: str, name: str) -> None:
        super().__init__(f"fake:cluster:{type_name}", name, {})


@dataclass(frozen=True)
class Flavour:
    cloud: Cloud
    machine_type: str
    pool_label: str  # the node label key each cloud puts the pool name under
    spot_taint: Taint
    source: Any
    mount_options: tuple[str, ...]
    checkpoint_uri: str
    annotations: dict[str, str]
    pod_labels: dict[str, str]
    checkpoint_env: dict[str, str]
    interconnect: InterconnectSpec
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def prepare_annotations(self) -> dict[str, str]:
        """The preparation's own identity, as each cloud names it for a bucket source."""
        return {key: f"prepare-{value}" for key, value in self.annotations.items()}


FLAVOURS: dict[str, Flavour] = {
    "aws": Flavour(
        cloud=Cloud.AWS, machine_type="p4d.24xlarge", pool_label="eks.amazonaws.com/nodegroup",
        spot_taint=Taint("eks.amazonaws.com/capacityType", "SPOT"),
        source=CsiVolumeSource(driver="fsx.csi.aws.com", volume_handle="fs-0123456789abcdef0",
                               volume_attributes={
                                   "dnsname": "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com",
                                   "mountname": "abcdefgh"}),
        mount_options=("flock",),
        checkpoint_uri="s3://torchrec-cloud-aws-checkpoints/dlrm",
        annotations={"eks.amazonaws.com/role-arn": "arn:aws:iam::123456789012:role/trainer"},
        pod_labels={},
        checkpoint_env={"AWS_REGION": "us-east-1"},
        interconnect=InterconnectSpec(
            pod_resources={"vpc.amazonaws.com/efa": machine(Cloud.AWS, "p4d.24xlarge").efa_interfaces},
            fabric_rails=machine(Cloud.AWS, "p4d.24xlarge").efa_interfaces,
            env={"FI_PROVIDER": "efa", "FI_EFA_USE_DEVICE_RDMA": "1", "NCCL_SOCKET_IFNAME": "^lo"}),
    ),
    "azure": Flavour(
        cloud=Cloud.AZURE, machine_type="Standard_ND96asr_v4", pool_label="kubernetes.azure.com/agentpool",
        spot_taint=Taint("kubernetes.azure.com/scalesetpriority", "spot"),
        source=NfsVolumeSource(server="10.1.2.4", path="/shared"),
        mount_options=("vers=4.1", "rsize=262144", "wsize=262144", "hard", "nconnect=8"),
        checkpoint_uri="az://checkpoints/dlrm",
        annotations={"azure.workload.identity/client-id": "00000000-0000-0000-0000-000000000001"},
        pod_labels={"azure.workload.identity/use": "true"},
        checkpoint_env={"AZURE_STORAGE_ACCOUNT_NAME": "torchrecckpt"},
        interconnect=InterconnectSpec(
            pod_resources={},
            env={"NCCL_IB_PCI_RELAXED_ORDERING": "1", "UCX_TLS": "rc", "NCCL_SOCKET_IFNAME": "eth0"},
            capabilities=("IPC_LOCK",)),
    ),
    "gcp": Flavour(
        cloud=Cloud.GCP, machine_type="a2-highgpu-8g", pool_label="cloud.google.com/gke-nodepool",
        spot_taint=Taint("cloud.google.com/gke-spot", "true"),
        source=NfsVolumeSource(server="10.2.0.2", path="/shared"),
        mount_options=("vers=3", "hard", "nconnect=7"),
        checkpoint_uri="gs://torchrec-cloud-gcp-checkpoints/dlrm",
        annotations={"iam.gke.io/gcp-service-account": "trainer@proj.iam.gserviceaccount.com"},
        pod_labels={},
        checkpoint_env={},
        interconnect=InterconnectSpec(pod_resources={}, env={"NCCL_SOCKET_IFNAME": "eth0"}),
    ),
}


def _gcp_a3(machine_type: str) -> Flavour:
    """GKE A3 with GPUDirect: the contract infra/gcp hands over for the machine (sidecar,
    annotations, host volumes, NCCL environment), on the plain GCP flavour otherwise."""
    from dataclasses import replace

    from infra.gcp.interconnect import interconnect_spec

    return replace(FLAVOURS["gcp"], machine_type=machine_type,
                   interconnect=interconnect_spec(machine(Cloud.GCP, machine_type), True))


FLAVOURS["gcp-a3"] = _gcp_a3("a3-highgpu-8g")  # GPUDirect-TCPX
FLAVOURS["gcp-a3-mega"] = _gcp_a3("a3-megagpu-8g")  # GPUDirect-TCPXO


def _azure_infiniband() -> Flavour:
    """AKS ND96asr_v4 with InfiniBand: the contract infra/azure hands over (rdma/ib, the raised
    locked-memory limit), on the plain Azure flavour otherwise."""
    from dataclasses import replace
    from types import SimpleNamespace

    from infra.azure.interconnect import interconnect_spec

    uses_fabric = SimpleNamespace(interconnect=SimpleNamespace(fabric=True))
    return replace(FLAVOURS["azure"], interconnect=interconnect_spec(
        uses_fabric, machine(Cloud.AZURE, "Standard_ND96asr_v4")))  # type: ignore[arg-type]


FLAVOURS["azure-ib"] = _azure_infiniband()

POOL_NAMES = {"onDemand": "gpu", "spot": "gpuspot"}


def fake_pool(flavour: Flavour, key: str) -> GpuPool:
    spot = key == "spot"
    gpu_taint = Taint("nvidia.com/gpu", "present")
    return GpuPool(
        name=POOL_NAMES[key], machine=machine(flavour.cloud, flavour.machine_type),
        min_nodes=0, desired_nodes=0 if spot else 2, max_nodes=2, spot=spot,
        node_labels={flavour.pool_label: POOL_NAMES[key]},
        taints=(gpu_taint, flavour.spot_taint) if spot else (gpu_taint,),
    )


@dataclass(frozen=True)
class FakeCluster:
    """The contract plus the resources it stands for, so tests can look them up by name."""

    contract: GpuCluster
    ready_names: tuple[str, ...]
    file_system_name: str
    provider_name: str


def fake_cluster(flavour_name: str) -> FakeCluster:
    flavour = FLAVOURS[flavour_name]
    ready_kinds = {f"{flavour_name}-pool-gpu": "NodePool", f"{flavour_name}-pool-gpuspot": "NodePool",
                   f"{flavour_name}-device-plugin": "AddOn"}
    ready = [FakeResource(kind, name) for name, kind in ready_kinds.items()]
    file_system_name = f"{flavour_name}-file-system"
    file_system = FakeResource("FileSystem", file_system_name)
    provider = k8s.Provider(f"{flavour_name}-kubernetes", kubeconfig=FAKE_KUBECONFIG,
                            opts=pulumi.ResourceOptions(depends_on=ready))
    contract = GpuCluster(
        cloud=flavour.cloud,
        name=pulumi.Output.from_input(f"{flavour_name}-cluster"),
        kubeconfig=pulumi.Output.secret(FAKE_KUBECONFIG),
        provider=provider,
        gpu_pools={key: fake_pool(flavour, key) for key in POOL_NAMES},
        shared_file_system=SharedFileSystem(
            source=flavour.source, capacity_gib=2400, mount_path="/mnt/shared",
            mount_options=flavour.mount_options,
            file_system_id=pulumi.Output.from_input("fs-id"), ready=file_system),
        checkpoints=CheckpointStore(
            uri=pulumi.Output.from_input(flavour.checkpoint_uri),
            bucket=pulumi.Output.from_input("bucket"),
            service_account_annotations=flavour.annotations,
            pod_labels=flavour.pod_labels,
            env=flavour.checkpoint_env),
        interconnect=flavour.interconnect,
        trainer_image=IMAGE,
        ready=ready,
        preparation=PreparationIdentity(
            service_account_annotations=flavour.prepare_annotations,
            pod_labels=flavour.pod_labels, env=flavour.checkpoint_env),
    )
    return FakeCluster(contract, tuple(ready_kinds), file_system_name, f"{flavour_name}-kubernetes")
