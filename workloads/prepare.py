"""Dataset preparation before training: one `batch/v1` Job running `python -m trainer.prepare`,
and the wait, run first in each training pod's main container, until its output is complete.

Why the training pods wait themselves and `pulumi up` does not wait for the Job:
pulumi-kubernetes awaits a Job until its `Complete` condition, with a 10-minute default timeout
(https://www.pulumi.com/registry/packages/kubernetes/api-docs/batch/v1/job/: "If the Job has not
reached a Ready state after 10 minutes, it will time out and mark the resource update as
Failed"), and preparing Criteo 1TB takes hours. With `pulumi.com/skipAwait` the Job counts as
created once the API server has it; the JobSet or PyTorchJob still depends on it (created after
it, deleted before it), and each training pod's main container polls for
`<dataset.path>/layout.json`, which `trainer.prepare` writes last (trainer/prepare/README.md),
before it runs the trainer (waiting_first). Not in an init container: a pod still in its init
containers is not Ready, and Kueue's PodsReady timeout (workloads/kueue.py) would evict the gang
over and over while a preparation runs for hours; a running main container is Ready, so the
gang is admitted and holds its GPU nodes while it waits.

How the wait knows this Job's verdict (trainer/prepare/status.py): the Job's uid, a Pulumi output
once the API server has the Job, is in the wait's arguments, and the preparation stamps its
`layout.json` or its `prepare-failed.json` with the same uid (its pod's
`batch.kubernetes.io/controller-uid` label, through the downward API). A verdict left by an
earlier run is ignored; this run's failure ends the wait with CONFIG_ERROR, the main container's
exit status, which fails the training job at once (the JobSet's NO_RETRY rule, workloads/
jobset.py; the PyTorchJob operator's restartPolicy ExitCode); a preparation that leaves no verdict
(its pod killed on every retry, past its deadline, never started) stops its heartbeat, and the
wait fails when that has been silent too long.

Why the Job has no fixed name: its pod template is immutable, so a changed setting or image
replaces it, and pulumi-kubernetes does not await the delete of a skipAwait resource; a
replacement under the same name would find the old one still terminating ("already exists").
Pulumi names it `<job>-prepare-<random>` instead (https://www.pulumi.com/docs/iac/concepts/
resources/names/: "using the logical name and a random suffix"), a new name on each replacement,
and the old Job is still deleted first so that two preparations never write one folder. A new
uid also means new wait arguments: the training job is replaced with it and waits for the new run.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from infra.catalog.cloud import Cloud
from infra.catalog.machines import Machine, machine
from infra.contract import GpuCluster
from infra.pod_share import NODE_SHARE, SYSTEM_POOL_SHARE, PrepareSize
from infra.settings.trainer_flags import trainer_flags_in_effect  # the recipe's tables too
from infra.settings.model.dataset import Dataset, DatasetPrepare, MultiHotMode, PreparePool
from infra.settings.model.job import Job
from infra.settings.model.pools import NodePool
from trainer.data.layout import LAYOUT_FILE  # written last by trainer.prepare: present = complete
from trainer.prepare.status import FAILED_FILE, HEARTBEAT_FILE, HEARTBEAT_SECONDS, RUN_ID_ENV
from trainer.exit_codes import CONFIG_ERROR, RESUME
from workloads.names import JobNames
from workloads.pod import (RUN_AS, SHARED_VOLUME, folder_preparer, job_pool, node_affinity,
                           tolerations)
from workloads.watch import on_prepare_pods, prepare_logs_command

core = k8s.core.v1
PREPARE_CONTAINER = "prepare"
POLL_SECONDS = 30
# The label each cloud puts the system pool's name under: infra/aws/node_groups.py and
# infra/gcp/node_pools.py label it torchrec-cloud/pool; AKS labels every node of an agent pool
# kubernetes.azure.com/agentpool=<pool> itself (https://learn.microsoft.com/azure/aks/use-labels,
# "Reserved system labels"), and infra/azure/cluster.py adds none to the system pool.
SYSTEM_POOL_LABEL = {Cloud.AWS: "torchrec-cloud/pool", Cloud.GCP: "torchrec-cloud/pool",
                     Cloud.AZURE: "kubernetes.azure.com/agentpool"}
# Pod-level retries, for what the process cannot retry itself (its own OOM kill, a lost node
# outside a disruption). A rerun skips the days already complete, so a retry costs only the
# unfinished ones. Failures the process sees it retries itself, then exits 1 or 2: final.
RETRIES = 3
FINAL_EXIT_CODES = [1, CONFIG_ERROR]  # trainer/prepare/__main__.py
# The Job's own label on its pods (Kubernetes 1.27+, "batch.kubernetes.io/controller-uid"):
# https://kubernetes.io/docs/reference/labels-annotations-taints/#batchkubernetesiocontroller-uid
CONTROLLER_UID_LABEL = "batch.kubernetes.io/controller-uid"
# A preparation that ends without a verdict (its pod OOM-killed on the last retry, its Job past
# activeDeadlineSeconds, its pod never started) stops its heartbeat (trainer/prepare/status.py,
# every HEARTBEAT_SECONDS). The wait fails when this run's heartbeat has been silent for
# HEARTBEAT_STALE_SECONDS (room for a pod retry's backoff and a node scale-up) or has not
# appeared FIRST_HEARTBEAT_SECONDS after the wait began (room for a GPU node's scale-up and the
# image pull), instead of holding the GPU nodes until the Job's deadline. Those two end the
# wait with RESUME, not counted: a preparation pod with no node (quota, a stock-out, a spot
# reclaim) is capacity trouble, not a configuration error, and the gang waits again (Kueue).
# Only this run's recorded failure (prepare-failed.json) is final: CONFIG_ERROR.
HEARTBEAT_STALE_SECONDS = 30 * 60
FIRST_HEARTBEAT_SECONDS = 60 * 60
# The preparation is resumable and saves nothing on SIGTERM; python as PID 1 ignores SIGTERM,
# so a deleted Job's pod would otherwise run on for the default 30 s beside its replacement.
PREPARE_GRACE_SECONDS = 5
SKIP_AWAIT = {"pulumi.com/skipAwait": "true"}


def output_dir(cluster: GpuCluster, dataset: Dataset) -> str:
    return f"{cluster.shared_file_system.mount_path}/{dataset.path.strip('/')}"


def source(cluster: GpuCluster, prepare: DatasetPrepare) -> str:
    """A bucket URI as given (fsspec reads it with the workload identity), or the folder on the
    shared file system."""
    if "://" in prepare.source:
        return prepare.source
    return f"{cluster.shared_file_system.mount_path}/{prepare.source.strip('/')}"


def materializes_multi_hot(prepare: DatasetPrepare) -> bool:
    return bool(prepare.multi_hot_sizes) and prepare.multi_hot == MultiHotMode.MATERIALIZE


def _join(values: list[int]) -> str:
    return ",".join(str(v) for v in values)


def model_tables(job: Job) -> list[int] | None:
    """The model's num_embeddings_per_feature (job.trainerArgs or its recipe: MLPerf's
    40000000,39060,...), None when it takes layout.json's sizes."""
    tables = trainer_flags_in_effect(job.trainer_args).get("num_embeddings_per_feature")
    return list(tables) if tables else None


def prepare_flags(cluster: GpuCluster, dataset: Dataset, workers: int,
                  tables: list[int] | None = None) -> list[str]:
    """`python -m trainer.prepare` flags (trainer/prepare/README.md); a 0 setting means the program's
    own default, so the flag is left out. ``tables``: the model's table sizes, which the
    preparation hashes the ids into and draws the multi-hot tables with, as MLPerf's
    materialize script does with its --num_embeddings_per_feature (not the data's distinct
    ids + 2, which would give other tables and another random stream)."""
    prepare = dataset.prepare
    flags = [f"--source={source(cluster, prepare)}", f"--output={output_dir(cluster, dataset)}",
             f"--dataset={prepare.format.value}", f"--workers={workers}"]
    if prepare.days:
        flags.append(f"--days={prepare.days}")
    if prepare.frequency_threshold:
        flags.append(f"--frequency_threshold={prepare.frequency_threshold}")
    if prepare.max_ind_range:
        flags.append(f"--max_ind_range={prepare.max_ind_range}")
    if prepare.shuffle:
        flags.append("--shuffle_seed=0")  # the reference's shuffle_preproc_criteo --random_seed 0
    if tables:
        flags.append(f"--num_embeddings_per_feature={_join(tables)}")
    if materializes_multi_hot(prepare):
        assert prepare.multi_hot_sizes is not None
        flags += [f"--multi_hot_sizes={_join(prepare.multi_hot_sizes)}",
                  f"--multi_hot_distribution_type={prepare.multi_hot_distribution.value}"]
    return flags


def trainer_data_flags(dataset: Dataset) -> list[str]:
    """What the trainer needs beyond --dataset_path: table sizes come from layout.json, and
    materialized multi-hot data says so itself; only on-the-fly multi-hot needs its sizes."""
    prepare = dataset.prepare
    if not (prepare.enabled and prepare.multi_hot_sizes) or materializes_multi_hot(prepare):
        return []
    return [f"--multi_hot_sizes={_join(prepare.multi_hot_sizes)}",
            f"--multi_hot_distribution_type={prepare.multi_hot_distribution.value}"]


@dataclass(frozen=True)
class Placement:
    """Where the preparation pod runs and how much of that node it takes."""

    machine: Machine
    share: float
    node_labels: dict[str, str]
    tolerations: list[core.TolerationArgs]

    def size(self, prepare: DatasetPrepare) -> PrepareSize:
        return PrepareSize.of(self.machine, self.share, prepare.cpu, prepare.memory_gib,
                              prepare.workers)


def placement(cluster: GpuCluster, job: Job, prepare: DatasetPrepare,
              system_pool: NodePool | None) -> Placement:
    """gpu: a whole node of the job's GPU pool (no GPU requested); cpu: half a system node."""
    if prepare.pool == PreparePool.GPU:
        pool = job_pool(cluster, job)
        return Placement(pool.machine, NODE_SHARE, dict(pool.node_labels), tolerations(pool))
    if system_pool is None:
        raise ValueError("TrainingJobArgs.system_pool is required for dataset.prepare.pool cpu")
    return Placement(machine(cluster.cloud, system_pool.machine_type), SYSTEM_POOL_SHARE,
                     {SYSTEM_POOL_LABEL[cluster.cloud]: system_pool.name}, [])


def labels(names: JobNames) -> dict[str, str]:
    """Not the trainer's selector: the headless service and the trainers' network policy must
    not pick the preparation pod up (workloads/network_policy.py has its own policy for it)."""
    return {**names.prepare_selector, "app.kubernetes.io/managed-by": "pulumi",
            "app.kubernetes.io/part-of": "torchrec-cloud"}


def _locked_down() -> core.SecurityContextArgs:
    """The trainer's lock-down without the fabric's extras: the preparation needs no RDMA."""
    return core.SecurityContextArgs(
        allow_privilege_escalation=False, privileged=False, read_only_root_filesystem=True,
        run_as_non_root=True, run_as_user=RUN_AS, run_as_group=RUN_AS,
        capabilities=core.CapabilitiesArgs(drop=["ALL"]),
        seccomp_profile=core.SeccompProfileArgs(type="RuntimeDefault"))


def _environment(cluster: GpuCluster) -> list[core.EnvVarArgs]:
    values = {**cluster.preparation.env, "HOME": "/tmp", "PYTHONUNBUFFERED": "1"}
    run_id = core.EnvVarArgs(name=RUN_ID_ENV, value_from=core.EnvVarSourceArgs(
        field_ref=core.ObjectFieldSelectorArgs(
            field_path=f"metadata.labels['{CONTROLLER_UID_LABEL}']")))
    return [*(core.EnvVarArgs(name=k, value=v) for k, v in sorted(values.items())), run_id]


def pod_failure_policy() -> dict[str, object]:
    """Bad arguments, and failures the process has retried already, fail at once; a drained or
    preempted node does not use up the retries."""
    return {"rules": [
        {"action": "FailJob", "onExitCodes": {"containerName": PREPARE_CONTAINER,
                                              "operator": "In", "values": FINAL_EXIT_CODES}},
        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
    ]}


def prepare_job(names: JobNames, cluster: GpuCluster, job: Job, dataset: Dataset,
                system_pool: NodePool | None, opts: pulumi.ResourceOptions) -> k8s.batch.v1.Job:
    """The Job, auto-named `<job>-prepare-<random>` (the module's docstring says why)."""
    prepare = dataset.prepare
    where = placement(cluster, job, prepare, system_pool)
    size = where.size(prepare)
    quantities = {"cpu": str(size.cpu), "memory": f"{size.memory_gib}Gi"}
    mount = cluster.shared_file_system.mount_path
    container = core.ContainerArgs(
        name=PREPARE_CONTAINER,
        image=cluster.trainer_image,
        image_pull_policy="Always",
        command=["python", "-m", "trainer.prepare"],
        args=prepare_flags(cluster, dataset, size.workers, model_tables(job)),
        env=_environment(cluster),
        resources=core.ResourceRequirementsArgs(requests=quantities, limits=quantities),
        security_context=_locked_down(),
        volume_mounts=[core.VolumeMountArgs(name=SHARED_VOLUME, mount_path=mount),
                       core.VolumeMountArgs(name="tmp", mount_path="/tmp")],
    )
    pod = core.PodTemplateSpecArgs(
        metadata=k8s.meta.v1.ObjectMetaArgs(
            labels={**labels(names), **cluster.preparation.pod_labels}),
        spec=core.PodSpecArgs(
            init_containers=[folder_preparer(cluster, [output_dir(cluster, dataset)])],
            containers=[container],
            # Its own account: reads the source bucket, if any; no checkpoint write, no nodes.
            service_account_name=names.prepare_service_account,
            automount_service_account_token=False,
            enable_service_links=False,
            restart_policy="Never",  # required by podFailurePolicy
            termination_grace_period_seconds=PREPARE_GRACE_SECONDS,
            node_selector=where.node_labels,
            tolerations=where.tolerations or None,
            security_context=core.PodSecurityContextArgs(
                run_as_non_root=True, run_as_user=RUN_AS, run_as_group=RUN_AS, fs_group=RUN_AS,
                seccomp_profile=core.SeccompProfileArgs(type="RuntimeDefault")),
            volumes=[
                core.VolumeArgs(name=SHARED_VOLUME, persistent_volume_claim=(
                    core.PersistentVolumeClaimVolumeSourceArgs(claim_name=names.claim))),
                core.VolumeArgs(name="tmp", empty_dir=core.EmptyDirVolumeSourceArgs()),
            ],
        ),
    )
    return k8s.batch.v1.Job(
        names.prepare_job,
        metadata=k8s.meta.v1.ObjectMetaArgs(namespace=names.namespace, labels=labels(names),
                                            annotations=SKIP_AWAIT),
        spec=k8s.batch.v1.JobSpecArgs(
            backoff_limit=RETRIES,
            active_deadline_seconds=prepare.deadline_hours * 3600,
            pod_failure_policy=pod_failure_policy(),
            template=pod,
        ),
        # A Job's pod template is immutable: a changed setting means delete, then create (under
        # a new name); never two preparations writing one folder.
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(
            replace_on_changes=["spec"], delete_before_replace=True)),
    )


# Reads $layout, $failed, $beat (files), $run (the Job's uid), $first and $stale (seconds); ends
# its loop when this run's layout.json exists, exits CONFIG_ERROR on this run's recorded failure
# or a silent heartbeat. `grep -F '"<uid>"'` finds the run id in the JSON trainer.prepare writes;
# `date -r` reads the heartbeat's mtime (GNU coreutils, as in the Ubuntu-based image). The trap
# and `sleep & wait` let the kubelet's SIGTERM end the wait at once (a shell that is PID 1 ignores
# SIGTERM without a handler, and would hold the pod's grace).
WAIT_LOOP = """\
every="${LAYOUT_POLL_SECONDS:-%(poll)d}"; started=$(date +%%s)
trap 'exit 143' TERM INT
while :; do
  if [ -f "$layout" ] && grep -qF "\\"$run\\"" "$layout"; then
    echo "found $layout: the dataset is prepared"; break
  fi
  if [ -f "$failed" ] && grep -qF "\\"$run\\"" "$failed"; then
    echo "dataset preparation failed (its log: %(logs)s):"; cat "$failed"; exit %(fail)d
  fi
  now=$(date +%%s); waited=$(( now - started ))
  if [ -f "$beat" ] && grep -qF "\\"$run\\"" "$beat"; then
    silent=$(( now - $(date -r "$beat" +%%s) ))
    if [ "$silent" -ge "$stale" ]; then
      echo "dataset preparation $run has been silent for $silent s: killed (out of memory?) \
or past dataset.prepare.deadlineHours; its log: %(logs)s"; exit %(again)d
    fi
  elif [ "$waited" -ge "$first" ]; then
    echo "dataset preparation $run has not started after $waited s: its pod is pending or \
fails before it runs (%(describe)s); its log: %(logs)s"; exit %(again)d
  fi
  echo "waiting for $layout: dataset preparation running, waited $waited s; its progress: %(logs)s"
  sleep "$every" & wait $!
done
trap - TERM INT
"""


def wait_loop(names: JobNames) -> str:
    describe = on_prepare_pods(names, "describe pods")
    return WAIT_LOOP % {"poll": POLL_SECONDS, "logs": prepare_logs_command(names),
                        "describe": describe, "fail": CONFIG_ERROR, "again": RESUME}


def _watched_files(cluster: GpuCluster, dataset: Dataset) -> list[str]:
    out = output_dir(cluster, dataset)
    return [f"{out}/{LAYOUT_FILE}", f"{out}/{FAILED_FILE}", f"{out}/{HEARTBEAT_FILE}"]


def waiting_first(command: list[pulumi.Input[str]], cluster: GpuCluster, dataset: Dataset,
                  names: JobNames, run_id: pulumi.Input[str]) -> list[pulumi.Input[str]]:
    """`command` (`/bin/sh -c SCRIPT NAME`, its "$@" the container's args) with the wait run
    first in the same container, for both job kinds: the pod is Ready while it waits (Kueue's
    PodsReady, module docstring), and for the PyTorchJob kind an init container's failure would
    be recreated without end (training-operator v1.9.4 pkg/controller.v1/common/pod.go reads the
    exit code of the main container only, 0xbeef when it never ran, and 0xbeef >= 128 is
    "retryable" under restartPolicy ExitCode), while the main container's exit 2 fails the job."""
    shell, flag, script, *rest = command
    layout, failed, beat = (shlex.quote(f) for f in _watched_files(cluster, dataset))
    inputs = pulumi.Output.concat(
        f"layout={layout}; failed={failed}; beat={beat}; run=", run_id,
        f"; first={FIRST_HEARTBEAT_SECONDS}; stale={HEARTBEAT_STALE_SECONDS}\n")
    return [shell, flag, pulumi.Output.concat(inputs, wait_loop(names), script), *rest]


def job_uid(prepare_job: k8s.batch.v1.Job) -> pulumi.Output[str]:
    return prepare_job.metadata.apply(lambda meta: meta.uid)
