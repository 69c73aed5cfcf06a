"""Names unique per stack, checkpoint stores owned by one stack (issue 33 item 2).

Stack names whose first characters agree (production-a, production-b) were cut to the same
24-character prefix and shared one S3/GCS bucket and Azure `-ckpt-rg`: the second stack's first
`up` imported the first one's store, and its destroy could delete the other's checkpoints.
"""

from __future__ import annotations

import pytest

from infra.aws.storage import checkpoint_bucket_name as s3_name
from infra.azure.storage import checkpoint_group_name
from infra.gcp.storage import checkpoint_bucket_name as gcs_name
from infra.naming import name_prefix, stack_unique_prefix
from infra.store_owner import OWNER_KEY, StoreOwnedElsewhere
from tests.fakes import aws as aws_fake
from tests.fakes import azure as azure_fake
from tests.fakes import gcp as gcp_fake
from tests.harness import PROJECT, USER_GCP_PROJECT, run_stack

ACCOUNT, REGION = "123456789012", "us-east-1"
STACK_NAMES = ("aws", "azure", "gcp", "production-a", "production-b", "gcp-prod-us",
               "gcp-prod-eu", "team-recommendations-nightly-1", "team-recommendations-nightly-2")


def names_of(stack: str) -> dict[str, str]:
    unique = stack_unique_prefix(PROJECT, stack)
    return {"s3": s3_name(unique, ACCOUNT, REGION), "gcs": gcs_name(USER_GCP_PROJECT, unique),
            "azure-group": checkpoint_group_name(unique)}


def test_every_stack_gets_its_own_store_names_even_when_its_name_is_cut() -> None:
    for kind in ("s3", "gcs", "azure-group"):
        names = [names_of(stack)[kind] for stack in STACK_NAMES]
        assert len(set(names)) == len(STACK_NAMES), (kind, names)
    assert names_of("production-a") == names_of("production-a")  # stable on every run


def test_a_stack_whose_name_was_never_cut_keeps_the_store_names_it_has_today() -> None:
    for stack in ("aws", "azure", "gcp"):
        assert stack_unique_prefix(PROJECT, stack) == name_prefix(PROJECT, stack)
        assert names_of(stack)["s3"] == f"torchrec-cloud-{stack}-ckpt-{ACCOUNT}-{REGION}"


def _bucket(run, type_: str):
    (bucket,) = [r for r in run.resources if r.type == type_ and r.name.endswith("-checkpoints")]
    return bucket


def test_production_b_does_not_import_production_as_kept_bucket(monkeypatch) -> None:
    first = names_of("production-a")["s3"]
    monkeypatch.setattr(aws_fake, "EXISTING_BUCKETS", {first})
    monkeypatch.setattr(aws_fake, "BUCKET_TAGS", {first: {OWNER_KEY: f"{PROJECT}/production-a"}})
    run = run_stack("aws", stack_name="production-b")
    bucket = _bucket(run, "aws:s3/bucket:Bucket")
    assert bucket.inputs["bucket"] == names_of("production-b")["s3"] != first
    assert bucket.import_id == "" and run.outputs["checkpoint_store_adopted"] is False
    assert bucket.inputs["tags"][OWNER_KEY] == f"{PROJECT}/production-b"
    # The interruption queue and its rules too: SQS and EventBridge hand an existing queue or
    # rule of the same name back (CreateQueue, PutRule), so production-a's would be shared.
    names = {r.inputs["name"] for r in run.resources
             if r.type in ("aws:sqs/queue:Queue", "aws:cloudwatch/eventRule:EventRule")}
    assert names and all(n.startswith(stack_unique_prefix(PROJECT, "production-b") + "-nth")
                         for n in names), names
    assert not any(n.startswith(stack_unique_prefix(PROJECT, "production-a")) for n in names)


def test_a_kept_s3_bucket_tagged_for_another_stack_is_refused_naming_both(monkeypatch) -> None:
    ours = names_of("production-b")["s3"]
    monkeypatch.setattr(aws_fake, "EXISTING_BUCKETS", {ours})
    monkeypatch.setattr(aws_fake, "BUCKET_TAGS", {ours: {OWNER_KEY: "other-project/production-b"}})
    run = run_stack("aws", stack_name="production-b", expect_error=True)
    message = str(run.error)
    assert "other-project/production-b" in message and f"{PROJECT}/production-b" in message
    assert ours in message and "Nothing was created" in message
    assert not [r.name for r in run.resources if r.custom and not r.type.startswith("pulumi:providers:")]


def test_a_kept_s3_bucket_tagged_for_this_stack_is_adopted(monkeypatch) -> None:
    ours = names_of("production-b")["s3"]
    monkeypatch.setattr(aws_fake, "EXISTING_BUCKETS", {ours})
    monkeypatch.setattr(aws_fake, "BUCKET_TAGS", {ours: {OWNER_KEY: f"{PROJECT}/production-b"}})
    run = run_stack("aws", stack_name="production-b")
    assert _bucket(run, "aws:s3/bucket:Bucket").import_id == ours
    assert run.outputs["checkpoint_store_adopted"] is True


def test_a_cut_name_bucket_of_an_earlier_version_is_adopted_only_when_tagged_for_this_stack(
        monkeypatch) -> None:
    former = s3_name(name_prefix(PROJECT, "production-b"), ACCOUNT, REGION)  # shared by a and b
    monkeypatch.setattr(aws_fake, "EXISTING_BUCKETS", {former})
    monkeypatch.setattr(aws_fake, "BUCKET_TAGS", {former: {"Name": "x"}})
    run = run_stack("aws", stack_name="production-b")
    assert _bucket(run, "aws:s3/bucket:Bucket").import_id == ""  # untagged: may be production-a's
    monkeypatch.setattr(aws_fake, "BUCKET_TAGS", {former: {OWNER_KEY: f"{PROJECT}/production-b"}})
    run = run_stack("aws", stack_name="production-b")
    assert _bucket(run, "aws:s3/bucket:Bucket").import_id == former


def test_a_kept_gcs_bucket_labelled_for_another_stack_is_refused(monkeypatch) -> None:
    ours = names_of("gcp-prod-eu")["gcs"]
    monkeypatch.setattr(gcp_fake, "KEPT_BUCKETS", {ours})
    monkeypatch.setattr(gcp_fake, "KEPT_BUCKET_LABELS", {ours: {OWNER_KEY: "torchrec-cloud_gcp-prod-us"}})
    run = run_stack("gcp", stack_name="gcp-prod-eu", expect_error=True)
    assert isinstance(run.error, StoreOwnedElsewhere) or "torchrec-cloud_gcp-prod-us" in str(run.error)
    assert "torchrec-cloud_gcp-prod-eu" in str(run.error)


def test_gcp_prod_eu_creates_its_own_bucket_beside_gcp_prod_us(monkeypatch) -> None:
    former = gcs_name(USER_GCP_PROJECT, name_prefix(PROJECT, "gcp-prod-eu"))  # shared by us and eu
    monkeypatch.setattr(gcp_fake, "KEPT_BUCKETS", {former})
    monkeypatch.setattr(gcp_fake, "KEPT_BUCKET_LABELS", {former: {OWNER_KEY: "torchrec-cloud_gcp-prod-us"}})
    run = run_stack("gcp", stack_name="gcp-prod-eu")
    bucket = _bucket(run, "gcp:storage/bucket:Bucket")
    assert bucket.inputs["name"] == names_of("gcp-prod-eu")["gcs"] != former
    assert bucket.import_id == "" and bucket.inputs["labels"][OWNER_KEY] == "torchrec-cloud_gcp-prod-eu"


def test_a_kept_azure_group_tagged_for_another_stack_is_refused(monkeypatch) -> None:
    group = names_of("production-b")["azure-group"]
    monkeypatch.setattr(azure_fake, "EXISTING", {azure_fake.group_id(group).lower()})
    monkeypatch.setattr(azure_fake, "GROUP_TAGS", {group: {OWNER_KEY: f"{PROJECT}/production-a"}})
    run = run_stack("azure", stack_name="production-b", expect_error=True)
    assert f"{PROJECT}/production-a" in str(run.error) and group in str(run.error)


def test_production_b_creates_its_own_azure_checkpoint_group(monkeypatch) -> None:
    former = checkpoint_group_name(name_prefix(PROJECT, "production-b"))
    monkeypatch.setattr(azure_fake, "EXISTING", {azure_fake.group_id(former).lower()})
    monkeypatch.setattr(azure_fake, "GROUP_TAGS", {former: {OWNER_KEY: f"{PROJECT}/production-a"}})
    run = run_stack("azure", stack_name="production-b")
    (group,) = [r for r in run.resources if r.type == "azure-native:resources:ResourceGroup"
                and r.name.endswith("-ckpt-rg")]
    assert group.inputs["resourceGroupName"] == names_of("production-b")["azure-group"] != former
    assert group.import_id == "" and group.inputs["tags"][OWNER_KEY] == f"{PROJECT}/production-b"


def test_a_live_azure_stack_keeps_its_checkpoint_group_name() -> None:
    """A stack deployed before names carried the hash keeps its group: a new name would
    replace it (resourceGroupName is create-only)."""
    former = checkpoint_group_name(name_prefix(PROJECT, "production-b"))
    from infra.azure.component import kept_store
    from infra.previous_run import PreviousRun

    previous = PreviousRun({"cloud": "azure", "checkpoint_resource_group": former})
    assert kept_store(name_prefix(PROJECT, "production-b"), previous).group_name == former


def test_stacks_whose_names_are_cut_alike_get_their_own_resource_names() -> None:
    """Not only the store: the EKS cluster, KMS alias, ECR repository, log group, GCP service
    accounts and Azure resource group all start with the run's prefix (security review B1)."""
    from infra.naming import unique_name_prefix

    prefixes = {stack: unique_name_prefix(PROJECT, stack) for stack in STACK_NAMES}
    assert len(set(prefixes.values())) == len(STACK_NAMES), prefixes
    assert all(len(p) <= 24 for p in prefixes.values()), prefixes  # every cloud's limits hold
    assert prefixes["aws"] == name_prefix(PROJECT, "aws")  # uncut names are as they were
    runs = {stack: run_stack("aws", stack_name=stack) for stack in ("production-a", "production-b")}
    clusters = {stack: run.outputs["cluster_name"] for stack, run in runs.items()}
    assert clusters["production-a"] != clusters["production-b"], clusters
    assert runs["production-a"].outputs["name_prefix"] == prefixes["production-a"]


def test_a_live_stack_keeps_the_prefix_it_was_deployed_with() -> None:
    """A new prefix would replace a live stack's cluster: a stack deployed before names carried
    the hash (no name_prefix output) keeps its cut prefix."""
    old = name_prefix(PROJECT, "production-a")
    first = run_stack("aws", stack_name="production-a")
    before = {**first.outputs, "name_prefix": None}
    later = run_stack("aws", stack_name="production-a", previous_outputs=before)
    assert later.outputs["name_prefix"] == old
    again = run_stack("aws", stack_name="production-a", previous_outputs=first.outputs)
    assert again.outputs["name_prefix"] == first.outputs["name_prefix"] != old
