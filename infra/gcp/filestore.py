"""Filestore: one NFS share on the cluster's VPC, in the GPU zone, mounted by every pod."""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp

from infra.contract import NfsVolumeSource, SharedFileSystem
from infra.settings.model import Filestore, FilestoreTier

# Filestore serves NFSv3 on every tier. `hard` retries rather than corrupting a checkpoint
# write; Google recommends nconnect (up to 7) only for High Scale SSD.
BASE_MOUNT_OPTIONS = ["nfsvers=3", "hard", "timeo=600", "retrans=3"]
NCONNECT = {FilestoreTier.HIGH_SCALE_SSD: 7}


def mount_options(tier: FilestoreTier) -> list[str]:
    options = list(BASE_MOUNT_OPTIONS)
    if tier in NCONNECT:
        options.append(f"nconnect={NCONNECT[tier]}")
    return options


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
        mount_options=mount_options(fs.tier),
        file_system_id=instance.id,
        ready=instance,
    )
    return instance, shared
