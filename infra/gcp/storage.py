"""The checkpoint bucket: private, versioned, kept on destroy unless the stack says otherwise, and
found again by the next `pulumi up` of the same stack.

A bucket kept on destroy outlives the stack's state, so the next `up` cannot know it from the
state; it finds it by name. The name is fixed per stack and globally unique: the project id
(globally unique itself) and the stack's name prefix, `<project>-<prefix>-ckpt`. A first run (no
earlier outputs: a new stack, or one after `pulumi destroy`) looks that name up; a bucket it
finds is adopted as a read-only reference (never changed, never deleted by this stack) and the
stack exports `checkpoint_store_adopted: true`, so its later runs adopt it again. A live stack
keeps the bucket its last run used, by the name in its `checkpoint_uri`: a stack made before
buckets had fixed names keeps its auto-named (random-suffixed) bucket, with no replacement.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from infra.naming import stable_hash
from infra.previous_run import PreviousRun
from infra.settings.model import Checkpoints, uri_parts

CHECKPOINT_ROLE = "roles/storage.objectUser"  # read, write, list and delete objects; no IAM
# Get and list objects, nothing else (https://cloud.google.com/storage/docs/access-control/
# iam-roles): what gcsfs needs to list and stream the raw day files.
DATASET_ROLE = "roles/storage.objectViewer"
# Versioning keeps a checkpoint the trainer pruned or overwrote as a noncurrent version, which
# is billed like a live one: noncurrent versions are deleted this many days after they stopped
# being current (a week to undo a bad prune), as GCS's lifecycle docs advise for versioned
# buckets (https://cloud.google.com/storage/docs/lifecycle, "daysSinceNoncurrentTime").
# No AbortIncompleteMultipartUpload rule: that action acts on XML API multipart uploads only,
# and the trainer writes through gcsfs's JSON API resumable uploads, whose unfinished sessions
# GCS expires by itself after a week (https://cloud.google.com/storage/docs/resumable-uploads).
NONCURRENT_DAYS = 7
# Soft delete off (0). GCS soft-deletes every deleted or overwritten object for 7 days by
# default, billed as stored, and a policy may only be 0 (off) or 7 to 90 days
# (https://cloud.google.com/storage/docs/soft-delete; pulumi-gcp BucketSoftDeletePolicy:
# "must be in between 604800(7 days) and 7776000(90 days) ... To disable ... set to 0"). Here a
# pruned checkpoint already waits NONCURRENT_DAYS as a noncurrent version, restorable; the
# lifecycle deletion would start another week of soft delete, so every pruned checkpoint was
# billed for two weeks. The page's own advice for buckets of temporary data is to turn it off
# ("Reduce costs for temporary objects"). An organization policy
# (constraints/storage.softDeletePolicySeconds) may forbid 0: then the bucket cannot be created
# and the error names the constraint.
SOFT_DELETE_SECONDS = 0
ADOPTED_OUTPUT = "checkpoint_store_adopted"  # stack output: the bucket is a kept one, adopted
NAME_SUFFIX = "-ckpt"
MAX_NAME = 63  # GCS bucket names: 3-63 characters (https://cloud.google.com/storage/docs/buckets#naming)


def checkpoint_bucket_name(project: str, prefix: str) -> str:
    """`<project>-<prefix>-ckpt`: the same on every run of the stack, and no other stack's (the
    project id is globally unique, the prefix names the stack). GCS's rules: lowercase letters,
    digits and dashes here (a domain-scoped project id, "example.com:proj", has others), at most
    63 characters, no "google" anywhere and no "goog" at the start. A name the rules would change
    is cut and made unique again by a hash of the project and prefix."""
    plain = f"{project}-{prefix}{NAME_SUFFIX}"
    cleaned = re.sub(r"-+", "-", re.sub(r"[^a-z0-9-]", "-", plain.lower().replace("google", "g")))
    cleaned = cleaned.strip("-")
    if cleaned.startswith("goog"):
        cleaned = f"gs-{cleaned}"
    if cleaned == plain and len(cleaned) <= MAX_NAME:
        return cleaned
    unique = f"-{stable_hash(project, prefix)}{NAME_SUFFIX}"
    base = cleaned.removesuffix(NAME_SUFFIX)[: MAX_NAME - len(unique)].rstrip("-")
    return f"{base}{unique}"


@dataclass(frozen=True)
class BucketChoice:
    """Which bucket this run uses and whether the stack manages it or only refers to it."""

    name: str
    adopted: bool  # True: a kept bucket found again; read-only, never changed or deleted here


def choose_bucket(project: str, prefix: str, previous: PreviousRun) -> BucketChoice:
    """A live stack keeps what its last run did (its checkpoint_uri's bucket, adopted or
    managed). A first run adopts the stack's kept bucket when GCS has it (getBucket answers),
    else creates it."""
    name = checkpoint_bucket_name(project, prefix)
    last_uri = previous.text("checkpoint_uri")
    if previous.live and last_uri:
        return BucketChoice(name=uri_parts(last_uri)[0],
                            adopted=previous.outputs.get(ADOPTED_OUTPUT) is True)
    if previous.live:
        return BucketChoice(name=name, adopted=False)
    try:  # getBucket fails when the bucket does not exist (or this caller may not see it)
        gcp.storage.get_bucket(name=name, project=project, opts=pulumi.InvokeOptions())
    except Exception:  # noqa: BLE001 (the provider reports "not found" as an invoke error)
        return BucketChoice(name=name, adopted=False)
    pulumi.log.info(f"checkpoint bucket {name} was kept by an earlier deployment of this stack: "
                    "using it, and its checkpoints, again")
    return BucketChoice(name=name, adopted=True)


def create_checkpoint_bucket(prefix: str, project: str, region: str, checkpoints: Checkpoints,
                             job_account: gcp.serviceaccount.Account, previous: PreviousRun,
                             opts: pulumi.ResourceOptions
                             ) -> tuple[gcp.storage.Bucket, gcp.storage.BucketIAMMember, bool]:
    """The checkpoint bucket (a regional one next to the GPUs, or the stack's kept one), the
    grant that gives only the job's account object access (the job waits for it: its first
    checkpoint write needs it), and whether the bucket was adopted."""
    choice = choose_bucket(project, prefix, previous)
    if choice.adopted:
        # Read-only: destroy leaves it as it is, whatever checkpoints.retainOnDestroy says.
        bucket = gcp.storage.Bucket.get(f"{prefix}-checkpoints", choice.name, opts=opts)
    else:
        retain = checkpoints.retain_on_destroy
        bucket = gcp.storage.Bucket(
            f"{prefix}-checkpoints",
            # Fixed, so a kept bucket is found again (module docstring). A stack made when the
            # bucket was auto-named passes its own name back: `name` replaces the bucket on a
            # change, and it does not change.
            name=choice.name,
            location=region.upper(),
            uniform_bucket_level_access=True,
            public_access_prevention="enforced",
            versioning=gcp.storage.BucketVersioningArgs(enabled=True),
            lifecycle_rules=[gcp.storage.BucketLifecycleRuleArgs(
                action=gcp.storage.BucketLifecycleRuleActionArgs(type="Delete"),
                condition=gcp.storage.BucketLifecycleRuleConditionArgs(
                    days_since_noncurrent_time=NONCURRENT_DAYS, with_state="ARCHIVED"),
            )],
            soft_delete_policy=gcp.storage.BucketSoftDeletePolicyArgs(
                retention_duration_seconds=SOFT_DELETE_SECONDS),
            force_destroy=not retain,  # destroy may empty it only when we do not keep it
            opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(retain_on_delete=retain)),
        )
    grant = gcp.storage.BucketIAMMember(
        f"{prefix}-checkpoints-job",
        bucket=bucket.name,
        role=CHECKPOINT_ROLE,
        member=job_account.member,
        opts=opts,
    )
    return bucket, grant, choice.adopted


def grant_dataset_reads(prefix: str, uris: list[str], job_account: gcp.serviceaccount.Account,
                        opts: pulumi.ResourceOptions) -> list[gcp.storage.BucketIAMMember]:
    """Read access for the job on each dataset bucket (the preparation's gs:// source). Whole
    buckets: GCS grants per bucket (a prefix would need IAM Conditions); the binding reads and
    writes the bucket's policy, so the deployer needs `storage.buckets.get`, `getIamPolicy` and
    `setIamPolicy` there ("Set and manage IAM policies on buckets",
    https://cloud.google.com/storage/docs/access-control/using-iam-permissions), which a bucket
    in another project may not give."""
    buckets = list(dict.fromkeys(uri_parts(uri)[0] for uri in uris))
    return [gcp.storage.BucketIAMMember(
        f"{prefix}-dataset-read-{n}", bucket=bucket, role=DATASET_ROLE,
        member=job_account.member, opts=opts) for n, bucket in enumerate(buckets)]
