"""FSx for Lustre, the shared data file system: its security groups (Lustre's ports, EFA's
self rules), the file system and its S3 data repository association, and the final backup a
destroy keeps, restored by the next `pulumi up` of the same stack (the checkpoint bucket is
storage.py's, as Azure keeps NetApp in netapp.py and GCP Filestore in filestore.py)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from infra.aws.storage import BucketCheckError
from infra.settings.model.shared_file_system import FsxDeploymentType, FsxLustre
from infra.store_owner import OWNER_KEY, owner_tags, owner_value

LUSTRE_PORTS = ((988, 988), (1018, 1023))  # Lustre: LNet (988) and its 1018-1023 range
FSX_CSI_DRIVER = "fsx.csi.aws.com"
FSX_MOUNT_OPTIONS = ("flock",)  # coherent POSIX locks across nodes (checkpoint writers)
LUSTRE_VERSION = "2.15"


@dataclass(frozen=True)
class SecurityGroups:
    gpu_nodes: aws.ec2.SecurityGroup  # on every GPU node: EFA traffic within the group
    fsx: aws.ec2.SecurityGroup  # on the file system
    # The Lustre rules CreateFileSystem checks ("InvalidNetworkSettings ... port 988"): the
    # file system's group must admit 988 and 1018-1023 from itself. The file system waits for
    # these only, not for the client rules, which need the EKS cluster's security group.
    file_system_rules: list[pulumi.Resource]
    # Every rule: EFA's all-traffic self rules and the Lustre rules to and from the clients.
    # Nodes launch after all of them (a node whose EFA or Lustre rules are missing fails).
    rules: list[pulumi.Resource]


def create_security_groups(prefix: str, vpc_id: pulumi.Input[str],
                           lustre_clients: pulumi.Input[str],
                           opts: pulumi.ResourceOptions) -> SecurityGroups:
    """EFA needs all traffic within its group; Lustre only 988 and 1018-1023, clients <-> FSx.

    `lustre_clients`: the EKS cluster security group. Every node carries it (EKS puts it on
    the system nodes, whose launch template names no group; the GPU launch templates name it
    beside the EFA group), and every node may mount the file system: the training pods on GPU
    nodes, and `dataset.prepare` on a system node with its default `pool: cpu`. The FSx guide
    ("File system access control with Amazon VPC", Lustre rules: inbound 988 and 1018-1023 on
    the file system's group from itself and from the clients' groups, and on the clients' groups
    from the file system's: https://docs.aws.amazon.com/fsx/latest/LustreGuide/limit-access-security-groups.html).
    A rule that admitted the GPU group only left a system node's mount hanging.

    The groups' descriptions stay as they were created: EC2 cannot change a description, so
    a new one would replace the group, and a new FSx group would replace the file system."""
    nodes = aws.ec2.SecurityGroup(f"{prefix}-gpu-nodes", vpc_id=vpc_id,
                                  description="GPU nodes: EFA within the group, Lustre client",
                                  tags={"Name": f"{prefix}-gpu-nodes"}, opts=opts)
    fsx = aws.ec2.SecurityGroup(f"{prefix}-fsx", vpc_id=vpc_id,
                                description="FSx for Lustre: Lustre ports from GPU nodes only",
                                tags={"Name": f"{prefix}-fsx"}, opts=opts)
    rule_opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(parent=nodes))
    efa_rules: list[pulumi.Resource] = [
        aws.vpc.SecurityGroupIngressRule(f"{prefix}-gpu-nodes-efa-in", security_group_id=nodes.id,
                                         ip_protocol="-1", referenced_security_group_id=nodes.id,
                                         description="EFA: all traffic within the group",
                                         opts=rule_opts),
        aws.vpc.SecurityGroupEgressRule(f"{prefix}-gpu-nodes-efa-out", security_group_id=nodes.id,
                                        ip_protocol="-1", referenced_security_group_id=nodes.id,
                                        description="EFA: all traffic within the group",
                                        opts=rule_opts),
    ]
    fsx_opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(parent=fsx))
    file_system_rules: list[pulumi.Resource] = []
    client_rules: list[pulumi.Resource] = []
    for low, high in LUSTRE_PORTS:
        ports = f"{low}" if low == high else f"{low}-{high}"
        # The client rules are not children of the FSx group: they wait for the EKS cluster
        # (its security group), and the file system, which waits for its group, must not.
        for source, group_id, into, rule_parent in (
                ("self", fsx.id, file_system_rules, fsx_opts),
                ("clients", lustre_clients, client_rules, opts)):
            into.append(aws.vpc.SecurityGroupIngressRule(
                f"{prefix}-fsx-lustre-{ports}-from-{source}", security_group_id=fsx.id,
                ip_protocol="tcp", from_port=low, to_port=high,
                referenced_security_group_id=group_id,
                description=f"Lustre {ports} from {source}", opts=rule_parent))
            into.append(aws.vpc.SecurityGroupEgressRule(
                f"{prefix}-fsx-lustre-{ports}-to-{source}", security_group_id=fsx.id,
                ip_protocol="tcp", from_port=low, to_port=high,
                referenced_security_group_id=group_id,
                description=f"Lustre {ports} to {source}", opts=rule_parent))
        # On the cluster security group (EKS lets rules be added to it; its default egress
        # already allows everything out).
        client_rules.append(aws.vpc.SecurityGroupIngressRule(
            f"{prefix}-lustre-clients-{ports}-from-fsx", security_group_id=lustre_clients,
            ip_protocol="tcp", from_port=low, to_port=high, referenced_security_group_id=fsx.id,
            description=f"Lustre {ports} from the file system", opts=opts))
    return SecurityGroups(gpu_nodes=nodes, fsx=fsx, file_system_rules=file_system_rules,
                          rules=[*efa_rules, *file_system_rules, *client_rules])


# The final backup's tags: which stack's checkpoints it holds, so `aws fsx describe-backups`
# finds it for sharedFileSystem.backupId (docs/aws.md, Clean up); the stack that owns it (a cut,
# unhashed prefix of an earlier version may be another stack's: infra/store_owner.py); and the
# backup the file system was itself made from, so the newest of a chain of destroy/up cycles is
# the one no other backup was made from.
FINAL_BACKUP_TAG = "torchrec-cloud/final-backup-of"
RESTORED_FROM_TAG = "torchrec-cloud/restored-from"
# The stack output that carries it from run to run of a live stack.
RESTORED_FROM_OUTPUT = "file_system_restored_from"


def final_backup_tags(prefix: str, restored_from: str | None = None) -> dict[str, str]:
    tags = {FINAL_BACKUP_TAG: prefix, "Name": f"{prefix}-fsx-final", **owner_tags()}
    if restored_from:
        tags[RESTORED_FROM_TAG] = restored_from
    return tags


@dataclass(frozen=True)
class FinalBackup:
    """An FSx backup a destroy kept, with its tags (tag:GetResources answers both)."""

    id: str
    tags: Mapping[str, str]

    @property
    def restored_from(self) -> str | None:
        return self.tags.get(RESTORED_FROM_TAG)


class FinalBackupChoice(pulumi.RunError):
    """Several final backups of this stack's file system: which one to restore is the user's."""


def final_backups(prefixes: list[str], opts: pulumi.InvokeOptions) -> list[FinalBackup]:
    """The FSx backups a destroy kept for this stack (tagged FINAL_BACKUP_TAG with one of its
    prefixes: the current one and the cut, unhashed one earlier versions used), through the
    Resource Groups Tagging API (tag:GetResources): pulumi-aws has no FSx backup lookup. A
    refusal stops the run, as the bucket's does: restoring nothing would start from step 0."""
    try:
        found = aws.resourcegroupstaggingapi.get_resources(
            resource_type_filters=["fsx:backup"],
            tag_filters=[aws.resourcegroupstaggingapi.GetResourcesTagFilterArgs(
                key=FINAL_BACKUP_TAG, values=sorted(set(prefixes)))], opts=opts)
    except Exception as error:  # noqa: BLE001 (the engine reports invoke errors as text)
        raise BucketCheckError(
            f"could not list the file system's final backups ({error}); the checkpoints a destroy "
            "kept may be in one. Nothing was created. The deployer needs tag:GetResources") from error
    return sorted((FinalBackup(m.resource_arn.rsplit("/", 1)[-1], dict(m.tags or {}))
                   for m in found.resource_tag_mapping_lists or []), key=lambda b: b.id)


def _ours(backup: FinalBackup, prefix: str) -> bool:
    """Owned by this stack: tagged so, or, made before the owner tag, under this stack's own
    (hashed) prefix; one under the cut prefix alone may be another stack's whose name starts
    the same (infra/store_owner.py)."""
    owner = backup.tags.get(OWNER_KEY)
    if owner is not None:
        return owner == owner_value()
    return backup.tags.get(FINAL_BACKUP_TAG) == prefix


def backup_to_restore(fs: FsxLustre, live: bool, kept: bool, prefix: str,
                      find: Callable[[], list[FinalBackup]]) -> str | None:
    """The backup the file system starts from: on a live stack, or with checkpoints not kept on
    the file system, sharedFileSystem.backupId as set; after a destroy (no resources), this
    stack's newest final backup: the one no other final backup of this stack was made from.
    Refused, before any resource: several such (which to restore is the user's), and a
    backupId the last destroy has since superseded (restoring it would go back to older
    checkpoints)."""
    if live or not kept:
        return fs.backup_id
    ours = [b for b in find() if _ours(b, prefix)]
    superseded = {b.restored_from for b in ours if b.restored_from}
    if fs.backup_id:
        newer = [b.id for b in ours if b.restored_from == fs.backup_id]
        if newer:
            raise FinalBackupChoice(
                f"sharedFileSystem.backupId {fs.backup_id} is older than {', '.join(newer)}, the "
                "final backup the last destroy kept of the file system made from it: restoring "
                f"{fs.backup_id} would resume from older checkpoints. `pulumi config rm --path "
                "sharedFileSystem.backupId` to restore the newest by itself, or set it to "
                f"{newer[0]}. Nothing was created.")
        return fs.backup_id
    newest = [b.id for b in ours if b.id not in superseded]
    if len(newest) > 1:
        raise FinalBackupChoice(
            f"{len(newest)} final backups hold this stack's checkpoints ({', '.join(newest)}): "
            "choose one with `pulumi config set --path sharedFileSystem.backupId <backup-id>` "
            "(the newest: aws fsx describe-backups --backup-ids " + " ".join(newest) +
            " --query 'sort_by(Backups, &CreationTime)[-1].BackupId'). Nothing was created.")
    if newest:
        pulumi.log.info(f"the file system starts from {newest[0]}, the final backup of this "
                        "stack's last destroy (its checkpoints)")
    return newest[0] if newest else None


def create_lustre(prefix: str, fs: FsxLustre, subnet_id: pulumi.Input[str],
                  groups: SecurityGroups, key_arn: pulumi.Input[str],
                  import_uri: str, opts: pulumi.ResourceOptions, keep_final_backup: bool = False,
                  restore_from: str | None = None,
                  ) -> tuple[aws.fsx.LustreFileSystem, aws.fsx.DataRepositoryAssociation | None]:
    """The file system in the GPU zone; the dataset bucket linked when dataset.importUri is set.

    PERSISTENT_2 links a bucket with a data repository association; SCRATCH_2 and PERSISTENT_1
    only take an import path at creation.

    `keep_final_backup` (checkpoints on this file system and checkpoints.retainOnDestroy):
    deleting the file system takes a final backup, tagged with the stack, which outlives it
    (FSx SkipFinalBackup defaults to true in the provider: without this, `pulumi destroy`
    deleted the checkpoints; https://docs.aws.amazon.com/fsx/latest/APIReference/API_DeleteFileSystemLustreConfiguration.html).
    The setting is applied by `pulumi up` before any destroy reads it. sharedFileSystem.backupId
    creates the file system from such a backup; later changes to it are ignored, as a new
    backup id would replace the file system and its data. SCRATCH_2 takes no backups
    (refused by infra/aws/rules.py fsx_checkpoints_survive_destroy).
    """
    persistent = fs.deployment_type != FsxDeploymentType.SCRATCH_2
    linked_at_creation = bool(import_uri) and fs.deployment_type != FsxDeploymentType.PERSISTENT_2
    lustre = aws.fsx.LustreFileSystem(
        f"{prefix}-fsx",
        deployment_type=fs.deployment_type.value,
        storage_capacity=fs.capacity_gib,
        per_unit_storage_throughput=fs.throughput_per_tib if persistent else None,
        subnet_ids=subnet_id,  # pulumi-aws 7 types this as one subnet id (FSx takes one)
        security_group_ids=[groups.fsx.id],
        # Scratch file systems are encrypted at rest with an AWS key and take no KMS key.
        kms_key_id=key_arn if persistent else None,
        file_system_type_version=LUSTRE_VERSION,
        data_compression_type="LZ4",
        import_path=import_uri if linked_at_creation else None,
        auto_import_policy="NEW_CHANGED_DELETED" if linked_at_creation else None,
        skip_final_backup=not keep_final_backup if persistent else None,
        final_backup_tags=(final_backup_tags(prefix, restore_from or fs.backup_id)
                           if persistent and keep_final_backup else None),
        backup_id=restore_from or fs.backup_id,
        tags={"Name": f"{prefix}-fsx"},
        # CreateFileSystem checks the group's own Lustre rules: create it after them.
        opts=pulumi.ResourceOptions.merge(
            opts, pulumi.ResourceOptions(depends_on=groups.file_system_rules,
                                         ignore_changes=["backupId"])),
    )
    association = None
    if import_uri and fs.deployment_type == FsxDeploymentType.PERSISTENT_2:
        association = aws.fsx.DataRepositoryAssociation(
            f"{prefix}-dataset",
            file_system_id=lustre.id,
            data_repository_path=import_uri,
            file_system_path="/",
            batch_import_meta_data_on_create=True,
            s3=aws.fsx.DataRepositoryAssociationS3Args(
                auto_import_policy=aws.fsx.DataRepositoryAssociationS3AutoImportPolicyArgs(
                    events=["NEW", "CHANGED", "DELETED"])),
            opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(parent=lustre)),
        )
    return lustre, association
