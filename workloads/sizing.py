"""Pod resources from the catalog machine: a whole node per pod, minus room for the node's own
daemons (kubelet, device plugins, CSI and CNI agents), so the pod still fits after the cloud's
reservations. requests == limits gives the Guaranteed QoS class: last to be evicted."""

from __future__ import annotations

import math
from dataclasses import dataclass

from infra.catalog.machines import Machine
from infra.contract import GpuPool, InterconnectSpec
from infra.pod_share import NODE_SHARE

SHM_FRACTION = 0.25  # /dev/shm counts against the memory limit: NCCL and data loaders use it
SHM_MAX_GIB = 64


@dataclass(frozen=True)
class PodSize:
    cpu: int
    memory_gib: int
    gpus: int
    devices: dict[str, int | str]  # the fabric's resources: EFA, InfiniBand, huge pages

    @property
    def shm_gib(self) -> int:
        return max(1, min(SHM_MAX_GIB, int(self.memory_gib * SHM_FRACTION)))

    def quantities(self) -> dict[str, str]:
        """Kubernetes resource quantities, the same for requests and limits."""
        return {
            "cpu": str(self.cpu),
            "memory": f"{self.memory_gib}Gi",
            "nvidia.com/gpu": str(self.gpus),
            **{name: str(count) for name, count in sorted(self.devices.items())},
        }


def pod_size(pool: GpuPool, interconnect: InterconnectSpec) -> PodSize:
    machine: Machine = pool.machine
    return PodSize(
        cpu=max(1, math.floor(machine.vcpus * NODE_SHARE)),
        memory_gib=max(1, math.floor(machine.memory_gib * NODE_SHARE)),
        gpus=machine.gpu_count,
        devices=dict(interconnect.pod_resources),
    )
