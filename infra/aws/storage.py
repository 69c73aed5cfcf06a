"""The S3 checkpoint bucket (kept on destroy by default, and found again by the next `pulumi up`
of the same stack). FSx for Lustre is fsx.py's."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

import pulumi
import pulumi_aws as aws

from infra.previous_run import PreviousRun
from infra.settings.model.checkpoints import Checkpoints
from infra.store_owner import OWNER_KEY, check_owner, owner_tags, owner_value
from infra.telemetry import TELEMETRY_NONCURRENT_DAYS, telemetry_key_prefix


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
