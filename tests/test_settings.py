"""The stack files are valid, and every rule a cloud API would enforce is refused up front.

Each bad value goes through the real program (`__main__.py` under mocks, as `pulumi up` runs
it): the run must fail with one error naming the setting's path, its value and what is allowed,
and must not have registered a single resource.
"""

from __future__ import annotations

from datetime import date
from typing import Any

import pytest

from infra.catalog.cloud import Cloud
from infra.catalog.machines import find_machine
from infra.settings import cost_rules, rules
from infra.settings.errors import SettingsError
from infra.settings.loader import settings_from_mapping
from infra.settings.model.stack_file import Settings
from tests.harness import (
    PROJECT,
    STACKS,
    USER_API_CIDRS,
    run_stack,
    shipped_stack_config,
    stack_config,
)


def stack_values(stack: str) -> dict[str, Any]:
    prefix = f"{PROJECT}:"
    return {k.removeprefix(prefix): v for k, v in stack_config(stack).items() if k.startswith(prefix)}


@pytest.mark.parametrize("stack", STACKS)
def test_each_stack_file_is_valid_and_names_its_cloud(stack: str) -> None:
    settings = settings_from_mapping(stack_values(stack))
    assert settings.cloud.value == stack


@pytest.mark.parametrize("stack", STACKS)
def test_each_stack_file_serves_the_reference_setup(stack: str) -> None:
    """2 nodes of 8 x A100 40 GB, batch 2048 per rank: what the seed guides run."""
    settings = settings_from_mapping(stack_values(stack))
    gpu = find_machine(settings.cloud, settings.job_pool.machine_type)
    assert gpu is not None and (gpu.gpu_model, gpu.gpu_count, gpu.gpu_memory_gib) == ("A100", 8, 40)
    assert settings.job.nodes == 2 and settings.job.processes_per_node == 8
    assert settings.job.trainer_args["batch_size"] == 2048


@pytest.mark.parametrize("stack", STACKS)
def test_defaults_alone_make_a_valid_stack(stack: str) -> None:
    """A stack file with only the cloud, the API CIDRs (and GCP project) is complete."""
    minimal: dict[str, Any] = {"cloud": stack, "kubernetes": {"apiAccessCidrs": USER_API_CIDRS}}
    if stack == "gcp":
        minimal["gcp"] = {"project": "my-project"}
    settings = settings_from_mapping(minimal)
    assert settings.gpu_pools.spot.enabled and settings.checkpoints.retain_on_destroy


def test_a_spot_shortage_is_waited_out_without_a_bound_unless_one_is_set() -> None:
    """Kueue counts PodsReady timeouts over a job's whole life: a default bound would hold a
    long spot run after enough reclaims, so none is set unless asked, and one that fits the
    machine's node join is accepted."""
    base: dict[str, Any] = {"cloud": "aws", "kubernetes": {"apiAccessCidrs": USER_API_CIDRS},
                            "job": {"pool": "spot"}}
    assert settings_from_mapping(base).job.spot_shortage.max_wait_minutes is None
    base["job"]["spotShortage"] = {"maxWaitMinutes": 30}  # one p4d join (infra/catalog/node_times.py)
    assert settings_from_mapping(base).job.spot_shortage.max_wait_minutes == 30


def test_checkpoints_are_retained_on_destroy_by_default() -> None:
    assert Settings.model_fields["checkpoints"].default_factory().retain_on_destroy is True


BAD: list[tuple[str, str, dict[str, Any], str, str]] = [
    # (test id, stack, overrides, path named in the error, fragment of what is allowed)
    ("spot-shortage-policy", "aws", {"job": {"pool": "spot", "spotShortage": {"policy": "later"}}},
     "job.spotShortage.policy", "'wait' or 'onDemand'"),
    ("spot-shortage-fallback-without-provisioning-request", "azure",
     {"job": {"pool": "spot", "spotShortage": {"policy": "onDemand"}}},
     "job.spotShortage.policy", "wait on azure"),
    ("spot-shortage-wait-too-short", "gcp", {"job": {"spotShortage": {"maxWaitMinutes": 5}}},
     "job.spotShortage.maxWaitMinutes", "greater than or equal to 15"),
    # Shorter than one ND node's join (its OFED and GPU drivers built on the node): Kueue's
    # PodsReady timeout there is 45 minutes, so 30 would not wait for one cold start.
    ("spot-shortage-wait-shorter-than-a-node-join", "azure",
     {"job": {"pool": "spot", "spotShortage": {"maxWaitMinutes": 30}}},
     "job.spotShortage.maxWaitMinutes", "unset (wait without end), or at least 45"),
    ("fsx-capacity", "aws", {"sharedFileSystem": {"capacityGib": 3600}},
     "sharedFileSystem.capacityGib", "multiple of 2400"),
    ("fsx-p2-throughput", "aws", {"sharedFileSystem": {"throughputPerTib": 200}},
     "sharedFileSystem.throughputPerTib", "[125, 250, 500, 1000]"),
    ("fsx-p1-throughput", "aws",
     {"sharedFileSystem": {"deploymentType": "PERSISTENT_1", "throughputPerTib": 250}},
     "sharedFileSystem.throughputPerTib", "[50, 100, 200]"),
    ("fsx-scratch-throughput", "aws",
     {"sharedFileSystem": {"deploymentType": "SCRATCH_2", "throughputPerTib": 125}},
     "sharedFileSystem.throughputPerTib", "SCRATCH_2"),
    ("fsx-deployment-type", "aws", {"sharedFileSystem": {"deploymentType": "PERSISTENT_3"}},
     "sharedFileSystem.deploymentType", "PERSISTENT_2"),
    ("anf-pool-size", "azure", {"sharedFileSystem": {"poolSizeTib": 0}},
     "sharedFileSystem.poolSizeTib", "at least 1 TiB"),
    ("anf-pool-whole-tib", "azure", {"sharedFileSystem": {"poolSizeTib": 1.5}},
     "sharedFileSystem.poolSizeTib", "integer"),
    ("anf-volume-small", "azure", {"sharedFileSystem": {"volumeSizeGib": 49}},
     "sharedFileSystem.volumeSizeGib", "50 GiB to 100 TiB"),
    ("anf-volume-large", "azure",
     {"sharedFileSystem": {"poolSizeTib": 200, "volumeSizeGib": 102401}},
     "sharedFileSystem.volumeSizeGib", "50 GiB to 100 TiB"),
    ("anf-volume-over-pool", "azure", {"sharedFileSystem": {"poolSizeTib": 1, "volumeSizeGib": 2048}},
     "sharedFileSystem.volumeSizeGib", "capacity pool"),
    ("anf-service-level", "azure", {"sharedFileSystem": {"serviceLevel": "Gold"}},
     "sharedFileSystem.serviceLevel", "'Standard', 'Premium' or 'Ultra'"),
    ("filestore-basic-hdd", "gcp", {"sharedFileSystem": {"tier": "BASIC_HDD", "capacityGib": 512}},
     "sharedFileSystem.capacityGib", "BASIC_HDD: 1.0-63.9 TiB"),
    ("filestore-basic-ssd", "gcp", {"sharedFileSystem": {"tier": "BASIC_SSD", "capacityGib": 2048}},
     "sharedFileSystem.capacityGib", "BASIC_SSD: 2.5-63.9 TiB"),
    ("filestore-zonal-step", "gcp", {"sharedFileSystem": {"capacityGib": 1100}},
     "sharedFileSystem.capacityGib", "256 GiB steps"),
    ("filestore-zonal-large-step", "gcp", {"sharedFileSystem": {"capacityGib": 11264}},
     "sharedFileSystem.capacityGib", "2560 GiB steps"),
    ("filestore-regional-gap", "gcp", {"sharedFileSystem": {"tier": "REGIONAL", "capacityGib": 10000}},
     "sharedFileSystem.capacityGib", "REGIONAL"),
    ("filestore-high-scale", "gcp",
     {"sharedFileSystem": {"tier": "HIGH_SCALE_SSD", "capacityGib": 9216}},
     "sharedFileSystem.capacityGib", "HIGH_SCALE_SSD: 10.0-100.0 TiB"),
    ("pool-order", "aws", {"gpuPools": {"onDemand": {"minNodes": 3, "desiredNodes": 2}}},
     "gpuPools.onDemand.desiredNodes", "minNodes <= desiredNodes <= maxNodes"),
    ("pool-negative", "gcp", {"gpuPools": {"spot": {"minNodes": -1}}},
     "gpuPools.spot.minNodes", "greater than or equal to 0"),
    ("aks-pool-name", "azure", {"gpuPools": {"spot": {"name": "gpu-spot"}}},
     "gpuPools.spot.name", "^[a-z][a-z0-9]{0,11}$"),
    ("aks-pool-name-length", "azure", {"gpuPools": {"onDemand": {"name": "gpupoolnumber1"}}},
     "gpuPools.onDemand.name", "1-12 lowercase"),
    ("duplicate-pool-name", "gcp", {"gpuPools": {"spot": {"name": "gpu"}}},
     "gpuPools.spot.name", "already used by gpuPools.onDemand"),
    ("job-name-rfc1123", "aws", {"job": {"name": "DLRM_run"}},
     "job.name", "RFC 1123"),
    ("job-name-length", "aws", {"job": {"name": "d" * 64}}, "job.name", "at most 63"),
    ("namespace-rfc1123", "gcp", {"job": {"namespace": "-train"}}, "job.namespace", "RFC 1123"),
    ("unknown-machine", "aws", {"gpuPools": {"onDemand": {"machineType": "p9.96xlarge"}}},
     "gpuPools.onDemand.machineType", "p4d.24xlarge"),
    ("machine-of-another-cloud", "gcp", {"gpuPools": {"spot": {"machineType": "p4d.24xlarge"}}},
     "gpuPools.spot.machineType", "a2-highgpu-8g"),
    ("gpu-pool-without-gpus", "azure", {"gpuPools": {"onDemand": {"machineType": "Standard_D4s_v5"}}},
     "gpuPools.onDemand.machineType", "has no GPUs"),
    ("processes-over-gpus", "azure", {"job": {"processesPerNode": 16}},
     "job.processesPerNode", "at most the 8 GPUs"),
    ("placement-two-zones", "aws", {"gpuZones": ["us-east-1a", "us-east-1b"]},
     "gpuZones", "exactly one GPU zone"),
    ("compact-placement-two-zones", "gcp",
     {"zones": ["us-central1-a", "us-central1-b"], "gpuZones": ["us-central1-a", "us-central1-b"]},
     "gpuZones", "exactly one GPU zone"),
    ("efa-on-machine-without", "aws",
     {"interconnect": {"fabric": True}, "gpuPools": {"spot": {"machineType": "m6i.2xlarge"}}},
     "gpuPools.spot.machineType", "has no GPUs"),
    ("ib-on-machine-without", "azure",
     {"gpuPools": {"onDemand": {"machineType": "Standard_NC24ads_A100_v4"}},
      "job": {"processesPerNode": 1}},
     "interconnect.fabric", "gpuPools.onDemand.machineType Standard_NC24ads_A100_v4 has no InfiniBand"),
    ("gpudirect-on-a2", "gcp", {"interconnect": {"fabric": True}},
     "interconnect.fabric", "pulumi config set --stack gcp --path interconnect.fabric false`, or choose a "
     "machine with it (a3-highgpu-8g, a3-megagpu-8g)"),
    # "yes" is true to pydantic: the message says what was read
    ("gpudirect-yes-on-a2", "gcp", {"interconnect": {"fabric": "yes"}},
     "interconnect.fabric", "read as true"),
    ("spot-without-checkpoints", "aws", {"checkpoints": {"enabled": False}},
     "checkpoints.enabled", "keep checkpoints on"),
    ("spot-price-outside-azure", "aws", {"gpuPools": {"spot": {"maxPrice": 10}}},
     "gpuPools.spot.maxPrice", "only Azure"),
    ("azure-spot-price", "azure", {"gpuPools": {"spot": {"maxPrice": 0}}},
     "gpuPools.spot.maxPrice", "-1 (up to on-demand) or a price > 0"),
    ("job-over-pool", "aws", {"job": {"nodes": 3}}, "job.nodes", "gpuPools.onDemand.maxNodes (2)"),
    ("job-on-disabled-spot", "gcp", {"job": {"pool": "spot"}, "gpuPools": {"spot": {"enabled": False}}},
     "job.pool", "spot pool is disabled"),
    ("kubernetes-version", "aws", {"kubernetes": {"version": "1.22"}},
     "kubernetes.version", "a minor EKS in us-east-1 creates today: 1.34, 1.35"),
    ("kubernetes-version-shape", "azure", {"kubernetes": {"version": "latest"}},
     "kubernetes.version", "minor version like '1.33'"),
    ("api-open-to-world", "gcp", {"kubernetes": {"apiAccessCidrs": ["0.0.0.0/0"]}},
     "kubernetes.apiAccessCidrs", "whole internet"),
    ("api-cidr-shape", "aws", {"kubernetes": {"apiAccessCidrs": ["81.2.69.300/32"]}},
     "kubernetes.apiAccessCidrs", "not a CIDR"),
    # Host bits are refused, not cleared: /24 around an address may mean the address alone.
    ("api-cidr-host-bits", "aws", {"kubernetes": {"apiAccessCidrs": ["81.2.69.142/24"]}},
     "kubernetes.apiAccessCidrs",
     "has host bits set: write 81.2.69.142/32 for that address alone or 81.2.69.0/24"),
    # What `hostname -I` prints behind NAT: the API server never sees it.
    ("api-cidr-private", "azure", {"kubernetes": {"apiAccessCidrs": ["192.168.1.10/32"]}},
     "kubernetes.apiAccessCidrs", "is in a private network (RFC 1918)"),
    ("api-cidr-cgnat", "gcp", {"kubernetes": {"apiAccessCidrs": ["100.64.3.7"]}},
     "kubernetes.apiAccessCidrs", "carrier-grade NAT space (RFC 6598)"),
    ("api-cidr-loopback", "aws", {"kubernetes": {"apiAccessCidrs": ["127.0.0.1/32"]}},
     "kubernetes.apiAccessCidrs", "curl -s https://checkip.amazonaws.com"),
    ("api-cidr-link-local", "aws", {"kubernetes": {"apiAccessCidrs": ["169.254.10.1/32"]}},
     "kubernetes.apiAccessCidrs", "the link-local range"),
    # README step 2 with no gcloud project set: "$(gcloud config get-value project)" is empty.
    ("gcp-project-empty", "gcp", {"gcp": {"project": ""}}, "gcp.project",
     "empty (`gcloud config get-value project` prints nothing"),
    ("gcp-project-display-name", "gcp", {"gcp": {"project": "Acme Train"}}, "gcp.project",
     "looks like a display name, not the project's id: a GCP project id is 6 to 30"),
    ("gcp-project-number", "gcp", {"gcp": {"project": "123456789012"}}, "gcp.project",
     "a project number; the project's id is its PROJECT_ID column"),
    ("zone-of-other-region", "aws", {"zones": ["us-east-1a", "us-west-2b"]},
     "zones", "must be a zone of region 'us-east-1'"),
    ("eks-needs-two-zones", "aws", {"zones": ["us-east-1a"]}, "zones", "at least two zones"),
    ("azure-zone", "azure", {"zones": ["eastus-1"], "gpuZones": ["eastus-1"]},
     "zones", "are 1, 2 or 3; set it with `pulumi config set --stack azure --path 'zones[0]' 1`"),
    # `pulumi config set --path 'zones[0]' true` stores a boolean: the fix keeps it text
    ("text-given-a-boolean", "aws", {"region": True}, "region",
     "text allowed, true/false given; set it with `pulumi config set --stack aws --type string --path "
     "region true`"),
    ("gpu-zone-outside-cluster", "gcp", {"gpuZones": ["us-central1-c"]},
     "gpuZones", "one of zones"),
    ("fs-kind-of-other-cloud", "gcp", {"sharedFileSystem": {"kind": "fsx-lustre"}},
     "sharedFileSystem.kind", "filestore on gcp"),
    ("trainer-flag-owned-by-stack", "aws", {"job": {"trainerArgs": {"checkpoint_dir": "/tmp"}}},
     "job.trainerArgs.checkpoint_dir", "checkpoints.location"),
    ("trainer-flag-shape", "aws", {"job": {"trainerArgs": {"--batch-size": 1}}},
     "job.trainerArgs.--batch-size", "did you mean 'batch_size'? remove it with `pulumi config "
     "rm --stack aws --path job.trainerArgs.--batch-size` and set it with `pulumi config set "
     "--stack aws --path job.trainerArgs.batch_size 1`; flag names as the trainer's options "
     "without their dashes"),
    # MLPerf's recipe fixes the global batch (65536) and splits it over the ranks.
    ("mlperf-recipe-with-a-batch-size", "aws",
     {"job": {"trainerArgs": {"recipe": "mlperf", "batch_size": 2048}}},
     "job.trainerArgs.batch_size", "not with recipe mlperf, whose global batch is 65536"),
    ("mlperf-recipe-on-3-ranks-a-node", "aws",
     {"job": {"processesPerNode": 3, "trainerArgs": {"recipe": "mlperf"}}},
     "job.nodes", "a number of ranks that divides 65536"),
    ("dataset-import-outside-aws", "azure", {"dataset": {"importUri": "s3://bucket/criteo"}},
     "dataset.importUri", "only FSx for Lustre"),
    ("dataset-import-uri", "aws", {"dataset": {"importUri": "gs://bucket/criteo"}},
     "dataset.importUri", "s3://bucket/prefix"),
    ("dataset-path-escapes", "gcp", {"dataset": {"path": "../etc"}}, "dataset.path", "without '..'"),
    ("mount-path", "azure", {"sharedFileSystem": {"mountPath": "shared"}},
     "sharedFileSystem.mountPath", "absolute path"),
    ("vpc-cidr", "aws", {"aws": {"vpcCidr": "8.8.0.0/16"}}, "aws.vpcCidr", "private IPv4 range"),
    ("gcp-subnet-cidr", "gcp", {"gcp": {"networkCidr": "10.2.0.0/33"}}, "gcp.networkCidr",
     "not a CIDR"),
    ("options-of-other-cloud", "azure", {"aws": {"vpcCidr": "10.0.0.0/16"}}, "aws",
     "but this stack's cloud is azure"),
    ("misspelt-key", "aws", {"gpuPools": {"onDemand": {"maxNode": 4}}},
     "gpuPools.onDemand.maxNode", "did you mean 'maxNodes'?"),
    ("misspelt-top-level-key", "azure", {"gpuPool": {}}, "gpuPool", "did you mean 'gpuPools'?"),
    ("misspelt-file-system-key", "aws", {"sharedFileSystem": {"capacityGB": 2400}},
     "sharedFileSystem.capacityGB", "did you mean 'capacityGib'?"),
    ("unknown-key-without-a-near-one", "gcp", {"job": {"gpus": 8}}, "job.gpus",
     "the settings here: name, namespace"),
    # job.trainerArgs as the trainer's own parser and TrainConfig judge them (trainer/config.py).
    ("trainer-flag-misspelt", "aws", {"job": {"trainerArgs": {"batchsize": 4}}},
     "job.trainerArgs.batchsize", "not a trainer flag; did you mean 'batch_size'?"),
    ("trainer-flag-type", "gcp", {"job": {"trainerArgs": {"batch_size": "lots"}}},
     "job.trainerArgs.batch_size", "an integer: the trainer reads --batch_size=lots"),
    ("trainer-flag-choice", "azure", {"job": {"trainerArgs": {"interaction": "cross"}}},
     "job.trainerArgs.interaction", "one of 'dot', 'dcn'"),
    ("trainer-flag-range", "aws", {"job": {"trainerArgs": {"learning_rate": 0}}},
     "job.trainerArgs.learning_rate", "must be > 0"),
    ("trainer-flags-combination", "gcp",
     {"job": {"trainerArgs": {"eval_every": 100, "evals_per_epoch": 20}}},
     "job.trainerArgs.evals_per_epoch", "set either it or --eval_every"),
    # The dense MLP's last size (the stack file's 128) must follow a changed embedding_dim.
    ("trainer-flags-disagree", "aws", {"job": {"trainerArgs": {"embedding_dim": 64}}},
     "job.trainerArgs.dense_arch_layer_sizes", "the last size must equal --embedding_dim (64)"),
    ("trainer-global-batch-over-ranks", "azure",
     {"job": {"trainerArgs": {"global_batch_size": 1000}}},
     "job.trainerArgs.global_batch_size", "multiple of the world size (16 ranks)"),
    ("region-of-no-cloud", "aws", {"region": "us-east-9"}, "region",
     "did you mean 'us-east-1'? one of the AWS regions"),
    ("azure-region-of-no-cloud", "azure", {"region": "mars-central"}, "region",
     "one of the Azure regions, closest first:"),
    ("region-of-another-cloud", "gcp", {"region": "eastus"}, "region",
     "'eastus' is a region of Azure"),
    ("gcp-placeholder-project", "gcp", {"gcp": {"project": "my-gcp-project"}}, "gcp.project",
     "placeholder, not a real value; set your GCP project id (`gcloud config get-value project`"),
    ("placeholder-in-any-text", "aws", {"job": {"image": "<your-registry>/trainer:1"}},
     "job.image", "pulumi config set --stack aws --path job.image <value>"),
    ("job-kind", "gcp", {"job": {"kind": "MPIJob"}}, "job.kind", "'JobSet' or 'PyTorchJob'"),
    ("grace-period", "aws", {"job": {"terminationGraceSeconds": 5}},
     "job.terminationGraceSeconds", "greater than or equal to 30"),
    # MLPerf-size tables (~530 GB with dim 128) cannot be saved in a GCP spot node's 30 s.
    ("spot-save-exceeds-the-notice", "gcp",
     {"job": {"pool": "spot", "trainerArgs": {"num_embeddings_per_feature": [40_000_000] * 26,
                                              "embedding_dim": 128}}},
     "job.trainerArgs", "spot node's 30 s notice leaves the trainer 10 s"),
    # The recipe's tables with EXACT_ADAGRAD (one accumulator per weight): the estimate sees them.
    ("mlperf-recipe-spot-save-exceeds-the-notice", "gcp",
     {"job": {"pool": "spot", "trainerArgs": {"recipe": "mlperf"}}},
     "job.trainerArgs", "spot node's 30 s notice leaves the trainer 10 s"),
    ("documentation-cidr", "gcp", {"kubernetes": {"apiAccessCidrs": ["203.0.113.0/24"]}},
     "kubernetes.apiAccessCidrs", "curl -s https://checkip.amazonaws.com"),
    ("documentation-cidr-ipv6", "aws", {"kubernetes": {"apiAccessCidrs": ["2001:db8:1::/48"]}},
     "kubernetes.apiAccessCidrs", "documentation range"),
    # IPv4 written as IPv6 is judged as that IPv4 range, as the breadth rule judges it.
    ("ipv4-mapped-private-cidr", "aws", {"kubernetes": {"apiAccessCidrs": ["::ffff:10.1.2.3/128"]}},
     "kubernetes.apiAccessCidrs", "(IPv4 10.1.2.3/32)' is in a private network (RFC 1918)"),
    ("ipv4-mapped-documentation-cidr", "gcp",
     {"kubernetes": {"apiAccessCidrs": ["::ffff:203.0.113.0/120"]}},
     "kubernetes.apiAccessCidrs", "(IPv4 203.0.113.0/24)' is a documentation range"),
    ("nat64-loopback-cidr", "azure", {"kubernetes": {"apiAccessCidrs": ["64:ff9b::7f00:1/128"]}},
     "kubernetes.apiAccessCidrs", "(IPv4 127.0.0.1/32)' is in the loopback range"),
    ("extended-support-off-eks", "azure", {"kubernetes": {"extendedSupport": True}},
     "kubernetes.extendedSupport", "only EKS has extended support"),
    ("aws-gpu-zones-without-placement", "aws",
     {"interconnect": {"placement": False}, "gpuZones": ["us-east-1a", "us-east-1b"]},
     "gpuZones", "FSx for Lustre (single-AZ)"),
    ("capacity-reservation-id", "aws",
     {"aws": {"capacityReservation": {"id": "reservation-1"}}},
     "aws.capacityReservation.id", "cr-0123456789abcdef0"),
    ("jobset-name-too-long", "aws", {"job": {"name": "d" * 50}}, "job.name",
     "at most 48 characters with 2 nodes"),
    ("flex-start-outside-gcp", "aws", {"gpuPools": {"onDemand": {"flexStart": True}}},
     "gpuPools.onDemand.flexStart", "GCP only"),
    ("reservation-outside-gcp", "azure",
     {"gpuPools": {"onDemand": {"reservation": {"name": "r1"}}}},
     "gpuPools.onDemand.reservation", "GCP only"),
    ("enum-misspelt", "aws", {"job": {"pool": "spto"}}, "job.pool",
     "did you mean 'spot'? Input should be 'onDemand' or 'spot'; set it with "
     "`pulumi config set --stack aws --path job.pool spot`"),
    # us-west-1 offers each account two of a, b, c: no letter is suggested, the list is named
    ("region-misspelt-moves-its-zones", "aws", {"region": "us-west-9"}, "region",
     "`pulumi config set --stack aws region us-west-1` and move its zones to zones of us-west-1 "
     "(`aws ec2 describe-availability-zones --region us-west-1` lists them)"),
    ("azure-region-display-name", "azure", {"region": "West Europe"}, "region",
     "did you mean 'westeurope'?"),
    ("trainer-range-beside-a-refused-choice", "aws",
     {"job": {"trainerArgs": {"max_steps": -5, "interaction": "dcnv2"}}},
     "job.trainerArgs.max_steps", "must be a positive integer"),
    ("trainer-choice-beside-a-bad-range", "aws",
     {"job": {"trainerArgs": {"max_steps": -5, "interaction": "dcnv2"}}},
     "job.trainerArgs.interaction", "did you mean 'dcn'? one of 'dot', 'dcn'"),
    ("flat-key-without-path", "gcp", {"kubernetes.apiAccessCidrs[0]": "81.2.69.142/32"},
     "kubernetes.apiAccessCidrs[0]", "without `--path`"),
    # GKE's REGULAR channel (the fakes' getServerConfig) no longer offers 1.33.
    ("gke-version-left-the-channel", "gcp", {"kubernetes": {"version": "1.33"}},
     "kubernetes.version", "REGULAR channel in us-central1 creates today: 1.34, 1.35"),
]


@pytest.mark.parametrize(("stack", "overrides", "path", "allowed"),
                         [case[1:] for case in BAD], ids=[case[0] for case in BAD])
def test_bad_setting_is_refused_before_any_resource_exists(
    stack: str, overrides: dict[str, Any], path: str, allowed: str
) -> None:
    run = run_stack(stack, overrides=overrides, expect_error=True)
    assert isinstance(run.error, SettingsError), run.error
    problem_paths = [p.path for p in run.error.problems]
    assert path in problem_paths, f"{path} not named in:\n{run.error}"
    message = str(run.error)
    line = next(line for line in message.splitlines() if f"{PROJECT}:{path} =" in line)
    assert allowed in line, line
    # A provider creates nothing in the cloud (AWS's version lookups need one in the region).
    cloud = [r for r in run.resources if not r.type.startswith("pulumi:providers:")]
    assert cloud == [], f"registered before the error: {[r.name for r in cloud]}"


def with_overrides(stack: str, overrides: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The stack file's values with some sections' keys replaced."""
    values = stack_values(stack)
    for section, changes in overrides.items():
        values[section] = {**values.get(section, {}), **changes}
    return values


def test_one_error_lists_every_bad_setting() -> None:
    values = with_overrides("aws", {
        "sharedFileSystem": {"capacityGib": 1000, "throughputPerTib": 7},
        "job": {"name": "Bad_Name", "processesPerNode": 9},
    })
    with pytest.raises(SettingsError) as caught:
        settings_from_mapping(values)
    paths = [p.path for p in caught.value.problems]
    assert sorted(paths) == sorted(["sharedFileSystem.capacityGib",
                                    "sharedFileSystem.throughputPerTib",
                                    "job.name", "job.processesPerNode"])
    assert str(caught.value).startswith("4 bad settings in the stack file (nothing was created)")


def test_a_type_error_does_not_hide_the_other_rules() -> None:
    values = stack_values("azure")
    values["gpuPools"] = {**values["gpuPools"], "spot": {**values["gpuPools"]["spot"], "maxNodes": "two"}}
    values["sharedFileSystem"] = {**values["sharedFileSystem"], "volumeSizeGib": 10}
    with pytest.raises(SettingsError) as caught:
        settings_from_mapping(values)
    paths = {p.path for p in caught.value.problems}
    assert {"gpuPools.spot.maxNodes", "sharedFileSystem.volumeSizeGib"} <= paths


def test_missing_cloud_is_named_alone() -> None:
    with pytest.raises(SettingsError) as caught:
        settings_from_mapping({"region": "us-east-1"})
    assert [p.path for p in caught.value.problems] == ["cloud"]
    assert "aws, azure, gcp" in str(caught.value)


def test_missing_api_cidrs_say_what_to_set() -> None:
    with pytest.raises(SettingsError) as caught:
        settings_from_mapping({"cloud": "azure"})
    assert "kubernetes.apiAccessCidrs" in str(caught.value)
    assert "curl -s https://checkip.amazonaws.com" in str(caught.value)


@pytest.mark.parametrize("stack", STACKS)
def test_the_shipped_stack_files_carry_no_api_cidr_so_the_user_sets_their_own(stack: str) -> None:
    """A placeholder range would pass until every Helm step timed out; a missing one is named."""
    shipped = shipped_stack_config(stack)
    assert "apiAccessCidrs" not in shipped.get(f"{PROJECT}:kubernetes", {})
    values = {k.removeprefix(f"{PROJECT}:"): v for k, v in shipped.items()}
    with pytest.raises(SettingsError) as caught:
        settings_from_mapping(values)
    assert "torchrec-cloud:kubernetes.apiAccessCidrs" in str(caught.value)
    assert "checkip.amazonaws.com" in str(caught.value)


GOOD_EDGES: list[tuple[str, dict[str, Any]]] = [
    ("aws", {"capacityGib": 1200}),
    ("aws", {"capacityGib": 4800}),
    ("aws", {"capacityGib": 24000, "throughputPerTib": 1000}),
    ("aws", {"deploymentType": "SCRATCH_2", "capacityGib": 1200, "throughputPerTib": None}),
    ("aws", {"deploymentType": "PERSISTENT_1", "throughputPerTib": 50}),
    ("gcp", {"tier": "ZONAL", "capacityGib": 1024}),
    ("gcp", {"tier": "ZONAL", "capacityGib": 9984}),
    ("gcp", {"tier": "ZONAL", "capacityGib": 10240}),
    ("gcp", {"tier": "REGIONAL", "capacityGib": 102400}),
    ("gcp", {"tier": "BASIC_HDD", "capacityGib": 1024}),
    ("gcp", {"tier": "BASIC_SSD", "capacityGib": 2560}),
    ("gcp", {"tier": "HIGH_SCALE_SSD", "capacityGib": 10240}),
    ("azure", {"poolSizeTib": 1, "volumeSizeGib": 50}),
    ("azure", {"poolSizeTib": 1, "volumeSizeGib": 1024}),
    ("azure", {"poolSizeTib": 100, "volumeSizeGib": 102400, "serviceLevel": "Ultra"}),
]


@pytest.mark.parametrize(("stack", "file_system"), GOOD_EDGES)
def test_file_system_sizes_at_the_edges_are_accepted(stack: str, file_system: dict[str, Any]) -> None:
    """The boundaries of each rule are allowed, not just refused around."""
    settings = settings_from_mapping(with_overrides(stack, {"sharedFileSystem": file_system}))
    dumped = settings.shared_file_system.model_dump(by_alias=True, mode="json")
    assert {key: dumped[key] for key in file_system} == file_system


@pytest.mark.parametrize("stack", ["aws", "azure", "gcp"])
def test_default_tables_fit_every_cloud_s_spot_notice(stack: str) -> None:
    """The shipped stack files on the spot pool: one save of the default tables (to the bucket
    and to the shared file system) fits the trainer's deadline inside the cloud's notice."""
    from infra.preemption import estimated_save, stop_budget

    for location in ("objectStore", "sharedFileSystem"):
        values = stack_values(stack)
        values["job"] = {**values.get("job", {}), "pool": "spot"}
        values["gpuPools"]["spot"]["desiredNodes"] = values["job"].get("nodes", 2)
        # Kept on destroy only in the bucket (Azure and GCP refuse retainOnDestroy on the file
        # system, where destroy deletes them).
        values["checkpoints"] = {**values.get("checkpoints", {}), "location": location,
                                 "retainOnDestroy": location == "objectStore"}
        settings = settings_from_mapping(values)
        budget = stop_budget(settings.cloud, True, settings.job.termination_grace_seconds)
        assert estimated_save(settings).seconds < budget.save_deadline_seconds, location


# EKS support: asked of EKS at run time (infra/aws/versions.py), tested in tests/test_aws.py.


def test_tables_the_gpus_cannot_hold_are_refused_naming_the_nodes_that_fit() -> None:
    """Planning fails in the pod, after the nodes are paid for, when the fullest rank's tables
    and optimizer state exceed a GPU's memory less the planner's reservation: refused first."""
    huge = {"num_embeddings_per_feature": [40_000_000] * 26, "embedding_dim": 256,
            "optimizer": "exact_adagrad"}
    values = with_overrides("aws", {"job": {"trainerArgs": huge, "nodes": 2}})
    with pytest.raises(SettingsError) as caught:
        settings_from_mapping(values)
    (problem,) = [p for p in caught.value.problems if p.path == "job.nodes"]
    assert problem.value == 2 and "fullest rank would hold about" in problem.allowed
    assert "job.nodes: 12 fits" in problem.allowed
    assert "tables of job.trainerArgs.num_embeddings_per_feature" in problem.allowed
    # The MLPerf recipe on the shipped stack's machine and node count fits.
    values = with_overrides("aws", {"job": {"trainerArgs": {"recipe": "mlperf"}}})
    values.pop("dataset", None)
    assert not list(cost_rules.tables_fit_the_gpus(settings_from_mapping(values)))


def test_tables_no_node_count_can_hold_are_blamed_on_the_table_flag() -> None:
    """100 billion rows is the mistake, not 2 nodes: with no node count that fits, the line
    names the table flag and its value, in GB a reader takes in (thousands separated)."""
    values = with_overrides("aws", {"job": {"trainerArgs": {"num_embeddings": 100_000_000_000}}})
    with pytest.raises(SettingsError) as caught:
        settings_from_mapping(values)
    (problem,) = caught.value.problems
    assert (problem.path, problem.value) == ("job.trainerArgs.num_embeddings", 100_000_000_000)
    assert "with job.nodes = 2, the fullest rank would hold about 68,250 GB" in problem.allowed
    assert "no job.nodes up to 64 fits; use smaller tables" in problem.allowed
    assert ".0 GB" not in problem.allowed and "34.4 GB usable" in problem.allowed


def test_gigabytes_are_shown_with_separators_and_no_trailing_zero() -> None:
    assert [cost_rules.gb(b) for b in (135_450e9, 4.25e9, 34.4e9, 2e9)] == [
        "135,450 GB", "4.2 GB", "34.4 GB", "2 GB"]


def test_table_rules_read_trainer_args_as_the_trainer_parses_them() -> None:
    """`pulumi config set --path job.trainerArgs.num_embeddings_per_feature 40000000,...` is
    stored as text; the pod's parser reads a list, so the table rules must see the same."""
    huge = {"num_embeddings_per_feature": ",".join(["40000000"] * 26), "embedding_dim": "256",
            "dense_arch_layer_sizes": "512,256",
            "optimizer": "exact_adagrad"}
    with pytest.raises(SettingsError) as caught:
        settings_from_mapping(with_overrides("aws", {"job": {"trainerArgs": huge}}))
    assert [p.path for p in caught.value.problems] == ["job.nodes"]
    assert "fullest rank would hold about" in caught.value.problems[0].allowed


@pytest.mark.parametrize("flag", ["embedding_dim", "num_embeddings", "data_parallel_max_mb",
                                  "num_embeddings_per_feature", "optimizer", "recipe"])
def test_a_refused_table_flag_is_named_alone_not_computed_with(flag: str) -> None:
    args = {"batch_size": 2048, flag: "12B"}
    values = with_overrides("aws", {"job": {"trainerArgs": args, "pool": "spot"}})
    values["gpuPools"]["spot"]["desiredNodes"] = 2
    with pytest.raises(SettingsError) as caught:
        settings_from_mapping(values)
    assert [p.path for p in caught.value.problems] == [f"job.trainerArgs.{flag}"]


def test_a_region_of_no_cloud_is_blamed_alone_not_its_zones() -> None:
    """us-east-9 once drew a zones error suggesting us-east-9a, a zone that does not exist."""
    values = stack_values("aws")
    values["region"] = "us-east-9"
    with pytest.raises(SettingsError) as caught:
        settings_from_mapping(values)
    assert [p.path for p in caught.value.problems] == ["region"]
    assert "us-east-9a" not in str(caught.value)


def test_every_region_the_defaults_and_stack_files_name_is_in_the_region_lists() -> None:
    from infra.regions import REGIONS
    from infra.settings.defaults import CLOUD_DEFAULTS

    for cloud, defaults in CLOUD_DEFAULTS.items():
        assert defaults["region"] in REGIONS[cloud]
        assert stack_values(cloud.value)["region"] in REGIONS[cloud]
    names = [name for regions in REGIONS.values() for name in regions]
    assert len(names) == len(set(names)), "a region name in two clouds' lists"


@pytest.mark.parametrize("stack", STACKS)
def test_default_trainer_args_pass_the_trainer_s_own_checks(stack: str) -> None:
    """The default and shipped trainerArgs once set embedding_dim 128 under the trainer's
    default dense MLP ending at 64: every pod would have exited at its first line."""
    from trainer.config import parse_config
    from workloads.flags import user_flags

    settings = settings_from_mapping(stack_values(stack))
    assert parse_config(user_flags(settings.job.trainer_args)).embedding_dim == 128


def test_values_are_shown_as_the_stack_file_spells_them() -> None:
    from infra.settings.errors import Problem

    def line(value: Any) -> str:
        return str(Problem("x", value, "allowed")).strip()

    assert line(None) == f"{PROJECT}:x = (not set): allowed"
    assert line(["81.2.69.142/32"]) == f"{PROJECT}:x = ['81.2.69.142/32']: allowed"
    assert line({"spot": {"maxNodes": 4, "enabled": False}}) == \
        f"{PROJECT}:x = {{spot: {{maxNodes: 4, enabled: false}}}}: allowed"
    assert line("us-east-1a ") == f"{PROJECT}:x = 'us-east-1a ': allowed"  # the space shows


def test_two_zones_outside_the_region_are_two_problems() -> None:
    values = {"cloud": "aws", "region": "us-west-2", "zones": ["us-east-1a", "us-east-1b"],
              "gpuZones": ["us-east-1b"], "kubernetes": {"apiAccessCidrs": USER_API_CIDRS}}
    with pytest.raises(SettingsError) as caught:
        settings_from_mapping(values)
    named = [(p.path, p.value) for p in caught.value.problems]
    assert named == [("zones", "us-east-1a"), ("zones", "us-east-1b"), ("gpuZones", "us-east-1b")]
    # which letters us-west-2 has is the account's to say: no zone is made up, the list is named
    for problem in caught.value.problems:
        assert "`aws ec2 describe-availability-zones --region us-west-2`" in problem.allowed
        assert "us-west-2b" not in problem.allowed and "us-west-2a" not in problem.allowed


def test_a_zone_is_suggested_only_where_it_is_certain_to_exist() -> None:
    """A zone carried over by its letter may not exist (GCP us-east1 has b, c, d; AWS gives
    accounts different letters): only the cloud's default zones of its default region, or a
    zone the stack already names in the region, are suggested."""
    back_home = {"cloud": "aws", "region": "us-east-1", "zones": ["us-west-2a", "us-west-2c"],
                 "gpuZones": ["us-west-2c"], "kubernetes": {"apiAccessCidrs": USER_API_CIDRS}}
    with pytest.raises(SettingsError) as caught:
        settings_from_mapping(back_home)
    fixes = [p.allowed.split("set it with ")[1] for p in caught.value.problems]
    # the defaults, us-east-1a and us-east-1b; the GPU zone follows the zone it was
    assert fixes == ["`pulumi config set --path 'zones[0]' us-east-1a`",
                     "`pulumi config set --path 'zones[1]' us-east-1b`",
                     "`pulumi config set --path 'gpuZones[0]' us-east-1b`"]
    stray_gpu_zone = {"cloud": "gcp", "region": "us-east1", "zones": ["us-east1-b", "us-east1-c"],
                      "gpuZones": ["us-central1-a"], "gcp": {"project": "my-project"},
                      "interconnect": {"placement": False},
                      "kubernetes": {"apiAccessCidrs": USER_API_CIDRS}}
    with pytest.raises(SettingsError) as caught:
        settings_from_mapping(stray_gpu_zone)
    # moved only: not blamed again for being outside the zones (that line once offered to add
    # us-central1-a to the zones, the zone this one has the user replace)
    (moved,) = caught.value.problems
    assert moved.allowed.endswith("set it with `pulumi config set --path 'gpuZones[0]' us-east1-b`")
    stray_gpu_zone["zones"] = ["us-central1-a"]
    with pytest.raises(SettingsError) as caught:
        settings_from_mapping(stray_gpu_zone)
    assert "us-east1-a" not in str(caught.value)  # GCP's us-east1 has no zone a
    assert "`gcloud compute zones list --filter=region:us-east1`" in str(caught.value)


def test_a_region_lists_its_five_closest_names_only() -> None:
    settings = settings_from_mapping({"cloud": "gcp", "gcp": {"project": "my-project"},
                                      "kubernetes": {"apiAccessCidrs": USER_API_CIDRS}})
    bad = settings.model_copy(update={"region": "europe-west99"})
    (problem,) = rules.region_is_one_of_the_cloud_s(bad)
    listed = problem.allowed.split("closest first: ")[1].split(" (and ")[0].split(", ")
    assert len(listed) == 5 and listed[0].startswith("europe-west")
    assert "(and 38 more in infra/regions.py" in problem.allowed


def test_every_flag_the_stack_passes_is_refused_in_trainer_args_naming_what_decides_it() -> None:
    """The stack's value comes last on the trainer's command line and wins, so a user's value
    would pass the check and then vanish: each is refused with the setting to change instead,
    or, where the catalog or the cluster alone decides it, with "remove it"."""
    owned = {flag: 1 for flag in rules.WORKLOAD_OWNED_FLAGS}
    with pytest.raises(SettingsError) as error:
        settings_from_mapping(with_overrides("aws", {"job": {"trainerArgs": owned}}))
    said = {p.path.removeprefix("job.trainerArgs."): p.allowed for p in error.value.problems
            if p.path.startswith("job.trainerArgs.")}
    assert set(said) == set(rules.WORKLOAD_OWNED_FLAGS)
    for flag, (decided_by, setting) in rules.WORKLOAD_OWNED_FLAGS.items():
        assert said[flag].startswith(f"set by the stack from {decided_by}; "), flag
        assert said[flag].endswith(f"set {setting} instead" if setting == decided_by
                                   else f"to change it, set {setting}" if setting
                                   else "remove it"), said[flag]
    assert said["hbm_gb_per_sec"] == ("set by the stack from the machine's GPU memory "
                                      "(infra/catalog/gpus.py); remove it")
    assert said["fabric_max_nodes_left_out"] == "set by the stack from job.nodes; set job.nodes instead"
    # on the on-demand pool the stack passes 0 whatever checkpoints.everySeconds says
    assert said["checkpoint_every_seconds"] == (
        "set by the stack from checkpoints.everySeconds on the spot pool and 0 on the on-demand "
        "pool (time-based saves are for spot pools, whose notice may not fit a save); to change "
        "it, set checkpoints.everySeconds")


def test_a_bare_api_address_reaches_the_clouds_as_that_address_alone() -> None:
    """`81.2.69.142` (no prefix) is the address alone: every cloud gets `81.2.69.142/32`."""
    values = with_overrides("aws", {"kubernetes": {"apiAccessCidrs": ["81.2.69.142",
                                                                      "2a00:1450::1"]}})
    settings = settings_from_mapping(values)
    assert settings.kubernetes.api_access_cidrs == ["81.2.69.142/32", "2a00:1450::1/128"]


@pytest.mark.parametrize("project", ["torchrec-ci-01", "acme.co.uk:ml-train", "abcdef"])
def test_gcp_project_ids_google_issues_are_accepted(project: str) -> None:
    """Resource Manager's projectId shape, and the legacy domain-scoped `<domain>:<id>`."""
    settings = settings_from_mapping(with_overrides("gcp", {"gcp": {"project": project}}))
    assert settings.gcp is not None and settings.gcp.project == project


def test_fix_commands_name_the_stack_pulumi_up_runs() -> None:
    """Under `pulumi up --stack gcp` (the mocks' stack), a pasted fix edits Pulumi.gcp.yaml
    whichever stack is selected; the rule itself writes its message without a stack."""
    run = run_stack("gcp", overrides={"gcp": {"project": ""}}, expect_error=True)
    assert isinstance(run.error, SettingsError), run.error
    (problem,) = [p for p in run.error.problems if p.path == "gcp.project"]
    assert "`pulumi config set --path gcp.project <project-id>`" in problem.allowed
    assert "`pulumi config set --stack gcp --path gcp.project <project-id>`" in str(run.error)


def test_each_region_counterpart_is_a_region_of_its_cloud() -> None:
    """A suggested counterpart (us-east-1 on Azure -> eastus) is a name the cloud has."""
    from infra.regions import COUNTERPARTS, REGIONS, counterpart

    for group in COUNTERPARTS:
        for cloud, region in group.items():
            assert region in REGIONS[cloud], (cloud, region)
    assert counterpart("us-east-1", Cloud.AZURE) == "eastus"
    assert counterpart("eu-west-1", Cloud.GCP) == "europe-west1"
    assert counterpart("mars-central", Cloud.AZURE) is None
