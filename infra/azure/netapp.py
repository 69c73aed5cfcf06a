"""Azure NetApp Files: account, capacity pool and one NFSv4.1 volume in the delegated subnet,
pinned to the GPU zones, which are checked first for ANF capacity."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pulumi
from pulumi_azure_native import netapp

from infra.azure import versions
from infra.azure.versions import ARM_ENDPOINT
from infra.contract import NfsVolumeSource, SharedFileSystem
from infra.settings.errors import Problem, SettingsError
from infra.settings.model.shared_file_system import AzureNetAppFiles
from infra.settings.model.stack_file import Settings

# The Microsoft.NetApp API version azure-native 3 creates the account, pool and volume with
# ("Uses Azure REST API version 2024-09-01", pulumi_azure_native/netapp/capacity_pool_volume.py).
API_VERSION = "2024-09-01"

TIB_BYTES = 1024**4
GIB_BYTES = 1024**3
MOUNT_OPTIONS = ("vers=4.1", "rsize=262144", "wsize=262144", "hard", "tcp")
# The volume root's mode. ANF's default is 0770 owned by root, which leaves the uid-1000 trainer
# no way past the mount point (EACCES) even into folders chowned to it. 0755: everyone may
# traverse and read (datasets); only root writes at the top, which the init container does as
# root to create and chown the job's folders (workloads/pod.py). It applies to the mount path
# only, not to files below it
# (https://learn.microsoft.com/azure/azure-netapp-files/configure-unix-permissions-change-ownership-mode).
ROOT_UNIX_PERMISSIONS = "0755"


@dataclass
class NetAppFiles:
    account: netapp.Account
    pool: netapp.CapacityPool
    volume: netapp.CapacityPoolVolume
    creation_token: str


def export_rule(allowed_cidr: str) -> netapp.ExportPolicyRuleArgs:
    """Read-write NFSv4.1 for the node subnet only (pods reach ANF through their node's
    address with overlay networking); root is not squashed so Kubernetes can set ownership."""
    return netapp.ExportPolicyRuleArgs(
        rule_index=1,
        allowed_clients=allowed_cidr,
        nfsv41=True,
        nfsv3=False,
        cifs=False,
        unix_read_write=True,
        unix_read_only=False,
        has_root_access=True,
    )


def create_netapp(prefix: str, fs: AzureNetAppFiles, resource_group_name: pulumi.Input[str],
                  subnet_id: pulumi.Input[str], node_cidr: str, zones: list[str],
                  tags: dict[str, str], opts: pulumi.ResourceOptions) -> NetAppFiles:
    account = netapp.Account(
        f"{prefix}-anf", resource_group_name=resource_group_name, account_name=f"{prefix}-anf",
        tags=tags, opts=opts)
    pool = netapp.CapacityPool(
        f"{prefix}-anf-pool",
        resource_group_name=resource_group_name,
        account_name=account.name,
        pool_name="pool",
        service_level=netapp.ServiceLevel(fs.service_level.value),
        size=float(fs.pool_size_tib * TIB_BYTES),
        tags=tags,
        opts=opts,
    )
    creation_token = f"{prefix}-shared"
    volume = netapp.CapacityPoolVolume(
        f"{prefix}-anf-volume",
        resource_group_name=resource_group_name,
        account_name=account.name,
        pool_name="pool",
        volume_name="shared",
        creation_token=creation_token,
        service_level=netapp.ServiceLevel(fs.service_level.value),
        usage_threshold=float(fs.volume_size_gib * GIB_BYTES),
        subnet_id=subnet_id,
        protocol_types=["NFSv4.1"],
        unix_permissions=ROOT_UNIX_PERMISSIONS,
        network_features=netapp.NetworkFeatures.STANDARD,
        export_policy=netapp.VolumePropertiesExportPolicyArgs(rules=[export_rule(node_cidr)]),
        zones=zones,  # next to the GPU nodes
        tags=tags,
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[pool])),
    )
    return NetAppFiles(account=account, pool=pool, volume=volume, creation_token=creation_token)


def region_info_url(subscription_id: str, location: str) -> str:
    """NetApp Resource - Query Region Info, the call behind `az netappfiles resource
    query-region-info` (https://learn.microsoft.com/rest/api/netapp/net-app-resource/
    query-region-info)."""
    return (f"{ARM_ENDPOINT}/subscriptions/{subscription_id}/providers/Microsoft.NetApp/"
            f"locations/{location}/regionInfo?api-version={API_VERSION}")


def available_zones(region_info: Mapping[str, Any]) -> set[str]:
    """The logical zones where ANF can place a volume for this subscription:
    `availabilityZoneMappings[]` entries with `isAvailable` true (none: a region without
    zones for ANF)."""
    return {str(m.get("availabilityZone")) for m in region_info.get("availabilityZoneMappings")
            or [] if m.get("isAvailable") is True and m.get("availabilityZone") is not None}


def netapp_zone_problems(settings: Settings, region_info: Mapping[str, Any]) -> list[Problem]:
    """The volume is pinned to gpuZones, and a zone ANF cannot place it in fails its creation
    after the cluster and pools exist (https://learn.microsoft.com/azure/azure-netapp-files/
    manage-availability-zone-volume-placement: a VM's zone "doesn't guarantee free Azure
    NetApp Files capacity in that zone. If no sufficient capacity is available, volume
    creation will fail"). A zone ANF lists as available can still run short at creation: that
    is not knowable beforehand."""
    usable = available_zones(region_info)
    missing = [z for z in settings.gpu_zones if z not in usable]
    if not missing:
        return []
    works = ", ".join(sorted(usable)) or "none"
    return [Problem("gpuZones", list(settings.gpu_zones),
                    f"Azure NetApp Files cannot place the shared volume in zone(s) "
                    f"{', '.join(missing)} of {settings.region} for this subscription; it can "
                    f"in: {works} (`az netappfiles resource query-region-info --location "
                    f"{settings.region}`). The volume sits next to the GPU nodes: set gpuZones to "
                    "a zone both the GPU size and ANF can use. Nothing was created")]


def check_netapp_zones(settings: Settings,
                       get: Callable[[str, str], dict[str, Any]] | None = None) -> None:
    """Refuse, before any resource, GPU zones ANF cannot place the volume in: read with the
    ARM token and the retries of the program's other ARM GETs (infra/azure/skus.py)."""
    fetch = get or versions.get_with_retries
    subscription, token = versions.deployer_subscription_and_token()
    problems = netapp_zone_problems(
        settings, fetch(region_info_url(subscription, settings.region), token))
    if problems:
        raise SettingsError(problems)


def shared_file_system(anf: NetAppFiles, fs: AzureNetAppFiles) -> SharedFileSystem:
    """The volume as a static NFS PersistentVolume source."""
    server = anf.volume.mount_targets.apply(lambda targets: targets[0].ip_address)
    return SharedFileSystem(
        source=NfsVolumeSource(server=server, path=f"/{anf.creation_token}"),
        capacity_gib=fs.volume_size_gib,
        mount_path=fs.mount_path,
        mount_options=list(MOUNT_OPTIONS),
        file_system_id=anf.volume.id,
        ready=anf.volume,
    )
