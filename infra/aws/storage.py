"""FSx for Lustre (shared data) and the S3 checkpoint bucket (kept on destroy by default, and
found again by the next `pulumi up` of the same stack)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum

import pulumi
import pulumi_aws as aws

from infra.previous_run import PreviousRun
from infra.settings.model import Checkpoints, FsxDeploymentType, FsxLustre
from infra.store_owner import OWNER_KEY, check_owner, owner_tags, owner_value
from infra.telemetry import TELEMETRY_NONCURRENT_DAYS, telemetry_key_prefix

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


# --- the checkpoint bucket: one name per stack, account and region, found again after destroy --
# S3 bucket names: 3-63 characters, lowercase letters, digits, '-' and '.', starting and ending
# with a letter or digit, globally unique
# (https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html).
BUCKET_NAME_MAX = 63
ADOPTED_OUTPUT = "checkpoint_store_adopted"  # stack output: this run found a bucket it had not made


class BucketMode(str, Enum):
    CREATE = "create"  # no such bucket: the stack creates (and owns) it with its deterministic name
    IMPORT = "import"  # the deterministic bucket exists (kept by a destroy, or this stack's own)
    LEGACY = "legacy"  # made by an earlier version of this program with a random suffix


@dataclass(frozen=True)
class BucketPlan:
    mode: BucketMode
    name: str  # the bucket's name: created with it, or imported by it (the S3 bucket's id)
    adopted: bool = False  # found in S3 and not what the stack's last outputs say it created

    @property
    def import_id(self) -> str | None:
        """The `import` option: every bucket that exists already. Pulumi imports it when it is
        not in this stack's state (after `pulumi destroy`, or a destroy that failed half way)
        and treats it as an ordinary update when it is (an import whose id is the one in state
        is not an import: pulumi/pulumi pkg/resource/deploy/step_generator.go, `isImport`)."""
        return None if self.mode == BucketMode.CREATE else self.name


class BucketCheckError(pulumi.RunError):
    """S3 answered the existence check with something other than "no such bucket"."""


def checkpoint_bucket_name(prefix: str, account_id: str, region: str) -> str:
    """'<prefix>-ckpt-<account>-<region>': the same on every `pulumi up` of a stack, before and
    after `pulumi destroy`, so a kept bucket is found again; the account id keeps the global
    name from colliding with another account's stack of the same name. The prefix is cut
    first when the name would pass 63 characters."""
    tail = f"-ckpt-{account_id}-{region}".lower()
    head = re.sub(r"[^a-z0-9-]+", "-", prefix.lower()).strip("-")
    head = head[:BUCKET_NAME_MAX - len(tail)].rstrip("-")
    return f"{head}{tail}"


def legacy_bucket_prefix(prefix: str) -> str:
    """What the previous program version gave S3 as `bucket_prefix` (S3 added a suffix)."""
    return f"{prefix}-ckpt-"


def bucket_of(uri: str | None) -> str | None:
    """'s3://bucket/prefix' -> 'bucket'."""
    if not uri or not uri.startswith("s3://"):
        return None
    return uri.removeprefix("s3://").split("/", 1)[0] or None


def plan_checkpoint_bucket(name: str, previous: PreviousRun, exists: Callable[[str], bool],
                           legacy: Callable[[], list[str]],
                           owner: Callable[[str], dict[str, str]] = lambda _: {},
                           name_was_cut: bool = False) -> BucketPlan:
    """What this run does with the checkpoint bucket, decided by S3, not by the stack's outputs.

    - A bucket an earlier version of this program made with a random suffix, named by the
      stack's `checkpoint_uri` output, stays that bucket while S3 has it.
    - The deterministic bucket (`name`) is imported when S3 has it, created when S3 answers
      "no such bucket"; any other answer stops the run (`exists` raises BucketCheckError).
    - Neither: one suffixed bucket of this stack's prefix that a destroy of the previous program
      version kept (`legacy()` lists them) is imported; none or several, the deterministic
      bucket is created.
    `adopted`: the bucket exists and the stack's last outputs do not show this stack made it.
    A found bucket tagged for another stack (`owner`: its tags) is refused
    (infra/store_owner.py). When the stack's name prefix was cut (`name_was_cut`), the
    prefix-listed buckets may be another stack's: only those tagged for this one are candidates.
    """
    recorded = bucket_of(previous.text("checkpoint_uri")) if previous.live else None
    made_here = previous.outputs.get(ADOPTED_OUTPUT) not in (True, "true", "True")

    def found(mode: BucketMode, bucket: str) -> BucketPlan:
        return BucketPlan(mode, bucket, adopted=not (recorded == bucket and made_here))

    if recorded is not None and recorded != name and exists(recorded):
        return found(BucketMode.LEGACY, recorded)
    if exists(name):
        check_owner(name, owner(name))
        return found(BucketMode.IMPORT, name)
    candidates = [b for b in legacy() if b != name]
    if name_was_cut and candidates:
        ours = [b for b in candidates if owner(b).get(OWNER_KEY) == owner_value()]
        for other in sorted(set(candidates) - set(ours)):
            pulumi.log.warn(f"bucket {other} starts with this stack's cut name prefix but is not "
                            f"tagged {OWNER_KEY}={owner_value()}: not adopted (docs/checkpoints.md, "
                            "\"Whose store is it\")")
        candidates = ours
    if len(candidates) == 1:
        pulumi.log.info(f"checkpoint bucket {candidates[0]}, kept by a destroy of an earlier "
                        "version of this program, is imported: the job resumes from it")
        return found(BucketMode.LEGACY, candidates[0])
    if candidates:
        pulumi.log.warn(f"several checkpoint buckets of this stack's prefix exist "
                        f"({', '.join(sorted(candidates))}); none is imported, {name} is created. "
                        "Point checkpoints at the right one by hand if the job should resume")
    return BucketPlan(BucketMode.CREATE, name)


# The provider reports a missing bucket as "couldn't find resource" (HeadBucket 404 or
# NoSuchBucket turned into a NotFoundError: terraform-provider-aws internal/service/s3
# bucket.go findBucket, bucket_data_source.go "reading S3 Bucket (%s): %s").
NOT_FOUND_MARKERS = ("couldn't find resource", "NoSuchBucket", "StatusCode: 404")


def bucket_exists(name: str, opts: pulumi.InvokeOptions) -> bool:
    """HeadBucket through the provider's bucket data source: True when the bucket exists,
    False only on S3's "no such bucket". Anything else (403 for another account's bucket of
    that name or a deployer without s3:ListBucket, throttling, no credentials) raises: taken
    for "absent", the run would try to create a bucket it cannot have, or would point the job
    at a new, empty bucket while the kept checkpoints sit in the old one."""
    try:
        aws.s3.get_bucket(bucket=name, opts=opts)
    except Exception as error:  # noqa: BLE001 (the provider reports every answer as an error)
        if any(marker in str(error) for marker in NOT_FOUND_MARKERS):
            return False
        raise BucketCheckError(
            f"could not tell whether the checkpoint bucket {name} exists ({error}). Nothing was "
            "created. The deployer needs s3:ListBucket on it (HeadBucket); a 403 for a bucket "
            "of this name in another account means the name is taken") from error
    return True


def bucket_tags(name: str, opts: pulumi.InvokeOptions) -> dict[str, str]:
    """A bucket's tags, through the Resource Groups Tagging API (tag:GetResources; the bucket
    data source returns no tags). Any failure stops the run: a store whose owner cannot be read
    is not adopted."""
    try:
        found = aws.resourcegroupstaggingapi.get_resources(
            resource_arn_lists=[f"arn:aws:s3:::{name}"], opts=opts)
    except Exception as error:  # noqa: BLE001 (the engine reports invoke errors as text)
        raise BucketCheckError(
            f"could not read the tags of the checkpoint bucket {name} ({error}); they say which "
            "stack owns it. Nothing was created. The deployer needs tag:GetResources") from error
    for mapping in found.resource_tag_mapping_lists or []:
        return dict(mapping.tags or {})
    return {}


def legacy_buckets(prefix: str, region: str, opts: pulumi.InvokeOptions) -> list[str]:
    """Buckets in `region` whose names start with the previous program version's
    `<prefix>-ckpt-` (ListBuckets with Prefix and BucketRegion, s3:ListAllMyBuckets).

    Asked only when the deterministic bucket is absent. A refusal is a warning, not a stop: a
    deployer without s3:ListAllMyBuckets then gets what the previous version did (a new bucket)."""
    try:
        found = aws.s3.get_buckets(prefix=legacy_bucket_prefix(prefix), bucket_region=region,
                                   opts=opts)
    except Exception as error:  # noqa: BLE001 (any provider error: look no further)
        pulumi.log.warn(f"could not list buckets named {legacy_bucket_prefix(prefix)}* ({error}); "
                        "a bucket an earlier version of this program kept is not looked for "
                        "(needs s3:ListAllMyBuckets)")
        return []
    return [b.name for b in found.buckets or []]


def checkpoint_bucket(prefix: str, plan: BucketPlan, checkpoints: Checkpoints, job_name: str,
                      opts: pulumi.ResourceOptions) -> aws.s3.Bucket:
    """Versioned, encrypted, private, owner-enforced; retained on destroy unless asked.

    Encrypted with S3-managed keys (SSE-S3), not the stack's KMS key: a retained bucket must
    stay readable after `pulumi destroy` schedules that key for deletion.

    An existing bucket is imported (`plan.import_id`); Pulumi CLI 3.174 or newer turns an import
    whose declared inputs differ (force_destroy, tags) into import-then-update
    (pulumi/pulumi#19339). Its settings below stay managed either way: each is a PUT of the
    whole configuration, so on an imported bucket they are simply created again.

    A LEGACY bucket keeps the inputs it was created with (bucket_prefix) and ignores changes
    to its name: `bucket` and `bucketPrefix` replace the bucket when they change.
    """
    retain = checkpoints.retain_on_destroy
    legacy = plan.mode == BucketMode.LEGACY
    bucket = aws.s3.Bucket(
        f"{prefix}-checkpoints",
        bucket=None if legacy else plan.name,
        bucket_prefix=legacy_bucket_prefix(prefix) if legacy else None,
        force_destroy=not retain,
        tags={"Name": f"{prefix}-checkpoints", **owner_tags()},
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(
            retain_on_delete=retain, import_=plan.import_id,
            ignore_changes=["bucket", "bucketPrefix"] if legacy else None)),
    )
    child = pulumi.ResourceOptions.merge(
        opts, pulumi.ResourceOptions(parent=bucket, retain_on_delete=retain))
    aws.s3.BucketVersioning(
        f"{prefix}-checkpoints", bucket=bucket.id,
        versioning_configuration=aws.s3.BucketVersioningVersioningConfigurationArgs(
            status="Enabled"),
        opts=child)
    aws.s3.BucketLifecycleConfiguration(
        f"{prefix}-checkpoints", bucket=bucket.id, rules=checkpoint_lifecycle_rules(job_name),
        opts=child)
    aws.s3.BucketServerSideEncryptionConfiguration(
        f"{prefix}-checkpoints", bucket=bucket.id,
        rules=[aws.s3.BucketServerSideEncryptionConfigurationRuleArgs(
            apply_server_side_encryption_by_default=(
                aws.s3.BucketServerSideEncryptionConfigurationRuleApplyServerSideEncryptionByDefaultArgs(
                    sse_algorithm="AES256")))],
        opts=child)
    aws.s3.BucketPublicAccessBlock(
        f"{prefix}-checkpoints", bucket=bucket.id, block_public_acls=True,
        block_public_policy=True, ignore_public_acls=True, restrict_public_buckets=True,
        opts=child)
    aws.s3.BucketOwnershipControls(
        f"{prefix}-checkpoints", bucket=bucket.id,
        rule=aws.s3.BucketOwnershipControlsRuleArgs(object_ownership="BucketOwnerEnforced"),
        opts=child)
    return bucket


NONCURRENT_DAYS = 7  # a pruned or overwritten checkpoint stays recoverable for a week
INCOMPLETE_UPLOAD_DAYS = 1  # parts of a save a preemption cut short


def checkpoint_lifecycle_rules(job_name: str) -> list[aws.s3.BucketLifecycleConfigurationRuleArgs]:
    """Versioning keeps every deleted checkpoint as a noncurrent version, billed until it
    expires; the trainer prunes old checkpoints, so they must expire. A save cut short leaves
    multipart parts that are billed and invisible until aborted
    (https://docs.aws.amazon.com/AmazonS3/latest/userguide/intro-lifecycle-rules.html,
    NoncurrentVersionExpiration and AbortIncompleteMultipartUpload). The telemetry mirror's
    overwritten copies go after a day (infra/telemetry.py): where two rules' expirations
    overlap, S3 honours the shorter
    (https://docs.aws.amazon.com/AmazonS3/latest/userguide/lifecycle-conflicts.html)."""
    return [aws.s3.BucketLifecycleConfigurationRuleArgs(
        id="expire-pruned-checkpoints", status="Enabled",
        filter=aws.s3.BucketLifecycleConfigurationRuleFilterArgs(prefix=""),
        noncurrent_version_expiration=(
            aws.s3.BucketLifecycleConfigurationRuleNoncurrentVersionExpirationArgs(
                noncurrent_days=NONCURRENT_DAYS)),
        abort_incomplete_multipart_upload=(
            aws.s3.BucketLifecycleConfigurationRuleAbortIncompleteMultipartUploadArgs(
                days_after_initiation=INCOMPLETE_UPLOAD_DAYS)),
    ), aws.s3.BucketLifecycleConfigurationRuleArgs(
        id="expire-overwritten-telemetry", status="Enabled",
        filter=aws.s3.BucketLifecycleConfigurationRuleFilterArgs(
            prefix=telemetry_key_prefix(job_name)),
        noncurrent_version_expiration=(
            aws.s3.BucketLifecycleConfigurationRuleNoncurrentVersionExpirationArgs(
                noncurrent_days=TELEMETRY_NONCURRENT_DAYS)),
    )]
