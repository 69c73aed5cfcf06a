"""The shared file system's read throughput for the sizing advisor (torchrec_cloud/plan.py):
the stack file's sharedFileSystem block validated by the settings' own model, and the smallest
change of it that reads fast enough to feed the GPUs, with the setting to change named.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Optional

import yaml

ROOT = Path(__file__).resolve().parent.parent
MIB = 1 << 20


@dataclass(frozen=True)
class FileSystem:
    """The shared file system's read and write throughput and how to say it."""

    read_mb_s: float
    write_mb_s: float
    what: str
    change: str = ""  # the setting changed from the stack file, when the advisor changed one


def _stack_file_system(cloud: str) -> Dict[str, Any]:
    data = yaml.safe_load((ROOT / f"Pulumi.{cloud}.yaml").read_text()) or {}
    return dict((data.get("config") or {}).get("torchrec-cloud:sharedFileSystem") or {})


def _validated(cloud: str, raw: Dict[str, Any]) -> Any:
    """The block as the settings' own model reads it, its defaults filled in."""
    from infra.settings.model.shared_file_system import AzureNetAppFiles, Filestore, FsxLustre

    kind = raw.get("kind") or {"aws": "fsx-lustre", "azure": "azure-netapp-files",
                               "gcp": "filestore"}[cloud]
    model = {"fsx-lustre": FsxLustre, "azure-netapp-files": AzureNetAppFiles,
             "filestore": Filestore}[kind]
    return model.model_validate({**raw, "kind": kind})


def file_system(cloud: str, values: Optional[Dict[str, Any]] = None) -> FileSystem:
    """Read and write throughput of a sharedFileSystem block (the stack file's by default),
    validated by the settings' own model: FSx's throughput tier per TiB, NetApp Files' service
    level per TiB of volume, Filestore's read rate per TiB (infra/catalog/storage.py)."""
    from infra.catalog.storage import FILESTORE_READ_MIB_S_PER_TIB
    from infra.preemption import shared_file_system_mb_s
    from infra.settings.model.shared_file_system import Filestore

    fs = _validated(cloud, values if values is not None else _stack_file_system(cloud))
    write, what = shared_file_system_mb_s(fs)
    read = write
    if isinstance(fs, Filestore) and fs.tier.value in FILESTORE_READ_MIB_S_PER_TIB:
        read = FILESTORE_READ_MIB_S_PER_TIB[fs.tier.value] * fs.capacity_gib / 1024 * MIB / 1e6
        what = f"Filestore {fs.tier.value} {fs.capacity_gib} GiB"
    return FileSystem(read, write, what)


def faster_file_system(cloud: str, need_mb_s: float) -> FileSystem:
    """The smallest change of the stack file's file system that reads ``need_mb_s``: FSx's
    throughput tier (then its capacity), NetApp Files' volume (and pool) size at its level,
    Filestore's capacity; the setting to change is named."""
    from infra.settings.model.shared_file_system import AzureNetAppFiles, FsxLustre

    raw = _stack_file_system(cloud)
    given = _validated(cloud, raw)
    if isinstance(given, FsxLustre):
        from infra.catalog.storage import fsx_persistent_2_for

        tier, capacity = fsx_persistent_2_for(need_mb_s, given.capacity_gib)
        fs = file_system(cloud, {**raw, "throughputPerTib": tier, "capacityGib": capacity})
        return FileSystem(fs.read_mb_s, fs.write_mb_s, fs.what,
                          f"sharedFileSystem.throughputPerTib {tier}" + (
                              f" and capacityGib {capacity}" if capacity != given.capacity_gib
                              else ""))
    if isinstance(given, AzureNetAppFiles):  # the cheapest pool of the level given or a faster one
        from infra.catalog.storage import ANF_MIB_S_PER_TIB
        from infra.prices import ANF_GIB_HOUR, per_hour

        levels = list(ANF_MIB_S_PER_TIB)
        options = []
        for level in levels[levels.index(given.service_level.value):]:
            tib = max(math.ceil(need_mb_s / (ANF_MIB_S_PER_TIB[level] * MIB / 1e6)),
                      math.ceil(given.volume_size_gib / 1024))
            options.append((per_hour(ANF_GIB_HOUR[level], tib * 1024), level, tib))
        _, level, tib = min(options)
        fs = file_system(cloud, {**raw, "serviceLevel": level, "volumeSizeGib": tib * 1024,
                                 "poolSizeTib": max(tib, given.pool_size_tib)})
        return FileSystem(fs.read_mb_s, fs.write_mb_s, fs.what,
                          f"sharedFileSystem.serviceLevel {level}, volumeSizeGib {tib * 1024} "
                          f"and poolSizeTib {tib}")
    from infra.catalog.storage import FILESTORE_CAPACITY_RANGES, filestore_capacity_at_least

    fs = file_system(cloud, raw)
    per_gib = fs.read_mb_s / given.capacity_gib
    # A size the tier takes (infra/catalog/storage.py FILESTORE_CAPACITY_RANGES), else its largest.
    capacity = max(given.capacity_gib, filestore_capacity_at_least(given.tier.value, need_mb_s / per_gib)
                   or int(FILESTORE_CAPACITY_RANGES[given.tier.value][-1][1] * 1024))
    fs = file_system(cloud, {**raw, "capacityGib": capacity})
    return FileSystem(fs.read_mb_s, fs.write_mb_s, fs.what,
                      f"sharedFileSystem.capacityGib {capacity}")
