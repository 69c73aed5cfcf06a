"""InfiniBand on ND-series: placement, the pod's device resource and the NCCL/UCX environment.

Follows Azure's AKS RDMA/InfiniBand guidance (github.com/Azure/aks-rdma-infiniband): the NVIDIA
Network Operator installs the DOCA/OFED driver and the RDMA shared device plugin, which exposes
every InfiniBand HCA of a node to pods as one shared resource. Its name is `rdma/ib`, not Azure's
example `rdma/shared_ib`: the cluster autoscaler reads a scale set's node-template resource tags
with every `_` (and `~2`) turned into `/`, so a name with `_` cannot be declared and a pool at
zero nodes would never grow for the pod (kubernetes/autoscaler @ 55c37cd5,
cluster-autoscaler/cloudprovider/azure/azure_template.go, extractAllocatableResourcesFromScaleSet).

The environment, per value (the references, pinned to the commits read):
- [aks-ib]   Azure/aks-rdma-infiniband @ 700dabb4 (2026-07-16): tests/scenarios/k8s/values.yaml
  (NCCL_IB_DISABLE=0, NCCL_NET_GDR_LEVEL=SYS), templates/mpi-job.yaml (CUDA_DEVICE_ORDER,
  NCCL_TOPO_FILE), files/scripts/rdma_test.sh (the Ethernet mlx5 device, mlx5_8 on AKS, breaks
  NCCL and must be left out: "NCCL_IB_HCA=^mlx5_8").
- [ai-infra] Azure/ai-infrastructure-on-azure @ a01b0731 (2026-04-22): AKS NCCL test chart
  infrastructure_validations/aks/NCCL/helm/nccl-test/values.yaml (ND H100/H200 v5 defaults:
  NCCL_SOCKET_IFNAME=eth0, NCCL_IB_PCI_RELAXED_ORDERING, NCCL_IB_QPS_PER_CONNECTION,
  NCCL_IGNORE_CPU_AFFINITY, NCCL_P2P_NET_CHUNKSIZE, NCCL_PXN_DISABLE, NCCL_MIN_NCHANNELS,
  UCX_TLS=rc, UCX_NET_DEVICES=mlx5_0:1), and the AKS health check
  infrastructure_validations/aks/NHC/helm/aznhc/values.yaml, which checks exactly mlx5_0..mlx5_7
  as the InfiniBand ports of an AKS ND node.
- [azhpc]    Azure/azhpc-images @ 8e9d055f (2026-07-29): components/setup_sku_customizations.sh
  (standard_nd*v4 -> ndv4, standard_nd96is*_h[1-2]00_v5 -> ndv5), customizations/ndv4.sh and
  ndv5.sh (/etc/nccl.conf: NCCL_IB_PCI_RELAXED_ORDERING=1, NCCL_TOPO_FILE, NCCL_IGNORE_CPU_AFFINITY=1),
  tests/health_checks/NDv4/test-nccl.sh (UCX_IB_PCI_RELAXED_ORDERING=on). Its mlx5_ib*/mlx5_an0
  names come from its own azure_persistent_rdma_naming service, which AKS node images do not
  run: on AKS the HCAs keep the kernel's mlx5_<n> names ([ai-infra] NHC, [aks-ib]).
- NCCL_NET=IB: the one network NCCL may use; without usable InfiniBand it fails instead of
  falling back to sockets (https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html#nccl-net).
"""

from __future__ import annotations

import pulumi
from pulumi_azure_native import compute

from infra.catalog.machines import Interconnect as Fabric
from infra.catalog.machines import Machine
from infra.contract import InterconnectSpec
from infra.settings.model.stack_file import Settings

RDMA_RESOURCE_PREFIX = "rdma"  # the device plugin's resourcePrefix (also its default)
RDMA_RESOURCE_NAME = "ib"  # the device plugin's resourceName; no "_" (autoscaler tags)
RDMA_RESOURCE = f"{RDMA_RESOURCE_PREFIX}/{RDMA_RESOURCE_NAME}"
# Pods that may share a node's HCAs: what the plugin advertises as the node's rdma/ib ([aks-ib]
# configs/nicclusterpolicy/rdma-shared-device-plugin/rdma.yaml, "rdmaHcaMax": 63).
RDMA_HCA_MAX = 63
TOPOLOGY_DIR = "/opt/microsoft"  # where trainer/Dockerfile installs Azure's topology files


# Every ND generation ([azhpc] nccl.conf, [aks-ib], [ai-infra]).
INFINIBAND_ENV: dict[str, str] = {
    "NCCL_NET": "IB",  # forced: no InfiniBand -> NCCL fails, never TCP sockets
    "NCCL_IB_DISABLE": "0",
    "NCCL_IB_PCI_RELAXED_ORDERING": "1",
    "NCCL_IGNORE_CPU_AFFINITY": "1",
    "NCCL_NET_GDR_LEVEL": "SYS",  # GPUDirect RDMA across the PCIe switch
    "NCCL_SOCKET_IFNAME": "eth0",  # bootstrap on the VM's Ethernet
    "CUDA_DEVICE_ORDER": "PCI_BUS_ID",  # GPU numbering as in the topology file
    "NCCL_DEBUG": "WARN",
    # UCX is not NCCL's transport; these keep any UCX user (MPI, UCC) on InfiniBand RC.
    "UCX_TLS": "rc",
    "UCX_IB_PCI_RELAXED_ORDERING": "on",
}
# ND H100/H200 v5 tuning ([ai-infra] AKS NCCL chart defaults, written for NDv5).
NDV5_ENV: dict[str, str] = {
    "NCCL_IB_QPS_PER_CONNECTION": "4",
    "NCCL_P2P_NET_CHUNKSIZE": "524288",
    "NCCL_PXN_DISABLE": "1",
    "NCCL_MIN_NCHANNELS": "32",
}
ETHERNET_ENV: dict[str, str] = {
    "NCCL_IB_DISABLE": "1",
    "NCCL_SOCKET_IFNAME": "eth0",
    "NCCL_DEBUG": "WARN",
}


def topology_file(machine: Machine) -> str:
    """Azure's NCCL topology file for the machine's ND family (the catalog's azure_topology),
    at the path trainer/Dockerfile installs it."""
    return f"{TOPOLOGY_DIR}/{machine.azure_topology}-topo.xml"


def infiniband_hcas(machine: Machine) -> list[str]:
    """The InfiniBand HCAs by their AKS names, port 1 each (the catalog's ib_hcas); the
    Ethernet (accelerated networking) mlx5 device, numbered after them, is not among them."""
    return [f"mlx5_{index}:1" for index in range(machine.ib_hcas)]


def infiniband_env(machine: Machine) -> dict[str, str]:
    """The NCCL/UCX environment of one ND machine: HCAs, topology file, generation tuning."""
    hcas = infiniband_hcas(machine)
    env = {
        **INFINIBAND_ENV,
        # "=": exact names, so mlx5_1 cannot also match a mlx5_1x, and nothing else is used.
        "NCCL_IB_HCA": "=" + ",".join(hcas),
        "NCCL_TOPO_FILE": topology_file(machine),
        "UCX_NET_DEVICES": hcas[0],
    }
    if machine.azure_topology == "ndv5":
        env.update(NDV5_ENV)
    return env


def uses_infiniband(settings: Settings, machine: Machine) -> bool:
    """The fabric is used when the stack asks for it and the machine has it."""
    return settings.interconnect.fabric and machine.interconnect == Fabric.INFINIBAND


def interconnect_spec(settings: Settings, machine: Machine) -> InterconnectSpec:
    """What a training pod needs: one shared RDMA device, locked memory for RDMA, NCCL env."""
    if not uses_infiniband(settings, machine):
        return InterconnectSpec(pod_resources={}, env=dict(ETHERNET_ENV))
    return InterconnectSpec(
        pod_resources={RDMA_RESOURCE: 1},  # the shared plugin: one grant opens every HCA
        env=infiniband_env(machine),
        # AKS gives containers 64 KiB of locked memory (Azure/aks-rdma-infiniband,
        # website/docs/configurations/02-gpu-drivers.md) and has no ulimit setting
        # (custom-node-configuration-reference); Azure's own examples run as root with IPC_LOCK.
        # Here the container raises the limit as root and drops to uid 1000 at once.
        raise_locked_memory=True,
        fabric_rails=machine.ib_hcas,  # NCCL logs "NET/IB : Using [0]mlx5_0:1/IB ..."
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
