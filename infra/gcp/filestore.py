"""Filestore: one NFS share on the cluster's VPC, in the GPU zone, mounted by every pod."""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp

from infra.catalog.storage import FILESTORE_CAPACITY_RANGES
from infra.contract import NfsVolumeSource, SharedFileSystem
from infra.settings.model.shared_file_system import Filestore, FilestoreTier

# Filestore serves NFSv3 on every tier. `hard` retries rather than corrupting a checkpoint
# write. nconnect: "up to 7 connections for High Scale tier and up to 2 connections for
# Enterprise tier" (https://cloud.google.com/filestore/docs/performance); the Zonal and Regional
# tiers' 10-100 TiB range replaces High Scale SSD and their 1-9.75 TiB range the Enterprise class
# (https://cloud.google.com/filestore/docs/service-tiers), so they take 7 and 2
# (https://cloud.google.com/filestore/docs/testing-performance). Basic tiers: none advised.
BASE_MOUNT_OPTIONS = ["nfsvers=3", "hard", "timeo=600", "retrans=3"]
# Where the Zonal / Regional higher capacity range starts (infra/catalog/storage.py).
HIGH_CAPACITY_GIB = int(FILESTORE_CAPACITY_RANGES["ZONAL"][-1][0] * 1024)
NCONNECT_LOW, NCONNECT_HIGH = 2, 7


def nconnect(tier: FilestoreTier, capacity_gib: int) -> int | None:
    """The TCP connections per client Google advises for this tier and size, or None."""
    if tier == FilestoreTier.HIGH_SCALE_SSD:
        return NCONNECT_HIGH
    if tier in (FilestoreTier.ZONAL, FilestoreTier.REGIONAL):
        return NCONNECT_HIGH if capacity_gib >= HIGH_CAPACITY_GIB else NCONNECT_LOW
    return None


def mount_options(tier: FilestoreTier, capacity_gib: int) -> list[str]:
    connections = nconnect(tier, capacity_gib)
    return BASE_MOUNT_OPTIONS + ([f"nconnect={connections}"] if connections else [])


def filestore_location(fs: Filestore, region: str, zone: str) -> str:
    """REGIONAL instances live in a region; every other tier in one zone (the GPUs')."""
    return region if fs.tier == FilestoreTier.REGIONAL else zone


def create_filestore(prefix: str, fs: Filestore, region: str, zone: str,
                     network: gcp.compute.Network,
                     opts: pulumi.ResourceOptions) -> tuple[gcp.filestore.Instance, SharedFileSystem]:
    """The instance, and the contract's view of it: an NFS export at /<share name>."""
    instance = gcp.filestore.Instance(
        f"{prefix}-filestore",
        location=filestore_location(fs, region, zone),
        tier=fs.tier.value,
        file_shares=gcp.filestore.InstanceFileSharesArgs(
            name=fs.share_name, capacity_gb=fs.capacity_gib),
        networks=[gcp.filestore.InstanceNetworkArgs(
            network=network.name,  # Filestore wants the network's name, not its self link
            modes=["MODE_IPV4"],
            # Filestore peers into the VPC itself: no Service Networking connection needed.
            connect_mode="DIRECT_PEERING",
        )],
        opts=opts,
    )
    shared = SharedFileSystem(
        source=NfsVolumeSource(
            server=instance.networks.apply(lambda nets: nets[0].ip_addresses[0]),
            path=f"/{fs.share_name}",
        ),
        capacity_gib=fs.capacity_gib,
        mount_path=fs.mount_path,
        mount_options=mount_options(fs.tier, fs.capacity_gib),
        file_system_id=instance.id,
        ready=instance,
    )
    return instance, shared
