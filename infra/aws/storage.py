"""FSx for Lustre (shared data) and the S3 checkpoint bucket (kept on destroy by default, and
found again by the next `pulumi up` of the same stack)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

import pulumi
import pulumi_aws as aws

from infra.previous_run import PreviousRun
from infra.settings.model import Checkpoints, FsxDeploymentType, FsxLustre

LUSTRE_PORTS = ((988, 988), (1018, 1023))  # Lustre: LNet (988) and its 1018-1023 range
FSX_CSI_DRIVER = "fsx.csi.aws.com"
FSX_MOUNT_OPTIONS = ("flock",)  # coherent POSIX locks across nodes (checkpoint writers)
LUSTRE_VERSION = "2.15"


@dataclass(frozen=True)
class SecurityGroups:
    gpu_nodes: aws.ec2.SecurityGroup  # on every GPU node: EFA traffic, Lustre client
    fsx: aws.ec2.SecurityGroup  # on the file system
    # Every rule of both groups. FSx checks its group's Lustre rules inside CreateFileSystem
    # ("InvalidNetworkSettings ... port 988"), and a node's EFA needs the all-traffic self rule:
    # what uses a group waits for all of these, not only for the group's id.
    rules: list[pulumi.Resource]


def create_security_groups(prefix: str, vpc_id: pulumi.Input[str],
                           opts: pulumi.ResourceOptions) -> SecurityGroups:
    """EFA needs all traffic within its group; Lustre only 988 and 1018-1023, nodes <-> FSx."""
    nodes = aws.ec2.SecurityGroup(f"{prefix}-gpu-nodes", vpc_id=vpc_id,
                                  description="GPU nodes: EFA within the group, Lustre client",
                                  tags={"Name": f"{prefix}-gpu-nodes"}, opts=opts)
    fsx = aws.ec2.SecurityGroup(f"{prefix}-fsx", vpc_id=vpc_id,
                                description="FSx for Lustre: Lustre ports from GPU nodes only",
                                tags={"Name": f"{prefix}-fsx"}, opts=opts)
    rule_opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(parent=nodes))
    rules: list[pulumi.Resource] = [
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
    for low, high in LUSTRE_PORTS:
        ports = f"{low}" if low == high else f"{low}-{high}"
        for source, group in (("nodes", nodes), ("self", fsx)):
            rules.append(aws.vpc.SecurityGroupIngressRule(
                f"{prefix}-fsx-lustre-{ports}-from-{source}", security_group_id=fsx.id,
                ip_protocol="tcp", from_port=low, to_port=high,
                referenced_security_group_id=group.id,
                description=f"Lustre {ports} from {source}", opts=fsx_opts))
            rules.append(aws.vpc.SecurityGroupEgressRule(
                f"{prefix}-fsx-lustre-{ports}-to-{source}", security_group_id=fsx.id,
                ip_protocol="tcp", from_port=low, to_port=high,
                referenced_security_group_id=group.id,
                description=f"Lustre {ports} to {source}", opts=fsx_opts))
        rules.append(aws.vpc.SecurityGroupIngressRule(
            f"{prefix}-gpu-nodes-lustre-{ports}-from-fsx", security_group_id=nodes.id,
            ip_protocol="tcp", from_port=low, to_port=high, referenced_security_group_id=fsx.id,
            description=f"Lustre {ports} from the file system", opts=rule_opts))
    return SecurityGroups(gpu_nodes=nodes, fsx=fsx, rules=rules)


def create_lustre(prefix: str, fs: FsxLustre, subnet_id: pulumi.Input[str],
                  groups: SecurityGroups, key_arn: pulumi.Input[str],
                  import_uri: str, opts: pulumi.ResourceOptions
                  ) -> tuple[aws.fsx.LustreFileSystem, aws.fsx.DataRepositoryAssociation | None]:
    """The file system in the GPU zone; the dataset bucket linked when dataset.importUri is set.

    PERSISTENT_2 links a bucket with a data repository association; SCRATCH_2 and PERSISTENT_1
    only take an import path at creation.
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
        tags={"Name": f"{prefix}-fsx"},
        # CreateFileSystem checks the group's Lustre rules: create it after every one of them.
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=groups.rules)),
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
ADOPTED_OUTPUT = "checkpoint_store_adopted"  # stack output: True when the bucket was found kept


class BucketMode(str, Enum):
    CREATE = "create"  # the stack creates (and owns) the bucket with its deterministic name
    ADOPT = "adopt"  # a bucket an earlier `pulumi up` kept on destroy: read, never changed
    LEGACY = "legacy"  # made by an earlier version of this program with a random suffix


@dataclass(frozen=True)
class BucketPlan:
    mode: BucketMode
    name: str  # the bucket's name (for LEGACY, the one the stack's state already holds)


def checkpoint_bucket_name(prefix: str, account_id: str, region: str) -> str:
    """'<prefix>-ckpt-<account>-<region>': the same on every `pulumi up` of a stack, before and
    after `pulumi destroy`, so a kept bucket is found again; the account id keeps the global
    name from colliding with another account's stack of the same name. The prefix is cut
    first when the name would pass 63 characters."""
    tail = f"-ckpt-{account_id}-{region}".lower()
    head = re.sub(r"[^a-z0-9-]+", "-", prefix.lower()).strip("-")
    head = head[:BUCKET_NAME_MAX - len(tail)].rstrip("-")
    return f"{head}{tail}"


def bucket_of(uri: str | None) -> str | None:
    """'s3://bucket/prefix' -> 'bucket'."""
    if not uri or not uri.startswith("s3://"):
        return None
    return uri.removeprefix("s3://").split("/", 1)[0] or None


def plan_checkpoint_bucket(name: str, previous: PreviousRun,
                           exists: Callable[[str], bool]) -> BucketPlan:
    """What this run does with the checkpoint bucket.

    A live stack (earlier outputs) keeps doing what its last run did: an adopted bucket stays
    adopted, a created one stays created, and a bucket an earlier version of this program made
    with a random suffix (its name only in the `checkpoint_uri` output) keeps that name. A
    first run, or the first after `pulumi destroy`, asks S3 whether the bucket of this stack's
    name was kept (`exists`, asked only then) and adopts it, or creates it.
    """
    if previous.live:
        if previous.outputs.get(ADOPTED_OUTPUT) in (True, "true", "True"):
            return BucketPlan(BucketMode.ADOPT, bucket_of(previous.text("checkpoint_uri")) or name)
        recorded = bucket_of(previous.text("checkpoint_uri"))
        if recorded is not None and recorded != name:
            return BucketPlan(BucketMode.LEGACY, recorded)
        return BucketPlan(BucketMode.CREATE, name)
    return BucketPlan(BucketMode.ADOPT if exists(name) else BucketMode.CREATE, name)


def bucket_exists(name: str, opts: pulumi.InvokeOptions) -> bool:
    """HeadBucket through the provider's bucket data source, which fails when S3 has no such
    bucket (or, for another account's bucket of that name, refuses: then this stack cannot
    create it either, and the create reports that)."""
    try:
        aws.s3.get_bucket(bucket=name, opts=opts)
    except Exception:  # noqa: BLE001 (not found: the provider reports it as an error)
        return False
    return True


def checkpoint_bucket(prefix: str, plan: BucketPlan, checkpoints: Checkpoints,
                      opts: pulumi.ResourceOptions) -> aws.s3.Bucket:
    """The bucket the plan names: read as it is (ADOPT), or created with its settings."""
    if plan.mode == BucketMode.ADOPT:
        # Read only: its versioning, encryption, lifecycle and access block were set by the
        # run that created it and were kept with it; this stack neither changes nor deletes it.
        return aws.s3.Bucket.get(f"{prefix}-checkpoints", plan.name, opts=opts)
    return create_checkpoint_bucket(prefix, plan, checkpoints, opts)


def create_checkpoint_bucket(prefix: str, plan: BucketPlan, checkpoints: Checkpoints,
                             opts: pulumi.ResourceOptions) -> aws.s3.Bucket:
    """Versioned, encrypted, private, owner-enforced; retained on destroy unless asked.

    Encrypted with S3-managed keys (SSE-S3), not the stack's KMS key: a retained bucket must
    stay readable after `pulumi destroy` schedules that key for deletion.

    A LEGACY bucket keeps the inputs it was created with (bucket_prefix) and ignores changes
    to its name: `bucket` and `bucketPrefix` replace the bucket when they change.
    """
    retain = checkpoints.retain_on_destroy
    legacy = plan.mode == BucketMode.LEGACY
    bucket = aws.s3.Bucket(
        f"{prefix}-checkpoints",
        bucket=None if legacy else plan.name,
        bucket_prefix=f"{prefix}-ckpt-" if legacy else None,
        force_destroy=not retain,
        tags={"Name": f"{prefix}-checkpoints"},
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(
            retain_on_delete=retain,
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
        f"{prefix}-checkpoints", bucket=bucket.id, rules=checkpoint_lifecycle_rules(), opts=child)
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


def checkpoint_lifecycle_rules() -> list[aws.s3.BucketLifecycleConfigurationRuleArgs]:
    """Versioning keeps every deleted checkpoint as a noncurrent version, billed until it
    expires; the trainer prunes old checkpoints, so they must expire. A save cut short leaves
    multipart parts that are billed and invisible until aborted
    (https://docs.aws.amazon.com/AmazonS3/latest/userguide/intro-lifecycle-rules.html,
    NoncurrentVersionExpiration and AbortIncompleteMultipartUpload)."""
    return [aws.s3.BucketLifecycleConfigurationRuleArgs(
        id="expire-pruned-checkpoints", status="Enabled",
        filter=aws.s3.BucketLifecycleConfigurationRuleFilterArgs(prefix=""),
        noncurrent_version_expiration=(
            aws.s3.BucketLifecycleConfigurationRuleNoncurrentVersionExpirationArgs(
                noncurrent_days=NONCURRENT_DAYS)),
        abort_incomplete_multipart_upload=(
            aws.s3.BucketLifecycleConfigurationRuleAbortIncompleteMultipartUploadArgs(
                days_after_initiation=INCOMPLETE_UPLOAD_DAYS)),
    )]
