"""What the stack's storage takes and gives: how fast a checkpoint reaches each cloud's object
store, and each shared file system's tiers, sizes and throughput (FSx for Lustre, Azure NetApp
Files, Filestore), read by the settings' rules, the save-time estimate and the advisors."""

from __future__ import annotations

import math
from dataclasses import dataclass

from infra.catalog.cloud import Cloud


# --- Checkpoint write throughput: what a save can expect, for the save-time estimate ----------
@dataclass(frozen=True)
class CheckpointStoreSpeed:
    """Planning figures for checkpoint writes. DCP writes one file per rank, one stream each.

    The clouds publish object-store limits per bucket/account and per prefix, not per
    connection; a single PUT stream from Python (s3fs, adlfs, gcsfs) moves on the order of
    100 MB/s, so the per-stream figure is that, capped by the node's share of the account
    limit where one is published. Shared file systems are limited by the file system's own
    provisioned throughput, which the settings give (see infra/preemption.py).
    """

    cloud: Cloud
    object_store_mb_s_per_stream: float
    object_store_mb_s_per_account: float | None  # published account/bucket ingress limit
    source: str


CHECKPOINT_STORE_SPEEDS: tuple[CheckpointStoreSpeed, ...] = (
    CheckpointStoreSpeed(
        Cloud.AWS, 100.0, None,
        "https://docs.aws.amazon.com/AmazonS3/latest/userguide/optimizing-performance.html "
        "(3,500 PUT/s per prefix, scale with parallel connections; no bandwidth cap published)"),
    CheckpointStoreSpeed(
        Cloud.AZURE, 100.0, 7_500.0,  # 60 Gbit/s
        "https://learn.microsoft.com/azure/storage/common/scalability-targets-standard-account "
        "(default maximum ingress 60 Gbps per general-purpose v2 account in the largest regions)"),
    CheckpointStoreSpeed(
        Cloud.GCP, 100.0, None,
        "https://cloud.google.com/storage/docs/request-rate (no per-bucket bandwidth limit; "
        "ramp request rates gradually)"),
)


def checkpoint_store_speed(cloud: Cloud | str) -> CheckpointStoreSpeed:
    return next(s for s in CHECKPOINT_STORE_SPEEDS if s.cloud == Cloud(cloud))


# Shared file systems' write throughput per TiB provisioned, where the service level fixes it
# (FSx for Lustre takes it from the settings: throughputPerTib).
# https://learn.microsoft.com/azure/azure-netapp-files/azure-netapp-files-service-levels
ANF_MIB_S_PER_TIB = {"Standard": 16, "Premium": 64, "Ultra": 128}
FSX_SCRATCH_2_MB_S_PER_TIB = 200  # baseline; https://docs.aws.amazon.com/fsx/latest/LustreGuide/performance.html
# FSx for Lustre's throughput tiers (MB/s per TiB) by deployment type, the only values it takes
# (SCRATCH_2 has the fixed baseline above), and its SSD sizes: 1200 or 2400 GiB, then steps of
# 2400 GiB. https://docs.aws.amazon.com/fsx/latest/LustreGuide/performance.html; the settings'
# rule (infra/aws/rules.py), the advisors (infra/settings/cost_rules.py, torchrec_cloud/
# file_systems.py) and the prices (infra/prices.py FSX_LUSTRE_GB_MONTH) read these.
FSX_MB_S_PER_TIB_TIERS: dict[str, tuple[int, ...]] = {
    "PERSISTENT_2": (125, 250, 500, 1000), "PERSISTENT_1": (50, 100, 200), "SCRATCH_2": ()}
FSX_SMALL_CAPACITIES_GIB = (1200, 2400)
FSX_CAPACITY_STEP_GIB = 2400


def fsx_persistent_2_for(need_mb_s: float, capacity_gib: int) -> tuple[int, int]:
    """(throughputPerTib, capacityGib) of the smallest PERSISTENT_2 change that gives
    ``need_mb_s``: the lowest tier at this capacity, else the top tier with the capacity grown
    in steps."""
    tiers = FSX_MB_S_PER_TIB_TIERS["PERSISTENT_2"]
    for tier in tiers:
        if tier * capacity_gib / 1024 >= need_mb_s:
            return tier, capacity_gib
    step_mb_s = tiers[-1] * FSX_CAPACITY_STEP_GIB / 1024
    return tiers[-1], max(capacity_gib, FSX_CAPACITY_STEP_GIB * math.ceil(need_mb_s / step_mb_s))
# Filestore: write throughput of the smallest instance of each tier (conservative: it grows
# with capacity on ZONAL/REGIONAL/HIGH_SCALE_SSD). https://cloud.google.com/filestore/docs/performance
FILESTORE_WRITE_MB_S = {"BASIC_HDD": 100, "BASIC_SSD": 350, "ZONAL": 260, "REGIONAL": 260,
                        "HIGH_SCALE_SSD": 1_000}


# Filestore read throughput per TiB provisioned (ZONAL and REGIONAL scale with capacity:
# https://cloud.google.com/filestore/docs/service-tiers-zonal "260 MiB/s per 1 TiB" read,
# 88 MiB/s write); other tiers: their write figure above, conservative.
FILESTORE_READ_MIB_S_PER_TIB = {"ZONAL": 260}
# Filestore's sizes per tier: (least TiB, most TiB, step GiB or None for any size) ranges
# (https://cloud.google.com/filestore/docs/service-tiers): ZONAL and REGIONAL take 1-9.75 TiB in
# 256 GiB steps (the Enterprise class) or 10-100 TiB in 2.5 TiB steps (High Scale's successor).
# The settings' rule (infra/gcp/rules.py), the mount's nconnect (infra/gcp/filestore.py) and the
# advisor's larger size (torchrec_cloud/file_systems.py) read these.
_ZONAL_SIZES = ((1.0, 9.75, 256), (10.0, 100.0, 2560))
FILESTORE_CAPACITY_RANGES: dict[str, tuple[tuple[float, float, int | None], ...]] = {
    "BASIC_HDD": ((1.0, 63.9, None),), "BASIC_SSD": ((2.5, 63.9, None),),
    "ZONAL": _ZONAL_SIZES, "REGIONAL": _ZONAL_SIZES, "HIGH_SCALE_SSD": ((10.0, 100.0, None),)}


def filestore_capacity_fits(tier: str, gib: int) -> bool:
    return any(least * 1024 <= gib <= most * 1024 and (step is None or gib % step == 0)
               for least, most, step in FILESTORE_CAPACITY_RANGES[tier])


def filestore_capacity_at_least(tier: str, gib: float) -> int | None:
    """The smallest size of ``tier`` of at least ``gib`` GiB; None past the tier's largest."""
    for least, most, step in FILESTORE_CAPACITY_RANGES[tier]:
        size = max(gib, least * 1024)
        size = math.ceil(size / step) * step if step else math.ceil(size)
        if size <= most * 1024:
            return int(size)
