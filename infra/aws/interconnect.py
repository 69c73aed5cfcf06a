"""What a pod needs to use EFA: the device resource (count from the catalog) and NCCL/libfabric env."""

from __future__ import annotations

from infra.catalog import Interconnect, Machine
from infra.contract import InterconnectSpec

EFA_RESOURCE = "vpc.amazonaws.com/efa"
# Instance families whose EFA supports RDMA read/write (GPUDirect RDMA): p4d/p4de and p5*.
RDMA_FAMILIES = ("p4d", "p4de", "p5", "p5e", "p5en")


def uses_efa(machine: Machine, fabric: bool) -> bool:
    return fabric and machine.interconnect == Interconnect.EFA and machine.efa_interfaces > 0


def efa_interconnect(machine: Machine, fabric: bool) -> InterconnectSpec:
    """EFA resources and env for the job's machine; plain TCP sockets when the fabric is off."""
    if not uses_efa(machine, fabric):
        return InterconnectSpec(pod_resources={}, env={"NCCL_DEBUG": "WARN"})
    env = {
        "FI_PROVIDER": "efa",  # libfabric must not fall back to TCP silently
        "FI_EFA_FORK_SAFE": "1",  # DataLoader workers fork after EFA memory registration
        "NCCL_DEBUG": "WARN",  # INFO prints the chosen transport; WARN keeps logs readable
        # NCCL_SOCKET_IFNAME is left unset: NCCL already skips lo/docker, and AL2023 interface
        # names (ens*, eth*) differ between instance types.
    }
    if machine.name.split(".")[0] in RDMA_FAMILIES:
        env["FI_EFA_USE_DEVICE_RDMA"] = "1"
    return InterconnectSpec(
        pod_resources={EFA_RESOURCE: machine.efa_interfaces},
        env=env,
        capabilities=("IPC_LOCK",),  # EFA pins (locks) memory for RDMA
    )
