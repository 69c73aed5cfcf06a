"""The checkpoint bucket: private, versioned, kept on destroy unless the stack says otherwise, and
found again by the next `pulumi up` of the same stack.

A bucket kept on destroy outlives the stack's state, so the next `up` cannot know it from the
state; it finds it by name. The name is fixed per stack and globally unique: the project id
(globally unique itself) and the stack's name prefix, `<project>-<prefix>-ckpt`. Every run asks
GCS whether the bucket exists; one it has is imported (Pulumi's `import` option) into the
stack's normally managed bucket, with the same settings and retainOnDestroy as one created here,
and a run with no earlier outputs (a new stack, or one after `pulumi destroy`) that finds it
exports `checkpoint_store_adopted: true`. A live stack keeps the bucket its last run used, by
the name in its `checkpoint_uri`: a stack made before buckets had fixed names keeps its
auto-named (random-suffixed) bucket, with no replacement.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from infra.naming import name_prefix, stable_hash
from infra.store_owner import OWNER_KEY, check_owner, owner_tags, owner_value
from infra.previous_run import PreviousRun
from infra.settings.model.checkpoints import Checkpoints
from infra.settings.model.dataset import uri_parts
from infra.telemetry import TELEMETRY_NONCURRENT_DAYS, telemetry_key_prefix

# Objects only: create, get, list, update, delete, restore (and multipart uploads, folders);
# no storage.buckets.update, so the job cannot shorten or turn off the soft delete below
# (https://cloud.google.com/storage/docs/access-control/iam-roles). The job needs delete: it
# prunes old checkpoints, and overwriting an object needs storage.objects.delete too.
CHECKPOINT_ROLE = "roles/storage.objectUser"
# Get and list objects, nothing else (https://cloud.google.com/storage/docs/access-control/
# iam-roles): what gcsfs needs to list and stream the raw day files.
DATASET_ROLE = "roles/storage.objectViewer"
# Why soft delete is on (issue 33): storage.objects.delete also deletes a noncurrent generation
# (an object name plus `generation`), and no IAM role or condition tells the two apart, so a
# job that may prune checkpoints could also purge every earlier version. Soft delete keeps
# whatever is deleted, a noncurrent generation included, for its retention, and only a change
# of the bucket's policy (storage.buckets.update, never the job's) ends it early
# (https://cloud.google.com/storage/docs/soft-delete: a soft-deleted object "cannot be
# permanently deleted" during the retention; restore with `gcloud storage restore`). A policy
# is 0 (off) or 7 to 90 days (pulumi-gcp BucketSoftDeletePolicy): 7, a week as on AWS.
SOFT_DELETE_SECONDS = 7 * 24 * 3600
# Versioning keeps a checkpoint the trainer pruned or overwrote as a noncurrent version, which
# is billed like a live one and is the quick way back (list the versions, copy one): kept a
# day, then deleted by the lifecycle rule, which starts its week of soft delete, so a pruned
# checkpoint is billed about 8 days (https://cloud.google.com/storage/docs/lifecycle,
# "daysSinceNoncurrentTime"). No AbortIncompleteMultipartUpload rule: that action acts on XML
# API multipart uploads only, and the trainer writes through gcsfs's JSON API resumable
# uploads, whose unfinished sessions GCS expires by itself after a week
# (https://cloud.google.com/storage/docs/resumable-uploads).
NONCURRENT_DAYS = 1
ADOPTED_OUTPUT = "checkpoint_store_adopted"  # stack output: a kept bucket found and imported
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


# What the provider reports when GCS answers 404 for the bucket: getBucket returns the Storage
# API's error as is (terraform-provider-google data_source_google_storage_bucket.go:
# `Buckets.Get(bucket).Do()`; googleapi formats it "googleapi: Error 404: The specified bucket
# does not exist., notFound"). A 403 ("... does not have storage.buckets.get access ... (or it
# may not exist)., forbidden") is not an answer: the name may belong to a bucket someone else
# made, and creating it would fail anyway.
NOT_FOUND = re.compile(r"\bError 404\b|\bnotFound\b")


@dataclass(frozen=True)
class BucketChoice:
    """Which bucket this run declares, and whether it exists in GCS before this run."""

    name: str
    exists: bool  # True: declared with `import_` (adopted, or in state already: an update)
    adopted: bool  # True: a kept bucket this stack's outputs do not record as its own


def bucket_exists(name: str, project: str) -> bool:
    """Whether GCS has the bucket (bucket_labels)."""
    return bucket_labels(name, project) is not None


def bucket_labels(name: str, project: str) -> dict[str, str] | None:
    """The bucket's labels (whose store it is), None when GCS has no such bucket (getBucket,
    the deployer's credentials, before any resource is registered). Only a 404 means it does not; any other failure stops the run: taken for
    "absent", the run would try to create a bucket that exists, or adopt nothing and lose the
    checkpoints' location."""
    try:
        found = gcp.storage.get_bucket(name=name, project=project, opts=pulumi.InvokeOptions())
    except Exception as error:  # noqa: BLE001 (the engine reports invoke errors as text)
        if NOT_FOUND.search(str(error)):
            return None
        raise pulumi.RunError(
            f"could not tell whether the checkpoint bucket gs://{name} exists ({error}). The "
            "deployer needs storage.buckets.get on it (roles/storage.admin in the project "
            "does); a 403 can also mean another project owns a bucket of that name. Nothing "
            "was created") from error
    return dict(found.labels or {})


def choose_bucket(project: str, prefix: str, previous: PreviousRun) -> BucketChoice:
    """The bucket's name, and whether GCS has it now: asked of GCS on every run, never inferred
    from the stack's outputs, which a failed first `up` (bucket made, no outputs) or a failed
    destroy (outputs kept, bucket gone from the state) leave out of step with the state.

    The name: a live stack's own bucket (its checkpoint_uri's: a stack made before fixed names
    keeps its auto-named one), else the fixed per-stack name. Adopted: found while the stack's
    outputs do not record it as the stack's own (no outputs: a first run, or one after
    destroy), or recorded as adopted by the last run (sticky, as on Azure)."""
    last_uri = previous.text("checkpoint_uri")
    name = (uri_parts(last_uri)[0] if previous.live and last_uri
            else checkpoint_bucket_name(project, prefix))
    labels = bucket_labels(name, project)
    if labels is not None:
        check_owner(name, labels, label=True)  # tagged for another stack: refused
    elif not previous.live and prefix != name_prefix():
        # The name carries the stack's hash because its prefix was cut; before, it did not, and
        # a destroy may have kept the bucket under that name: adopted when labelled for us.
        old = checkpoint_bucket_name(project, name_prefix())
        old_labels = bucket_labels(old, project)
        if old_labels is not None and old_labels.get(OWNER_KEY) == owner_value(label=True):
            name, labels = old, old_labels
        elif old_labels is not None:
            pulumi.log.warn(f"bucket gs://{old} has this stack's former name but is not labelled "
                            f"{OWNER_KEY}={owner_value(label=True)}: not adopted; gs://{name} is "
                            "created (docs/checkpoints.md, \"Whose store is it\")")
    exists = labels is not None
    adopted = exists and (not previous.live or previous.outputs.get(ADOPTED_OUTPUT) is True)
    if adopted and not previous.live:
        pulumi.log.info(f"checkpoint bucket {name} was kept by an earlier deployment of this "
                        "stack: importing it, and using its checkpoints again")
    return BucketChoice(name=name, exists=exists, adopted=adopted)


def create_checkpoint_bucket(prefix: str, region: str, checkpoints: Checkpoints,
                             job_account: gcp.serviceaccount.Account, choice: BucketChoice,
                             job_name: str, opts: pulumi.ResourceOptions
                             ) -> tuple[gcp.storage.Bucket, gcp.storage.BucketIAMMember]:
    """The checkpoint bucket, a regional one next to the GPUs, and the grant that gives only the
    job's account object access (the job waits for it: its first checkpoint write needs it).

    One managed resource whether this run creates the bucket or finds it (`choose_bucket`): a
    bucket GCS has is declared with Pulumi's `import` option, never read-only (`Bucket.get`),
    so an adopted bucket gets the same versioning, noncurrent rule, soft delete, grant and
    retainOnDestroy as one made here. An import of a bucket already in this stack's state is an
    ordinary update (pulumi/pulumi pkg/resource/deploy/step_generator.go: an import happens
    only with no old resource or a different id); one whose inputs differ from what GCS has is
    imported and then updated to them (Pulumi CLI 3.174 or newer, pulumi/pulumi#19339)."""
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
        lifecycle_rules=lifecycle_rules(job_name),
        soft_delete_policy=gcp.storage.BucketSoftDeletePolicyArgs(
            retention_duration_seconds=SOFT_DELETE_SECONDS),
        force_destroy=not retain,  # destroy may empty it only when we do not keep it
        labels=owner_tags(label=True),  # whose store it is (infra/store_owner.py)
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(
            retain_on_delete=retain,
            # The import id of a bucket is its name (pulumi-gcp storage.Bucket, "Import").
            import_=choice.name if choice.exists else None)),
    )
    grant = gcp.storage.BucketIAMMember(
        f"{prefix}-checkpoints-job",
        bucket=bucket.name,
        role=CHECKPOINT_ROLE,
        member=job_account.member,
        opts=opts,
    )
    return bucket, grant


def lifecycle_rules(job_name: str) -> list[gcp.storage.BucketLifecycleRuleArgs]:
    """Noncurrent versions deleted NONCURRENT_DAYS after they stopped being current; those of
    the telemetry mirror, which overwrites its copies every minute or so (infra/telemetry.py),
    after TELEMETRY_NONCURRENT_DAYS. A rule acts when all its conditions hold, so the second
    rule's `matchesPrefix` limits it to the mirror's folder, and an object that either rule
    matches is deleted (https://cloud.google.com/storage/docs/lifecycle, "Lifecycle
    configurations" and "Conditions": matchesPrefix, daysSinceNoncurrentTime)."""
    return [gcp.storage.BucketLifecycleRuleArgs(
        action=gcp.storage.BucketLifecycleRuleActionArgs(type="Delete"),
        condition=gcp.storage.BucketLifecycleRuleConditionArgs(
            days_since_noncurrent_time=days, with_state="ARCHIVED",
            matches_prefixes=prefixes),
    ) for days, prefixes in ((NONCURRENT_DAYS, None),
                             (TELEMETRY_NONCURRENT_DAYS, [telemetry_key_prefix(job_name)]))]


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
