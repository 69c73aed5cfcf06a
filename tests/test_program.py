"""Policies every stack obeys, whatever the cloud: the whole program run under mocks per stack.

Cloud-specific assertions live in test_aws/test_azure/test_gcp; these are the promises of
docs/architecture.md that hold everywhere (outputs, ordering, providers, parents, retention).
"""

from __future__ import annotations

import pytest

from infra.catalog.machines import find_machine
from infra.estimate import estimate_output
from infra.kubernetes_release import minor_of
from infra.settings.loader import settings_from_mapping
from tests.harness import PROJECT, STACKS, Run, run_stack, stack_config
from tests.k8s_manifests import validate_manifests

# What, per cloud, the job must wait for: the GPU pools and the shared file system.
GPU_POOL_TYPES = {
    "aws": {"eks:index:ManagedNodeGroup", "aws:eks/nodeGroup:NodeGroup"},
    "azure": {"azure-native:containerservice:AgentPool"},
    "gcp": {"gcp:container/nodePool:NodePool"},
}
FILE_SYSTEM_TYPES = {
    "aws": {"aws:fsx/lustreFileSystem:LustreFileSystem"},
    "azure": {"azure-native:netapp:CapacityPoolVolume", "azure-native:netapp:Volume"},
    "gcp": {"gcp:filestore/instance:Instance"},
}
BUCKET_TYPES = {
    "aws": {"aws:s3/bucketV2:BucketV2", "aws:s3/bucket:Bucket"},
    "azure": {"azure-native:storage:BlobContainer", "azure-native:storage:StorageAccount"},
    "gcp": {"gcp:storage/bucket:Bucket"},
}
TRAINING_JOB_TYPES = {"kubernetes:jobset.x-k8s.io/v1alpha2:JobSet", "kubernetes:kubeflow.org/v1:PyTorchJob"}


def settings_of(stack: str):
    prefix = f"{PROJECT}:"
    return settings_from_mapping(
        {k.removeprefix(prefix): v for k, v in stack_config(stack).items() if k.startswith(prefix)}
    )


@pytest.fixture(scope="module", params=STACKS)
def run(request: pytest.FixtureRequest) -> Run:
    return run_stack(request.param)


def of_types(run: Run, types: set[str]) -> list:
    return [r for r in run.resources if r.type in types]


def the_job(run: Run):
    jobs = of_types(run, TRAINING_JOB_TYPES)
    assert len(jobs) == 1, [r.type for r in jobs]
    return jobs[0]


def test_stack_exports_what_the_user_needs(run: Run) -> None:
    for name in ("cluster_name", "kubeconfig", "file_system_id", "checkpoint_uri", "job_name",
                 "job_namespace",
                 "watch_commands", "estimated_cost", "trainer_image"):
        assert run.outputs.get(name), f"{run.stack}: output {name} is empty"
    assert "kubeconfig" in run.secret_outputs
    # `pulumi up` prints outputs sorted by name: the why line is the last one.
    assert sorted(run.outputs)[-1] == "why_waiting"
    assert run.outputs["why_waiting"].startswith(f"job {run.outputs['job_name']} submitted")
    scheme = {"aws": "s3://", "azure": "az://", "gcp": "gs://"}[run.stack]
    assert run.outputs["checkpoint_uri"].startswith(scheme)
    # What `python -m torchrec_cloud status` reads: where checkpoints are, the pools by name.
    assert run.outputs["checkpoint_location"] == "objectStore"
    assert run.outputs["checkpoint_dir"] == run.outputs["checkpoint_uri"]
    pools = run.outputs["node_pools"]
    assert set(pools.values()) <= {"spot", "on-demand"} and "on-demand" in pools.values(), pools
    assert len(pools) >= 2, pools  # the system pool and at least one GPU pool


def test_estimated_cost_is_the_estimate_make_check_prints(run: Run) -> None:
    """The export is infra/estimate.py's figure for the stack's settings: the hourly items
    (nodes, file system, network, control plane), the most the pools reach, one run; the
    names earlier versions exported (on_demand_usd_per_hour, spot_usd_per_hour) stay."""
    expected = estimate_output(settings_of(run.stack))
    cost = run.outputs["estimated_cost"]
    for key in ("on_demand_usd_per_hour", "spot_usd_per_hour", "usd_per_hour",
                "at_most_usd_per_hour"):
        assert cost[key] == pytest.approx(expected[key]), key
    assert cost["spot_usd_per_hour"] < cost["on_demand_usd_per_hour"]
    assert [i["item"] for i in cost["items"]] == [i["item"] for i in expected["items"]]
    assert sum(i["usd_per_hour"] for i in cost["items"]) == pytest.approx(
        cost["on_demand_usd_per_hour"], abs=0.01)
    assert cost["run"]["usd"] == pytest.approx(expected["run"]["usd"])
    assert cost["run"]["throughput_source"] == expected["run"]["throughput_source"]


def test_the_job_waits_for_the_gpu_pools_and_the_file_system(run: Run) -> None:
    job = the_job(run)
    pools = of_types(run, GPU_POOL_TYPES[run.stack])
    file_systems = of_types(run, FILE_SYSTEM_TYPES[run.stack])
    assert pools and file_systems
    for earlier in pools + file_systems:
        assert run.waits_for(job, earlier), f"{run.stack}: the job does not wait for {earlier.name}"


def test_every_kubernetes_object_goes_to_the_new_cluster(run: Run) -> None:
    providers = {r.urn for r in run.of_type("pulumi:providers:kubernetes")}
    assert providers, "no Kubernetes provider built from the cluster's kubeconfig"
    for resource in run.resources:
        if resource.type.startswith("kubernetes:") and resource.custom:
            assert resource.provider_urn in providers, f"{resource.name} uses the default provider"


def test_kubernetes_provider_waits_for_the_gpu_pools(run: Run) -> None:
    provider = run.of_type("pulumi:providers:kubernetes")[0]
    for pool in of_types(run, GPU_POOL_TYPES[run.stack]):
        assert run.waits_for(provider, pool), f"provider does not wait for {pool.name}"


def test_every_kubernetes_object_is_valid_for_the_cluster_version(run: Run) -> None:
    validate_manifests(run, minor_of(run.outputs["kubernetes_version"]))


def test_every_resource_is_inside_a_component(run: Run) -> None:
    """No resource hangs at the stack root: each belongs to the cloud or workload component."""
    for resource in run.resources:
        if resource.custom and not resource.type.startswith("pulumi:providers:"):
            ancestry = resource.parent.split("::")[-2].split("$") if resource.parent else []
            assert ancestry and ancestry[-1] != "pulumi:pulumi:Stack", f"{resource.name} is at the root"
            assert any(t.startswith("torchrec-cloud:") for t in ancestry), (
                f"{resource.name} is not parented under one of our components"
            )


def test_names_derive_from_project_and_stack(run: Run) -> None:
    components = [r for r in run.resources if r.type.startswith("torchrec-cloud:")]
    assert components
    for component in components:
        assert component.name.startswith(f"{PROJECT}-{run.stack}"), component.name


def test_checkpoint_storage_is_retained_on_destroy_by_default(run: Run) -> None:
    buckets = of_types(run, BUCKET_TYPES[run.stack])
    assert buckets
    assert all(bucket.retain_on_delete for bucket in buckets), [b.name for b in buckets]


@pytest.mark.parametrize("stack", STACKS)
def test_checkpoint_storage_goes_with_the_stack_when_asked(stack: str) -> None:
    run = run_stack(stack, overrides={"checkpoints": {"retainOnDestroy": False}})
    buckets = of_types(run, BUCKET_TYPES[stack])
    assert buckets and not any(bucket.retain_on_delete for bucket in buckets)


KUEUE = "kubernetes:kueue.x-k8s.io/v1beta2"


def test_the_job_is_admitted_as_a_gang_by_kueue_on_every_cloud(run: Run) -> None:
    """Kueue (its Helm chart, JobSet integration and waitForPodsReady on), a ResourceFlavor per
    pool the job may use with that pool's node labels, a ClusterQueue whose GPU quota is the
    pool's max nodes x GPUs, a LocalQueue in the job's namespace, and the JobSet labelled
    for it, created after all of them (the objects' schemas: test above)."""
    import yaml

    (release,) = [r for r in run.resources if r.type == "kubernetes:helm.sh/v3:Release"
                  and r.inputs.get("chart") == "oci://registry.k8s.io/kueue/charts/kueue"]
    config = yaml.safe_load(release.inputs["values"]["managerConfig"]["controllerManagerConfigYaml"])
    assert config["integrations"]["frameworks"] == ["jobset.x-k8s.io/jobset"]
    requeue = config["waitForPodsReady"]["requeuingStrategy"]
    settings = settings_of(run.stack)
    # No bound unless job.spotShortage.maxWaitMinutes asks for one: Kueue's count is lifelong.
    assert ("backoffLimitCount" in requeue) == (
        settings.job.spot_shortage.max_wait_minutes is not None)
    assert 0 < requeue["backoffMaxSeconds"] < 600  # below the autoscalers' scale-down time
    pool = settings.job_pool
    found = find_machine(settings.cloud, pool.machine_type)
    assert found is not None
    gpus = found.gpu_count
    (flavor,) = run.of_type(f"{KUEUE}:ResourceFlavor")
    (queue,) = run.of_type(f"{KUEUE}:ClusterQueue")
    (local,) = run.of_type(f"{KUEUE}:LocalQueue")
    (group,) = queue.inputs["spec"]["resourceGroups"]
    assert group["flavors"] == [{"name": flavor.inputs["metadata"]["name"], "resources": [
        {"name": "nvidia.com/gpu", "nominalQuota": float(pool.max_nodes * gpus)}]}]
    assert local.inputs["metadata"]["namespace"] == settings.job.namespace
    assert local.inputs["spec"]["clusterQueue"] == queue.inputs["metadata"]["name"]
    job = the_job(run)
    assert job.inputs["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == \
        local.inputs["metadata"]["name"]
    for earlier in (release, flavor, queue, local):
        assert run.waits_for(job, earlier), f"{run.stack}: the job does not wait for {earlier.name}"
