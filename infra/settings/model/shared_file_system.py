"""`sharedFileSystem`: each cloud's shared file system (FSx for Lustre, Azure NetApp Files,
Filestore), told apart by `kind`."""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Literal, Union

from pydantic import Field

from infra.catalog.storage import (FSX_CAPACITY_STEP_GIB, FSX_MB_S_PER_TIB_TIERS,
                                   FSX_SMALL_CAPACITIES_GIB)
from infra.settings.model.section import Section


class FsxDeploymentType(str, Enum):
    SCRATCH_2 = "SCRATCH_2"
    PERSISTENT_1 = "PERSISTENT_1"
    PERSISTENT_2 = "PERSISTENT_2"


class FsxLustre(Section):
    """AWS FSx for Lustre."""

    kind: Literal["fsx-lustre"] = Field("fsx-lustre", description="The file system kind of this cloud.")
    deployment_type: FsxDeploymentType = Field(
        FsxDeploymentType.PERSISTENT_2, description="SCRATCH_2, PERSISTENT_1 or PERSISTENT_2."
    )
    capacity_gib: int = Field(2400, description=(
        f"{', '.join(map(str, FSX_SMALL_CAPACITIES_GIB))}, then steps of {FSX_CAPACITY_STEP_GIB} GiB."))
    throughput_per_tib: int | None = Field(
        250,
        description="MB/s per TiB: " + ", ".join(
            f"{kind} {'/'.join(map(str, tiers))}" for kind, tiers in FSX_MB_S_PER_TIB_TIERS.items()
            if tiers) + ", none for SCRATCH_2.",
    )
    mount_path: str = Field("/mnt/shared", description="Where pods mount the file system.")
    backup_id: str | None = Field(
        None, description="Create the file system from this FSx backup, e.g. the final backup "
        "`pulumi destroy` kept of the checkpoints (docs/aws.md, Clean up); read at creation only.")


class AnfServiceLevel(str, Enum):
    STANDARD = "Standard"
    PREMIUM = "Premium"
    ULTRA = "Ultra"


class AzureNetAppFiles(Section):
    """Azure NetApp Files: a capacity pool and one NFS volume in it."""

    kind: Literal["azure-netapp-files"] = Field("azure-netapp-files", description="The file system kind of this cloud.")
    service_level: AnfServiceLevel = Field(
        AnfServiceLevel.PREMIUM, description="Standard, Premium or Ultra."
    )
    pool_size_tib: int = Field(4, description="Capacity pool size: at least 1 TiB, whole TiB.")
    volume_size_gib: int = Field(
        4096, description="Volume quota: 50 GiB to 100 TiB, and no more than the pool."
    )
    mount_path: str = Field("/mnt/shared", description="Where pods mount the file system.")


class FilestoreTier(str, Enum):
    BASIC_HDD = "BASIC_HDD"
    BASIC_SSD = "BASIC_SSD"
    ZONAL = "ZONAL"
    REGIONAL = "REGIONAL"
    HIGH_SCALE_SSD = "HIGH_SCALE_SSD"


class Filestore(Section):
    """GCP Filestore."""

    kind: Literal["filestore"] = Field("filestore", description="The file system kind of this cloud.")
    tier: FilestoreTier = Field(FilestoreTier.ZONAL, description="Filestore service tier.")
    capacity_gib: int = Field(
        2560,
        description="BASIC_HDD 1-63.9 TiB, BASIC_SSD 2.5-63.9 TiB, ZONAL/REGIONAL 1-9.75 TiB "
        "in 256 GiB steps or 10-100 TiB in 2.5 TiB steps, HIGH_SCALE_SSD 10-100 TiB.",
    )
    share_name: str = Field("shared", description="NFS export name.")
    mount_path: str = Field("/mnt/shared", description="Where pods mount the file system.")


SharedFileSystem = Annotated[
    Union[FsxLustre, AzureNetAppFiles, Filestore], Field(discriminator="kind")
]
