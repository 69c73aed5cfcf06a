"""The checkpoint bucket: private, versioned, kept on destroy unless the stack says otherwise."""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp

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


def create_checkpoint_bucket(prefix: str, region: str, checkpoints: Checkpoints,
                             job_account: gcp.serviceaccount.Account,
                             opts: pulumi.ResourceOptions
                             ) -> tuple[gcp.storage.Bucket, gcp.storage.BucketIAMMember]:
    """A regional bucket next to the GPUs, and the grant that gives only the job's account
    object access (the job waits for it: its first checkpoint write needs it)."""
    retain = checkpoints.retain_on_destroy
    bucket = gcp.storage.Bucket(
        f"{prefix}-checkpoints",  # auto-named with a random suffix: bucket names are global
        location=region.upper(),
        uniform_bucket_level_access=True,
        public_access_prevention="enforced",
        versioning=gcp.storage.BucketVersioningArgs(enabled=True),
        lifecycle_rules=[gcp.storage.BucketLifecycleRuleArgs(
            action=gcp.storage.BucketLifecycleRuleActionArgs(type="Delete"),
            condition=gcp.storage.BucketLifecycleRuleConditionArgs(
                days_since_noncurrent_time=NONCURRENT_DAYS, with_state="ARCHIVED"),
        )],
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
    return bucket, grant


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
