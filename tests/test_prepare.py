"""dataset.prepare: the settings' rules, the preparation Job, and the training pods' wait for it.

The workload runs reuse tests/test_workloads.py's harness (a fake cluster per cloud flavour
under mocks); the wait test runs the rendered init container's own command on this machine.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from typing import Any

import pytest

from trainer.exit_codes import RESUME

from infra.catalog.cloud import Cloud
from infra.catalog.machines import machine
from infra.settings.errors import SettingsError
from infra.settings.loader import settings_from_mapping
from infra.settings.model.checkpoints import Checkpoints
from infra.settings.model.dataset import Dataset, DatasetPrepare
from infra.settings.model.job import Job, JobKind, PoolChoice
from infra.settings.model.pools import SystemPool
from tests.fake_cluster import FLAVOURS, IMAGE
from tests.harness import USER_API_CIDRS, Captured
from tests.k8s_manifests import validate_manifests
from tests.test_workloads import (KUBERNETES_VERSION, WorkloadRun, checkov_failures,
                                  run_workload)

PREPARE_JOB = "kubernetes:batch/v1:Job"
FILES = ("layout.json", "prepare-failed.json", "prepare-heartbeat.json")
MLPERF_MULTI_HOT = [3, 2, 1, 2, 6, 1, 1, 1, 1, 7, 3, 8, 1, 6, 9, 5, 1, 1, 1, 12, 100, 27, 10, 3,
                    1, 1]


# --- settings ---------------------------------------------------------------------------------

def settings_with(cloud: str, dataset: dict[str, Any], **extra: Any):
    values: dict[str, Any] = {"cloud": cloud, "kubernetes": {"apiAccessCidrs": USER_API_CIDRS},
                              "dataset": dataset, **extra}
    if cloud == "gcp":
        values["gcp"] = {"project": "my-project"}
    return settings_from_mapping(values)


def prepared(**prepare: Any) -> dict[str, Any]:
    return {"path": "criteo/prepared",
            "prepare": {"enabled": True, "source": "criteo/raw", **prepare}}


def test_an_existing_azure_account_with_a_short_hyphenated_container_is_accepted():
    settings = settings_with("azure", prepared(source="az://a-b@criteodata.blob.core.windows.net/1tb",
                                               sourceResourceGroup="data-rg"))
    assert settings.dataset.prepare.source_resource_group == "data-rg"


def test_a_valid_preparation_needs_only_a_source_and_the_output_path():
    settings = settings_with("aws", {"path": "criteo/prepared",
                                     "prepare": {"enabled": True, "source": "s3://raw/criteo"}})
    assert settings.dataset.prepare.enabled and settings.dataset.prepare.pool.value == "cpu"


def test_prepare_true_is_short_for_enabled():
    assert Dataset.model_validate({"prepare": True}).prepare.enabled is True
    assert settings_with("aws", {"prepare": False}).dataset.prepare.enabled is False


BAD: list[tuple[str, str, dict[str, Any], dict[str, Any], str, Any, str]] = [
    # (id, cloud, dataset, other sections, path named, value named, fragment of what is allowed)
    ("no-output", "aws", {"prepare": {"enabled": True, "source": "s3://raw/criteo"}}, {},
     "dataset.path", "", "dataset.prepare writes the trainer's layout here"),
    ("no-source", "aws", {"path": "criteo/prepared", "prepare": True}, {},
     "dataset.prepare.source", "", "required with dataset.prepare"),
    ("gs-on-aws", "aws", prepared(source="gs://raw/criteo"), {},
     "dataset.prepare.source", "gs://raw/criteo", "on aws the preparation's own identity reads s3://"),
    ("s3-on-gcp", "gcp", prepared(source="s3://raw/criteo"), {},
     "dataset.prepare.source", "s3://raw/criteo", "on gcp the preparation's own identity reads gs://"),
    ("s3-on-azure", "azure", prepared(source="s3://raw/criteo"), {},
     "dataset.prepare.source", "s3://raw/criteo", "reads az://"),
    ("azure-container-with-underscore", "azure", prepared(source="az://raw_days/criteo"), {},
     "dataset.prepare.source", "az://raw_days/criteo", "single hyphens"),
    ("azure-container-of-64", "azure", prepared(source=f"az://{'a' * 64}/criteo"), {},
     "dataset.prepare.source", f"az://{'a' * 64}/criteo", "3-63 lowercase letters"),
    ("job-name-too-long-for-its-preparation", "aws", prepared(), {"job": {"name": "a" * 47}},
     "job.name", "a" * 47, "at most 46 characters with dataset.prepare"),
    ("azure-account-without-its-group", "azure",
     prepared(source="az://raw@criteodata.blob.core.windows.net/1tb"), {},
     "dataset.prepare.sourceResourceGroup", "", "resource group of storage account 'criteodata'"),
    ("azure-group-without-an-account", "azure",
     prepared(source="az://raw/1tb", sourceResourceGroup="data-rg"), {},
     "dataset.prepare.sourceResourceGroup", "data-rg", "only with a source naming its account"),
    ("resource-group-on-aws", "aws", prepared(sourceResourceGroup="data-rg"), {},
     "dataset.prepare.sourceResourceGroup", "data-rg", "Azure only"),
    ("absolute-path", "aws", prepared(source="/mnt/shared/raw"), {},
     "dataset.prepare.source", "/mnt/shared/raw", "relative to the shared file system's mount"),
    ("source-contains-output", "aws", prepared(source="criteo"), {},
     "dataset.prepare.source", "criteo", "neither may contain the other"),
    ("25-sizes", "aws", prepared(multiHotSizes=[1] * 25), {},
     "dataset.prepare.multiHotSizes", [1] * 25, "exactly 26 positive integers"),
    ("zero-size", "aws", prepared(multiHotSizes=[0] + [1] * 25), {},
     "dataset.prepare.multiHotSizes", [0] + [1] * 25, "exactly 26 positive integers"),
    ("day-24", "aws", prepared(days="0-24"), {},
     "dataset.prepare.days", "0-24", "within 0-23"),
    ("kaggle-days", "aws", prepared(format="criteo_kaggle", days="0-3"), {},
     "dataset.prepare.days", "0-3", "criteo_kaggle is one file"),
    ("kaggle-shuffle", "aws", prepared(format="criteo_kaggle", shuffle=True), {},
     "dataset.prepare.shuffle", True, "criteo_1tb only"),
    ("gpu-pool-full", "aws", prepared(pool="gpu"), {},
     "gpuPools.onDemand.maxNodes", 2, "at least 3"),
    ("cpu-override-too-big", "aws", prepared(cpu=4), {},
     "dataset.prepare.cpu", 4, "fewer than the 4 vCPUs of m6i.xlarge"),
    ("memory-override-too-big", "gcp", prepared(memoryGib=16), {},
     "dataset.prepare.memoryGib", 16, "less than the 16 GiB of e2-standard-4"),
    ("multi-hot-twice", "aws", prepared(multiHotSizes=MLPERF_MULTI_HOT, multiHot="onTheFly"),
     {"job": {"trainerArgs": {"multi_hot_sizes": MLPERF_MULTI_HOT}}},
     "job.trainerArgs.multi_hot_sizes", MLPERF_MULTI_HOT, "set by the stack"),
    ("materialized-multi-hot-on-2400-gib", "aws", prepared(multiHotSizes=MLPERF_MULTI_HOT), {},
     "sharedFileSystem.capacityGib", 2400, "onTheFly"),
    # Half an m6i.xlarge runs one worker: 24 days' 4.37 billion rows take about 20.2 h to scan
    # and write at the measured 120k rows/s per pass (trainer.prepare.estimated_hours).
    ("deadline-before-one-worker-ends", "aws", prepared(deadlineHours=12), {},
     "dataset.prepare.deadlineHours", 12, "on 1 worker(s) (half a m6i.xlarge of the system "
     "pool) take about 20.2 h"),
    # Each pass ends with its last day: 24 days on 10 workers are 3 rounds, not 2.4 days' time.
    ("deadline-shorter-than-three-rounds", "aws",
     prepared(pool="gpu", cpu=10, memoryGib=60, deadlineHours=2),
     {"gpuPools": {"onDemand": {"maxNodes": 3}}},
     "dataset.prepare.deadlineHours", 2, "on 10 worker(s) (a p4d.24xlarge of the GPU pool) take "
     "about 2.5 h"),
    # Workers beyond the pod's CPUs or its memory at 6 GiB each are refused, not counted on.
    ("workers-beyond-the-pod-s-memory", "aws", prepared(workers=2), {},
     "dataset.prepare.workers", 2, "at most 1: the pod has 2 CPUs and 8 GiB"),
    # More workers than day files do not help: 4 multi-hot days on 86 p4d workers still take
    # a day file's 1.05 h.
    ("deadline-shorter-than-a-day-file", "aws",
     prepared(pool="gpu", days="0-3", multiHotSizes=MLPERF_MULTI_HOT, deadlineHours=1),
     {"gpuPools": {"onDemand": {"maxNodes": 3}}},
     "dataset.prepare.deadlineHours", 1, "in 4 file(s) on 86 worker(s) (a p4d.24xlarge of the "
     "GPU pool) take about 1.1 h"),
    # Materialized MLPerf days read 3.83 TB an epoch: FSx PERSISTENT_2 at 250 MB/s/TiB on
    # 4.69 TiB (1,172 MB/s) takes 0.9 h where the planned GPUs need less: on the fly instead.
    ("materialized-multi-hot-slower-than-the-gpus", "aws",
     prepared(multiHotSizes=MLPERF_MULTI_HOT), {"sharedFileSystem": {"capacityGib": 4800}},
     "dataset.prepare.multiHot", "materialize", "3.83 TB an epoch) at the file system's 1,172 "
     "MB/s (FSx 250 MB/s/TiB x 4.6875 TiB) takes 0.9 h an epoch"),
    # The default system pool's half node (8 GiB) cannot hold the shuffle of Criteo 1TB: the
    # 4.2B training rows' days (671 GB) and 2.5 GB per busy worker; a p4d of the GPU pool can.
    ("shuffle-on-the-default-cpu-pool", "aws", prepared(shuffle=True), {},
     "dataset.prepare.pool", "cpu", "the shuffle of 4,195,197,692 rows (23 training days) needs "
     "about 628 GiB"),
    ("materialized-multi-hot-on-4-tib-anf", "azure",
     prepared(multiHotSizes=MLPERF_MULTI_HOT), {},
     "sharedFileSystem.volumeSizeGib", 4096, "needs about 4,191 GiB"),
]


@pytest.mark.parametrize(("cloud", "dataset", "other", "path", "value", "allowed"),
                         [case[1:] for case in BAD], ids=[case[0] for case in BAD])
def test_a_bad_preparation_setting_is_named_with_its_value_and_what_is_allowed(
        cloud, dataset, other, path, value, allowed):
    with pytest.raises(SettingsError) as raised:
        settings_with(cloud, dataset, **other)
    found = [p for p in raised.value.problems if p.path == path]
    assert found, f"no problem for {path}: {raised.value}"
    assert found[0].value == value and allowed in found[0].allowed, found[0]


def test_materialized_multi_hot_fits_a_big_enough_file_system_and_a_few_days_fit_any():
    # 4.69 TiB at 1,000 MB/s/TiB reads the 3.83 TB an epoch faster than the GPUs take it.
    settings_with("aws", prepared(multiHotSizes=MLPERF_MULTI_HOT),
                  sharedFileSystem={"capacityGib": 4800, "throughputPerTib": 1000})
    settings_with("aws", prepared(multiHotSizes=MLPERF_MULTI_HOT, days="0-3"),
                  sharedFileSystem={"throughputPerTib": 1000})
    settings_with("aws", prepared(multiHotSizes=MLPERF_MULTI_HOT, multiHot="onTheFly"))


def test_the_default_deadline_holds_criteo_1tb_on_one_worker_and_kaggle_in_an_hour():
    # 20.2 h (one-hot) and 25.3 h (materialized multi-hot) on half a system node, under 48.
    settings_with("aws", prepared(multiHotSizes=MLPERF_MULTI_HOT),
                  sharedFileSystem={"capacityGib": 4800, "throughputPerTib": 1000})
    settings_with("aws", prepared(format="criteo_kaggle", deadlineHours=1))


def test_a_full_size_shuffle_is_refused_on_the_default_cpu_pool_with_the_fix_and_fits_a_gpu_node():
    with pytest.raises(SettingsError) as raised:
        settings_with("aws", prepared(shuffle=True))
    (problem,) = [p for p in raised.value.problems if p.path == "dataset.prepare.pool"]
    assert "the pod has 8 GiB" in problem.allowed
    assert "`pulumi config set --path dataset.prepare.pool gpu` (1,036 GiB on a p4d.24xlarge" in problem.allowed
    settings_with("aws", prepared(shuffle=True, pool="gpu"), gpuPools={"onDemand": {"maxNodes": 3}})


def test_gpu_preparation_is_accepted_with_a_node_to_spare():
    settings = settings_with("aws", prepared(pool="gpu"),
                             gpuPools={"onDemand": {"maxNodes": 3}})
    assert settings.dataset.prepare.pool.value == "gpu"


# --- the rendered objects --------------------------------------------------------------------

AWS_PREPARE = Dataset(path="criteo/mlperf", prepare=DatasetPrepare(
    enabled=True, source="s3://raw-criteo/1tb", frequency_threshold=0, max_ind_range=40_000_000,
    multi_hot_sizes=MLPERF_MULTI_HOT, pool="gpu", shuffle=True))
AZURE_PREPARE = Dataset(path="criteo/one-hot", prepare=DatasetPrepare(
    enabled=True, source="criteo/raw", frequency_threshold=3, days="0-3",
    multi_hot_sizes=MLPERF_MULTI_HOT, multi_hot="onTheFly", multi_hot_distribution="pareto"))


@pytest.fixture(scope="module")
def runs() -> dict[str, WorkloadRun]:
    """A JobSet preparing on its GPU pool (AWS) and a PyTorchJob preparing on the system pool
    (Azure), each run once."""
    return {
        "aws": run_workload("aws", Job(trainer_args={"batch_size": 4096}), dataset=AWS_PREPARE),
        "azure": run_workload("azure", Job(kind=JobKind.PYTORCH_JOB, pool=PoolChoice.SPOT),
                              Checkpoints(), dataset=AZURE_PREPARE,
                              system_pool=SystemPool(machine_type="Standard_D4s_v5")),
    }


def prepare_job(scenario: WorkloadRun) -> Captured:
    (job,) = scenario.run.of_type(PREPARE_JOB)
    return job


def prepare_pod(scenario: WorkloadRun) -> dict[str, Any]:
    return prepare_job(scenario).inputs["spec"]["template"]["spec"]


def prepare_container(scenario: WorkloadRun) -> dict[str, Any]:
    (container,) = prepare_pod(scenario)["containers"]
    return container


def prepare_flags(scenario: WorkloadRun) -> dict[str, str]:
    return dict(arg[2:].split("=", 1) for arg in prepare_container(scenario)["args"])


def test_the_job_runs_trainer_prepare_with_flags_from_the_settings(runs):
    aws = prepare_container(runs["aws"])
    assert aws["command"] == ["python", "-m", "trainer.prepare"]
    assert aws["image"] == IMAGE
    p4d = machine(Cloud.AWS, "p4d.24xlarge")
    assert prepare_flags(runs["aws"]) == {
        "source": "s3://raw-criteo/1tb", "output": "/mnt/shared/criteo/mlperf",
        "dataset": "criteo_1tb", "workers": str(int(p4d.vcpus * 0.9)),
        "max_ind_range": "40000000", "shuffle_seed": "0",  # MLPerf's step 3, --random_seed 0
        "multi_hot_sizes": ",".join(map(str, MLPERF_MULTI_HOT)),
        "multi_hot_distribution_type": "uniform"}
    # One-hot on disk when the trainer draws the multi-hot ids itself; a path source is the
    # folder on the shared file system. Half a D4s_v5 is 2 CPUs and 8 GiB: one worker, as
    # many as the memory holds at WORKER_MEMORY_GIB each (a real 1TB day needs ~5 GB).
    assert prepare_flags(runs["azure"]) == {
        "source": "/mnt/shared/criteo/raw", "output": "/mnt/shared/criteo/one-hot",
        "dataset": "criteo_1tb", "workers": "1", "days": "0-3", "frequency_threshold": "3"}


def test_the_preparation_hashes_into_and_draws_with_the_model_s_tables_as_mlperf_does():
    """recipe: mlperf: the Job prepares with MLPerf's num_embeddings_per_feature (40000000,
    39060, ...), the sizes mlcommons' materialize script draws its multi-hot tables with and
    its reader hashes ids into; not the data's distinct ids + 2."""
    from trainer.recipe import MLPERF_TABLE_SIZES

    mlperf = run_workload("aws", Job(trainer_args={"recipe": "mlperf"}), dataset=AWS_PREPARE)
    flags = prepare_flags(mlperf)
    assert flags["num_embeddings_per_feature"] == ",".join(map(str, MLPERF_TABLE_SIZES))
    assert flags["max_ind_range"] == "40000000" and flags["shuffle_seed"] == "0"


def test_the_trainer_reads_the_prepared_folder_and_draws_multi_hot_only_on_the_fly(runs):
    aws = runs["aws"].flags()
    assert aws["dataset_path"] == "/mnt/shared/criteo/mlperf"
    assert "multi_hot_sizes" not in aws and "num_embeddings_per_feature" not in aws
    azure = runs["azure"].flags()
    assert azure["dataset_path"] == "/mnt/shared/criteo/one-hot"
    assert azure["multi_hot_sizes"] == ",".join(map(str, MLPERF_MULTI_HOT))
    assert azure["multi_hot_distribution_type"] == "pareto"


def test_the_job_reads_with_its_own_identity_not_the_trainer_s_and_writes_the_shared_volume(
        runs):
    """The preparation runs under `<job.serviceAccount>-prepare`, carrying the preparation's
    own cloud identity (read the source), never the trainer's account (checkpoint write, node
    patch): issue 33, least privilege."""
    for name, scenario in runs.items():
        pod = prepare_pod(scenario)
        assert scenario.pod_spec()["serviceAccountName"] == "trainer"
        assert pod["serviceAccountName"] == "trainer-prepare"
        assert pod["automountServiceAccountToken"] is False
        accounts = {r.inputs["metadata"]["name"]: r.inputs["metadata"]
                    for r in scenario.run.of_type("kubernetes:core/v1:ServiceAccount")}
        assert accounts["trainer-prepare"]["annotations"] == FLAVOURS[name].prepare_annotations
        assert accounts["trainer"]["annotations"] == FLAVOURS[name].annotations
        # Nothing that lets it touch nodes is bound to it (the gate's binding names the trainer).
        for kind in ("ClusterRoleBinding", "RoleBinding"):
            for binding in scenario.run.of_type(f"kubernetes:rbac.authorization.k8s.io/v1:{kind}"):
                subjects = {s["name"] for s in binding.inputs.get("subjects", [])}
                assert "trainer-prepare" not in subjects
        (own,) = [r for r in scenario.run.of_type("kubernetes:core/v1:ServiceAccount")
                  if r.inputs["metadata"]["name"] == "trainer-prepare"]
        assert scenario.run.waits_for(prepare_job(scenario), own)
        assert {"name": "shared-fs", "persistentVolumeClaim": {"claimName": "dlrm-shared-fs"}} \
            in pod["volumes"]
        assert {"name": "shared-fs", "mountPath": "/mnt/shared"} \
            in prepare_container(scenario)["volumeMounts"]
        labels = prepare_job(scenario).inputs["spec"]["template"]["metadata"]["labels"]
        assert FLAVOURS[name].pod_labels.items() <= labels.items()  # Azure: workload identity
        env = {e["name"]: e.get("value") or e["valueFrom"]
               for e in prepare_container(scenario)["env"]}
        assert FLAVOURS[name].checkpoint_env.items() <= env.items()  # e.g. the storage account
        # The run id it stamps its verdict with: its Job's uid, from the pod's own label.
        assert env["PREPARE_RUN_ID"] == {"fieldRef": {
            "fieldPath": "metadata.labels['batch.kubernetes.io/controller-uid']"}}
        # The non-root preparation gets its output folder from the root CHOWN-only helper.
        (helper,) = pod["initContainers"]
        assert prepare_flags(scenario)["output"] in helper["command"][-1]
        assert helper["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["CHOWN"]}


def test_the_job_is_placed_and_sized_for_its_pool(runs):
    aws = prepare_pod(runs["aws"])
    assert aws["nodeSelector"] == {"eks.amazonaws.com/nodegroup": "gpu"}  # the job's GPU pool
    assert any(t["key"] == "nvidia.com/gpu" for t in aws["tolerations"])
    p4d = machine(Cloud.AWS, "p4d.24xlarge")
    resources = prepare_container(runs["aws"])["resources"]
    assert resources["requests"] == resources["limits"] == {
        "cpu": str(int(p4d.vcpus * 0.9)), "memory": f"{int(p4d.memory_gib * 0.9)}Gi"}
    assert "nvidia.com/gpu" not in resources["limits"]  # no GPU: the trainers get them all
    azure = prepare_pod(runs["azure"])  # cpu: half a system node, beside the add-ons
    assert azure["nodeSelector"] == {"kubernetes.azure.com/agentpool": "system"}
    assert "tolerations" not in azure
    assert prepare_container(runs["azure"])["resources"]["limits"] == {"cpu": "2",
                                                                      "memory": "8Gi"}


def test_the_job_retries_a_few_times_within_its_deadline_and_skips_pulumi_s_await(runs):
    job = prepare_job(runs["aws"])
    assert job.inputs["metadata"]["annotations"] == {"pulumi.com/skipAwait": "true"}
    spec = job.inputs["spec"]
    assert spec["backoffLimit"] == 3 and spec["activeDeadlineSeconds"] == 48 * 3600
    rules = spec["podFailurePolicy"]["rules"]
    # A bad flag, or a failure the process has retried already: final, the Job fails at once.
    assert rules[0] == {"action": "FailJob", "onExitCodes": {
        "containerName": "prepare", "operator": "In", "values": [1, 2]}}
    assert rules[1]["action"] == "Ignore"  # a drained or preempted node is not a failure
    assert spec["template"]["spec"]["restartPolicy"] == "Never"
    # Nothing to save on SIGTERM (resumable), and python as PID 1 ignores it: a short grace, so
    # a replaced Job's pod does not run on beside its successor.
    assert spec["template"]["spec"]["terminationGracePeriodSeconds"] == 5


def test_a_replaced_job_gets_a_new_name_so_it_never_meets_the_old_one_terminating(runs):
    """skipAwait: the delete of the old Job is not awaited; a fixed name would collide."""
    job = prepare_job(runs["aws"])
    assert "name" not in job.inputs["metadata"]  # Pulumi auto-names it
    assert re.fullmatch(r"dlrm-prepare-[0-9a-f]{8}", job.outputs["metadata"]["name"])
    assert job.name == "dlrm-prepare"


def test_the_job_runs_locked_down(runs):
    for scenario in runs.values():
        context = prepare_container(scenario)["securityContext"]
        assert context["runAsNonRoot"] is True and context["runAsUser"] == 1000
        assert context["allowPrivilegeEscalation"] is False and context["privileged"] is False
        assert context["readOnlyRootFilesystem"] is True
        assert context["capabilities"] == {"drop": ["ALL"]}
        assert prepare_pod(scenario)["securityContext"]["seccompProfile"] == {
            "type": "RuntimeDefault"}


def wait_script(scenario: WorkloadRun) -> str:
    """The wait part of the main container's script: everything before the trainer's own."""
    wait, found, _ = scenario.container()["command"][2].partition(
        "python -c 'import sys; from trainer.config")
    assert found, scenario.container()["command"][2]
    return wait


def test_both_kinds_wait_in_their_main_container_before_the_trainer(runs):
    """No init container: a pod in its init containers is never Ready, and Kueue's JobSet
    PodsReady counts Ready pods, so the gang would be evicted every ready timeout while the
    preparation runs for hours. The wait runs first in the trainer's container, then hands over
    (the PyTorchJob kind too: training-operator v1.9.4 would recreate a pod failed by an init
    container forever)."""
    for key, folder in (("aws", "/mnt/shared/criteo/mlperf"), ("azure", "/mnt/shared/criteo/one-hot")):
        scenario = runs[key]
        assert [c["name"] for c in scenario.pod_spec()["initContainers"]] == \
            ["prepare-shared-fs"], key
        shell, flag, script, name = scenario.container()["command"]
        run_id = prepare_job(scenario).outputs["metadata"]["uid"]
        assert (shell, flag, name) == ("/bin/sh", "-c", "trainer")
        assert scenario.flags()["dataset_path"] == folder
        assert script.startswith(f"layout={folder}/layout.json; failed={folder}/prepare-failed."
                                 f"json; beat={folder}/prepare-heartbeat.json; run={run_id}; ")
        assert f"run={run_id}; first=3600; stale=1800\n" in script
        # the trainer's own script (flag check, then exec of the launcher) comes last
        assert script.index("found $layout") < script.index("exec python -m trainer.launch")


def test_a_failed_preparation_fails_the_jobset_at_once(runs):
    """The wait's CONFIG_ERROR is the trainer container's exit status: it matches the NO_RETRY
    FailJob rule, whose message JobSet's ConfigurationOrFabricError rule turns into FailJobSet
    (workloads/jobset.py); no rule names an init container any more."""
    spec = runs["aws"].workload().inputs["spec"]
    job = spec["replicatedJobs"][0]["template"]["spec"]
    rules = job["podFailurePolicy"]["rules"]
    assert rules[0] == {"action": "FailJob", "onExitCodes": {
        "containerName": "trainer", "operator": "In", "values": [2, 3]}}
    assert all(r.get("onExitCodes", {}).get("containerName", "trainer") == "trainer"
               for r in rules)
    message = ("Container trainer for pod torchrec/dlrm-trainer-0-0-x failed with exit "
               "code 2 matching FailJob rule at index 0")
    final = spec["failurePolicy"]["rules"][0]
    assert final["action"] == "FailJobSet"
    assert re.search(final["onJobFailureMessagePatterns"][0], message)


def test_the_training_job_depends_on_the_preparation_job(runs):
    for scenario in runs.values():
        job = prepare_job(scenario)
        assert scenario.run.waits_for(scenario.workload(), job)
        assert scenario.run.waits_for(job, scenario.run.named(scenario.cluster.file_system_name))
        assert scenario.run.waits_for(job, scenario.run.one(
            "kubernetes:core/v1:PersistentVolumeClaim"))


def test_the_preparation_pod_takes_no_ingress_and_is_not_a_trainer_peer(runs):
    scenario = runs["aws"]
    policies = {p.inputs["metadata"]["name"]: p.inputs["spec"]
                for p in scenario.run.of_type("kubernetes:networking.k8s.io/v1:NetworkPolicy")}
    pod_labels = prepare_job(scenario).inputs["spec"]["template"]["metadata"]["labels"]
    own = policies["dlrm-prepare-no-ingress"]
    assert own["podSelector"]["matchLabels"].items() <= pod_labels.items()
    assert own["policyTypes"] == ["Ingress", "Egress"]
    assert not own.get("ingress") and own["egress"] == [{}]  # bucket, DNS, file system
    trainers = policies["dlrm-same-job-only"]["podSelector"]["matchLabels"]
    assert not trainers.items() <= pod_labels.items()
    service = scenario.run.one("kubernetes:core/v1:Service").inputs["spec"]["selector"]
    assert not service.items() <= pod_labels.items()  # never resolved as a rendezvous peer


def test_the_watch_commands_start_with_the_preparation_s_log(runs):
    for scenario in runs.values():
        commands = scenario.outputs["watch_commands"]
        assert commands[0] == ("kubectl -n torchrec logs -f -l app.kubernetes.io/instance=dlrm,"
                               "app.kubernetes.io/name=torchrec-prepare --tail=-1 "
                               "--max-log-requests=20")
        assert len(commands) == 5  # then the training job's three, then why it waits


def test_no_preparation_no_job_and_no_wait():
    plain = run_workload("gcp", Job(), dataset=Dataset(path="criteo/1tb"))
    assert not plain.run.of_type(PREPARE_JOB)
    assert [c["name"] for c in plain.pod_spec()["initContainers"]] == ["prepare-shared-fs"]


def test_the_preparation_manifests_are_valid_and_pass_checkov(runs, tmp_path):
    for scenario in runs.values():
        kinds = {m["kind"] for m in validate_manifests(scenario.run, KUBERNETES_VERSION)}
        assert "Job" in kinds
    failed = checkov_failures(runs, tmp_path)
    assert not failed, "checkov failed checks:\n  " + "\n  ".join(failed)
    assert any((tmp_path / "aws").glob("job-dlrm-prepare-*.yaml"))


# --- the wait, run here -----------------------------------------------------------------------

def run_id_of(scenario: WorkloadRun) -> str:
    return prepare_job(scenario).outputs["metadata"]["uid"]


def start_wait(scenario: WorkloadRun, folder, first: int = 3600, stale: int = 1800,
               poll: str = "0.1") -> subprocess.Popen:
    """The rendered container's wait, its files pointed at a folder here, then a stand-in for
    the trainer that says it was reached."""
    wait = wait_script(scenario).replace(scenario.flags()["dataset_path"], str(folder))
    wait = re.sub(r"first=\d+; stale=\d+", f"first={first}; stale={stale}", wait, count=1)
    return subprocess.Popen(["/bin/sh", "-c", wait + 'echo "trainer $*"', "trainer", "--x=1"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "LAYOUT_POLL_SECONDS": poll})


def finish(process: subprocess.Popen) -> tuple[int, list[str]]:
    try:
        output, _ = process.communicate(timeout=10)
    finally:
        if process.poll() is None:
            process.kill()
    return process.returncode, output.splitlines()


def verdict(run_id: str | None, **fields: Any) -> str:
    """As trainer.prepare writes it (json.dump, indent=1)."""
    return json.dumps({**fields, "run_id": run_id}, indent=1)


def test_the_rendered_wait_holds_until_this_run_s_layout_json_appears_then_exits_0(runs,
                                                                                    tmp_path):
    scenario = runs["aws"]
    run_id = run_id_of(scenario)
    layout = tmp_path / "layout.json"
    layout.write_text(verdict("an-earlier-run", format="criteo-1tb-npy"))  # stale: not ours
    (tmp_path / "prepare-failed.json").write_text(verdict(None, exit_status=1))  # by hand
    process = start_wait(scenario, tmp_path)
    time.sleep(0.6)
    assert process.poll() is None, process.stdout.read()  # still waiting
    layout.write_text(verdict(run_id, format="criteo-1tb-npy"))
    code, lines = finish(process)
    assert code == 0, lines
    assert sum(line.startswith(f"waiting for {layout}") for line in lines) >= 2
    assert ("kubectl -n torchrec logs -f -l app.kubernetes.io/instance=dlrm,"
            "app.kubernetes.io/name=torchrec-prepare --tail=-1 --max-log-requests=20") in lines[0]
    assert lines[-2:] == [f"found {layout}: the dataset is prepared", "trainer --x=1"]


def test_the_rendered_wait_fails_with_config_error_on_this_run_s_recorded_failure(runs,
                                                                                 tmp_path):
    scenario = runs["aws"]
    run_id = run_id_of(scenario)
    process = start_wait(scenario, tmp_path)
    time.sleep(0.3)
    (tmp_path / "prepare-failed.json").write_text(verdict(
        run_id, exit_status=2, error="python -m trainer.prepare: error: --source=s3://x: not found"))
    code, lines = finish(process)
    assert code == 2  # CONFIG_ERROR: the rule above fails the training job at once
    assert "trainer --x=1" not in lines  # the trainer never started
    assert any(line.startswith("dataset preparation failed") for line in lines)
    assert any("--source=s3://x: not found" in line for line in lines)


def test_the_rendered_wait_resumes_when_this_run_s_heartbeat_falls_silent(runs, tmp_path):
    """A silent preparation (its pod killed, or waiting for a node after a spot reclaim) is
    capacity trouble: the gang restarts uncounted (RESUME) and waits again."""
    run_id = run_id_of(runs["aws"])
    beat = tmp_path / "prepare-heartbeat.json"
    beat.write_text(json.dumps({"run_id": run_id}))
    process = start_wait(runs["aws"], tmp_path, stale=60, poll="0.2")
    time.sleep(0.5)
    assert process.poll() is None  # beating: the preparation runs
    an_hour_ago = time.time() - 3600
    os.utime(beat, (an_hour_ago, an_hour_ago))  # killed an hour ago without a word
    code, lines = finish(process)
    assert code == RESUME and "has been silent for" in lines[-1], lines


def test_the_rendered_wait_resumes_when_this_run_never_starts(runs, tmp_path):
    """A preparation pod with no node (quota, a stock-out) is not a configuration error."""
    (tmp_path / "prepare-heartbeat.json").write_text(json.dumps({"run_id": "an-earlier-run"}))
    code, lines = finish(start_wait(runs["aws"], tmp_path, first=1, poll="0.2"))
    assert code == RESUME and "has not started after" in lines[-1], lines
    assert "kubectl -n torchrec describe pods -l app.kubernetes.io/instance=dlrm," in lines[-1]


def test_both_kinds_hand_over_to_the_trainer_once_the_dataset_is_prepared(runs, tmp_path):
    """The main container's own script, its paths pointed here and the trainer's part echoed:
    the trainer starts after this run's layout.json, and never after its recorded failure."""
    for key in ("aws", "azure"):
        folder = tmp_path / key
        folder.mkdir()
        run_id = run_id_of(runs[key])
        process = start_wait(runs[key], folder)
        time.sleep(0.3)
        (folder / "layout.json").write_text(verdict(run_id, format="criteo-1tb-npy"))
        code, lines = finish(process)
        assert code == 0 and lines[-2:] == [
            f"found {folder}/layout.json: the dataset is prepared", "trainer --x=1"], lines
        (folder / "layout.json").unlink()
        (folder / "prepare-failed.json").write_text(verdict(run_id, exit_status=1, error="boom"))
        code, lines = finish(start_wait(runs[key], folder))
        assert code == 2 and "trainer --x=1" not in lines, lines  # exit 2: the job fails


def test_the_wait_ends_at_once_on_sigterm(runs, tmp_path):
    """The kubelet's SIGTERM (a JobSet restart, a drain) must not sit out the pod's grace."""
    process = start_wait(runs["aws"], tmp_path, poll="30")
    time.sleep(0.3)
    started = time.monotonic()
    process.terminate()
    assert process.wait(timeout=5) == 143
    assert time.monotonic() - started < 2
