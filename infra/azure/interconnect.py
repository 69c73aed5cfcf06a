"""InfiniBand on ND-series: placement, the pod's device resource and the NCCL/UCX environment.

Follows Azure's AKS RDMA/InfiniBand guidance (github.com/Azure/aks-rdma-infiniband): the NVIDIA
Network Operator installs the DOCA/OFED driver and the RDMA shared device plugin, which exposes
every InfiniBand HCA of a node to pods as one shared resource, `rdma/shared_ib`.
"""

from __future__ import annotations

import pulumi
from pulumi_azure_native import compute

from infra.catalog import Interconnect as Fabric
from infra.catalog import Machine
from infra.contract import InterconnectSpec
from infra.settings.model import Settings

RDMA_RESOURCE_NAME = "shared_ib"  # the device plugin's resourceName; pods ask for rdma/<this>
RDMA_RESOURCE = f"rdma/{RDMA_RESOURCE_NAME}"

# NCCL over the ND-series InfiniBand HCAs (mlx5_*); bootstrap/TCP on the VM's Ethernet (eth0).
INFINIBAND_ENV: dict[str, str] = {
    "NCCL_IB_DISABLE": "0",
    "NCCL_IB_HCA": "mlx5",  # prefix: every mlx5_* InfiniBand port
    "NCCL_IB_TIMEOUT": "22",
    "NCCL_IB_PCI_RELAXED_ORDERING": "1",
    "NCCL_NET_GDR_LEVEL": "SYS",  # GPUDirect RDMA across the PCIe switch (Azure's NCCL tests)
    "NCCL_SOCKET_IFNAME": "eth0",
    "NCCL_DEBUG": "WARN",
    "UCX_TLS": "rc",
    "UCX_IB_PCI_RELAXED_ORDERING": "on",
    "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
}
ETHERNET_ENV: dict[str, str] = {
    "NCCL_IB_DISABLE": "1",
    "NCCL_SOCKET_IFNAME": "eth0",
    "NCCL_DEBUG": "WARN",
}


def uses_infiniband(settings: Settings, machine: Machine) -> bool:
    """The fabric is used when the stack asks for it and the machine has it."""
    return settings.interconnect.fabric and machine.interconnect == Fabric.INFINIBAND


def interconnect_spec(settings: Settings, machine: Machine) -> InterconnectSpec:
    """What a training pod needs: one shared RDMA device, locked memory for RDMA, NCCL env."""
    if not uses_infiniband(settings, machine):
        return InterconnectSpec(pod_resources={}, env=dict(ETHERNET_ENV))
    return InterconnectSpec(
        pod_resources={RDMA_RESOURCE: 1},
        env=dict(INFINIBAND_ENV),
        capabilities=("IPC_LOCK",),  # RDMA pins (registers) memory
    )


def create_placement_group(prefix: str, settings: Settings, resource_group_name: pulumi.Input[str],
                           tags: dict[str, str], opts: pulumi.ResourceOptions
                           ) -> compute.ProximityPlacementGroup | None:
    """One proximity placement group in the GPU zone, shared by both GPU pools, so nodes that
    talk over InfiniBand sit in the same datacenter."""
    if not settings.interconnect.placement:
        return None
    vm_sizes = sorted({pool.machine_type for pool in settings.enabled_gpu_pools})
    return compute.ProximityPlacementGroup(
        f"{prefix}-gpu-ppg",
        resource_group_name=resource_group_name,
        proximity_placement_group_name=f"{prefix}-gpu-ppg",
        proximity_placement_group_type=compute.ProximityPlacementGroupType.STANDARD,
        zones=list(settings.gpu_zones),
        intent=compute.ProximityPlacementGroupPropertiesIntentArgs(vm_sizes=vm_sizes),
        tags=tags,
        opts=opts,
    )
