"""`Settings`: everything one stack file says, validated; each section is its own module."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from infra.catalog.cloud import Cloud
from infra.settings.model.checkpoints import Checkpoints
from infra.settings.model.cloud_options import AwsOptions, AzureOptions, GcpOptions
from infra.settings.model.dataset import Dataset
from infra.settings.model.interconnect import Interconnect
from infra.settings.model.job import Job, PoolChoice
from infra.settings.model.kubernetes import Kubernetes
from infra.settings.model.pools import GpuPools, NodePool, SystemPool
from infra.settings.model.quota import Quota
from infra.settings.model.section import Section
from infra.settings.model.shared_file_system import SharedFileSystem


# Text whose values are naturally numbers (Azure zones "1", a tag "2026"): `pulumi config set
# --path 'zones[0]' 1` stores the integer 1 (the CLI reads integers as numbers under --path), so
# a whole number is taken as its text rather than refused with a fix that stores it again.
NumberText = Annotated[str, Field(coerce_numbers_to_str=True)]


class Settings(Section):
    """Everything one stack file says, validated."""

    cloud: Cloud = Field(description="aws, azure or gcp.")
    region: str = Field(description="Region for every resource.")
    zones: list[NumberText] = Field(
        description="Zones the cluster spans (EKS needs two). AWS takes zone names "
        "(us-east-1a, a per-account alias) or zone ids (use1-az4, the same place in every "
        "account); use one spelling in zones and gpuZones.")
    gpu_zones: list[NumberText] = Field(
        description="Zones of the GPU pools and the file system; on AWS checked against "
        "the machine type's offerings when the program runs.")
    kubernetes: Kubernetes
    system_pool: SystemPool
    gpu_pools: GpuPools
    interconnect: Interconnect = Field(default_factory=Interconnect)
    shared_file_system: SharedFileSystem
    checkpoints: Checkpoints = Field(default_factory=Checkpoints)
    dataset: Dataset = Field(default_factory=Dataset)
    job: Job = Field(default_factory=Job)
    quota: Quota = Field(default_factory=Quota)
    tags: dict[str, NumberText] = Field(default_factory=dict,
                                        description="Tags/labels on resources.")
    aws: AwsOptions | None = None
    azure: AzureOptions | None = None
    gcp: GcpOptions | None = None

    @property
    def job_pool(self) -> NodePool:
        """The GPU pool the job is scheduled on."""
        if self.job.pool == PoolChoice.SPOT:
            return self.gpu_pools.spot
        return self.gpu_pools.on_demand

    @property
    def gpu_pools_by_key(self) -> dict[PoolChoice, NodePool]:
        """The enabled GPU pools, keyed as in the stack file (onDemand, spot): the one place
        every cloud and the contract take their pool keys and spot-ness from."""
        pools: dict[PoolChoice, NodePool] = {PoolChoice.ON_DEMAND: self.gpu_pools.on_demand}
        if self.gpu_pools.spot.enabled:
            pools[PoolChoice.SPOT] = self.gpu_pools.spot
        return pools

    @property
    def enabled_gpu_pools(self) -> list[NodePool]:
        return list(self.gpu_pools_by_key.values())
