"""How much of a node each pod takes, and the dataset preparation pod's size, in one place: the
workload layer requests them and the settings' rules check what they imply before any resource
exists (a preparation that cannot end within its deadline)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from infra.catalog.machines import Machine
from trainer.prepare import default_workers

# A pod takes this fraction of its node's vCPUs and memory, leaving room for the node's own
# daemons (kubelet, device plugins, CSI and CNI agents) after the cloud's reservations.
NODE_SHARE = 0.9
# The dataset preparation on the system pool takes half a node: the pool also runs the
# cluster's add-ons (DNS, CSI drivers, controllers).
SYSTEM_POOL_SHARE = 0.5


@dataclass(frozen=True)
class PrepareSize:
    """The preparation pod's requests and workers: a share of its machine unless
    dataset.prepare sets them (0 = unset)."""

    cpu: int
    memory_gib: int
    workers: int

    @classmethod
    def of(cls, machine: Machine, share: float, cpu: int = 0, memory_gib: int = 0,
           workers: int = 0) -> "PrepareSize":
        cpu = cpu or max(1, math.floor(machine.vcpus * share))
        memory_gib = memory_gib or max(1, math.floor(machine.memory_gib * share))
        return cls(cpu, memory_gib, workers or default_workers(cpu, memory_gib))
