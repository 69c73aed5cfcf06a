"""`systemPool` and `gpuPools`: each node pool's machine and size, the on-demand pool's GCP
reservation and flex-start, the spot pool's price cap."""

from __future__ import annotations

from enum import Enum

from pydantic import Field

from infra.settings.model.section import Section


class NodePool(Section):
    """A node pool's machine and size."""

    name: str = Field(description="Pool name (AKS: lowercase letters and digits, at most 12).")
    machine_type: str = Field(description="Machine type; must be in the catalog for the cloud.")
    min_nodes: int = Field(ge=0, description="Autoscaler lower bound.")
    desired_nodes: int = Field(
        ge=0, description="Nodes at creation (AWS: afterwards Cluster Autoscaler owns the size).")
    max_nodes: int = Field(ge=0, description="Autoscaler upper bound.")


class SystemPool(NodePool):
    """The small CPU pool that runs add-ons (device plugins, CSI drivers, DNS)."""

    name: str = Field("system", description="Pool name.")
    min_nodes: int = Field(1, ge=1, description="Autoscaler lower bound (at least 1).")
    desired_nodes: int = Field(
        2, ge=1,
        description="Nodes at creation (AWS: afterwards Cluster Autoscaler owns the size).")
    max_nodes: int = Field(3, ge=1, description="Autoscaler upper bound.")


class ReservationAffinity(str, Enum):
    ANY = "any"
    SPECIFIC = "specific"


class Reservation(Section):
    """GCP only: where the on-demand pool's nodes come from when on-demand capacity has none."""

    affinity: ReservationAffinity = Field(
        ReservationAffinity.SPECIFIC,
        description="specific (only the named reservation) or any (any matching reservation "
        "of the project, else on-demand).")
    name: str = Field(
        "", description="The reservation (specific only): its name, or "
        "projects/<project>/reservations/<name> for one shared from another project.")


class OnDemandGpuPool(NodePool):
    """The on-demand GPU pool: the reference setup trains on 2 of these nodes."""

    name: str = Field("gpu", description="Pool name.")
    min_nodes: int = Field(0, ge=0, description="Autoscaler lower bound.")
    desired_nodes: int = Field(
        0, ge=0,
        description="Nodes at creation; afterwards the cloud's autoscaler owns the size. 0 leaves "
        "the pool empty until the job's pods ask for nodes, so a shortage of the machine cannot "
        "fail `pulumi up` (a node group whose first nodes cannot launch ends in a failed state).")
    max_nodes: int = Field(2, ge=0, description="Autoscaler upper bound.")
    reservation: Reservation | None = Field(
        None, description="GCP only: consume a Compute Engine reservation (how H100/H200 "
        "capacity is usually bought).")
    flex_start: bool = Field(
        False, description="GCP only: Dynamic Workload Scheduler flex-start VMs, created when "
        "the job's pods wait (minNodes and desiredNodes 0, no reservation).")
    queued_provisioning: bool = Field(
        False, description="GCP only: DWS queued provisioning; refused, it needs a "
        "ProvisioningRequest the JobSet does not make (use flexStart).")


class SpotGpuPool(NodePool):
    """The spot GPU pool: scales to zero, paired with checkpointing."""

    enabled: bool = Field(True, description="Create the spot pool.")
    name: str = Field("gpuspot", description="Pool name.")
    min_nodes: int = Field(0, ge=0, description="Autoscaler lower bound (0 = scale to zero).")
    desired_nodes: int = Field(
        0, ge=0,
        description="Nodes at creation (AWS: afterwards Cluster Autoscaler owns the size).")
    max_nodes: int = Field(2, ge=0, description="Autoscaler upper bound.")
    max_price: float = Field(
        -1,
        description="Azure only: spot price cap in USD per hour; -1 pays up to on-demand.",
    )


class GpuPools(Section):
    """The two GPU pools: one on-demand, one spot."""

    on_demand: OnDemandGpuPool
    spot: SpotGpuPool
