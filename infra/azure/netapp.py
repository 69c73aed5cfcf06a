"""Azure NetApp Files: account, capacity pool and one NFSv4.1 volume in the delegated subnet."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
from pulumi_azure_native import netapp

from infra.contract import NfsVolumeSource, SharedFileSystem
from infra.settings.model import AzureNetAppFiles

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
