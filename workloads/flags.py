"""The trainer's command line: the user's `trainerArgs` plus the flags the stack owns.

The stack owns where checkpoints, data and metrics live, because only it knows the bucket URI
and the shared file system's mount path, and the figures the catalog knows of the machine; a
user value for one of those flags is refused by the settings, which keep the list
(infra/settings/stack_flags.py).
"""

from __future__ import annotations

from collections.abc import Mapping

import pulumi

from infra.catalog.cloud import Cloud
from infra.catalog.gate_floors import gpu_matmul_floor_tflops
from infra.catalog.machines import (MACHINES, Interconnect as FabricKind, Machine, gpu_hbm_gb_s,
                                    gpu_nvlink_gb_s, inter_host_gb_s_per_gpu)
from infra.cadence import DEFAULT_EVERY_SECONDS, DEFAULT_EVERY_STEPS
from infra.contract import GpuCluster
from infra.preemption import SaveEstimate, StopBudget, object_store_mb_s
from infra.settings.rules import gate_left_out_bound
from infra.settings.stack_flags import WORKLOAD_OWNED_FLAGS
from infra.settings.trainer_flags import format_value  # one rendering, judged by the settings
from infra.settings.model.checkpoints import CheckpointLocation, Checkpoints
from infra.settings.model.dataset import Dataset
from infra.settings.model.interconnect import Interconnect
from infra.settings.model.job import Job, PoolChoice, TrainerArgValue
from infra.telemetry import TELEMETRY_FOLDER  # where the trainer mirrors its metrics
from workloads.pod import job_pool
from workloads.prepare import trainer_data_flags

# Every flag stack_flags, planner_flags and fabric_gate_flags pass; the settings own the list
# (infra/settings/stack_flags.py), so a trainerArgs key the stack would drop is refused there first.
STACK_OWNED: frozenset[str] = frozenset(WORKLOAD_OWNED_FLAGS)
# The gate's message sizes below its judged plateau size: latency-bound and mid sizes, reported.
GATE_SMALLER_SIZES = (1 << 20, 128 << 20)


def user_flags(trainer_args: Mapping[str, TrainerArgValue]) -> list[str]:
    return [f"--{key}={format_value(value)}" for key, value in sorted(trainer_args.items())
            if key not in STACK_OWNED]


def checkpoint_dir(cluster: GpuCluster, checkpoints: Checkpoints, job: Job) -> pulumi.Input[str]:
    """The stack's own job's checkpoint folder (its `checkpoint_dir` output)."""
    return job_checkpoint_dir(cluster.checkpoints.uri, cluster.shared_file_system.mount_path,
                              checkpoints, job.name)


def job_checkpoint_dir(store: pulumi.Input[str], mount: str, checkpoints: Checkpoints,
                       job_name: str) -> pulumi.Input[str]:
    """The job's store in the bucket (workload identity grants access) or its folder on the
    shared file system."""
    if checkpoints.location == CheckpointLocation.OBJECT_STORE:
        return store
    return f"{mount}/checkpoints/{job_name}"


def write_mb_per_sec_per_rank(cloud: Cloud | str, job: Job,
                              save_estimate: SaveEstimate | None) -> float:
    """One rank's share of the checkpoint store's write throughput (infra/preemption.py)."""
    ranks = job.nodes * job.processes_per_node
    total = (save_estimate.mb_per_second if save_estimate is not None
             else object_store_mb_s(cloud, ranks)[0])
    return round(total / ranks, 1)


def _or(value: int | None, default: int) -> int:
    return default if value is None else value


def _concat(*parts: pulumi.Input[str]) -> pulumi.Input[str]:
    """A plain string where every part is one (a submitted job's flags are plain objects)."""
    if all(isinstance(p, str) for p in parts):
        return "".join(parts)  # type: ignore[arg-type]
    return pulumi.Output.concat(*parts)


# The stack-owned flags stack_flags may pass: a submitted job gets each of them from stack_flags
# for its own name, nodes and pool, none from the stack's JobSet (workloads/submitted.py). Not
# listed: the on-the-fly multi-hot flags stack_flags adds from the dataset (trainer_data_flags).
# They are not stack-owned (not in WORKLOAD_OWNED_FLAGS): the settings refuse them in trainerArgs
# only while dataset.prepare.multiHotSizes sets them (prepare_rules.prepare_owns_the_multi_hot_flags),
# so a submitted job gets them from stack_flags for its own dataset and never the stack's copies.
PER_JOB_FLAGS = ("checkpoint_dir", "checkpoint_every", "checkpoint_every_seconds",
                 "keep_checkpoints", "save_deadline_seconds", "checkpoint_write_mb_per_sec",
                 "dataset_path", "metrics_file", "tensorboard_dir", "telemetry_dir")


def stack_flags(job: Job, store: pulumi.Input[str], mount: str, cloud: Cloud | str,
                checkpoints: Checkpoints, dataset: Dataset, budget: StopBudget,
                save_estimate: SaveEstimate | None) -> list[pulumi.Input[str]]:
    """The flags the stack passes one job, from plain per-job values: the job (its name, nodes
    and pool), its store (<bucket>/<job.name>), the cadence in effect for it
    (infra/cadence.checkpoints_in_effect), its pool's stop budget and one save's estimate
    (infra/preemption.estimated_save). The one path for the stack's own job under `pulumi up`
    (trainer_flags) and a job submitted beside it (workloads/submitted.py)."""
    flags: list[pulumi.Input[str]] = []
    if checkpoints.enabled:
        spot = job.pool == PoolChoice.SPOT
        flags += [
            _concat("--checkpoint_dir=", job_checkpoint_dir(store, mount, checkpoints, job.name)),
            # The cadence in effect (infra/cadence.checkpoints_in_effect: derived from the
            # save's time where unset; its defaults where nothing was derived).
            f"--checkpoint_every={_or(checkpoints.every_steps, DEFAULT_EVERY_STEPS)}",
            # On spot a save on SIGTERM may not fit the notice: bound the work a
            # preemption can lose by time as well as by steps.
            "--checkpoint_every_seconds="
            f"{_or(checkpoints.every_seconds, DEFAULT_EVERY_SECONDS) if spot else 0}",
            f"--keep_checkpoints={checkpoints.keep}",
            f"--save_deadline_seconds={budget.save_deadline_seconds}",
            # Until a save in this run is measured, the SIGTERM decision uses the catalog's
            # figure for this store (infra/preemption.py).
            "--checkpoint_write_mb_per_sec="
            f"{write_mb_per_sec_per_rank(cloud, job, save_estimate):g}",
        ]
    if dataset.path:
        flags.append(f"--dataset_path={mount}/{dataset.path.strip('/')}")
        flags += trainer_data_flags(dataset)  # on-the-fly multi-hot sizes, when prepared so
    flags += [
        *run_folder_flags(mount, job.name),
        # A copy in the checkpoint bucket, which a laptop reads with the user's own credentials
        # (the shared file system is mounted in the cluster only); the job's identity may write
        # the whole bucket on every cloud, so the prefix needs no grant of its own.
        _concat("--telemetry_dir=", store, "/", TELEMETRY_FOLDER),
    ]
    return flags


def run_folder_flags(mount: str, job_name: str) -> list[str]:
    """The job's own metrics and TensorBoard folders on the shared file system."""
    return [f"--metrics_file={mount}/runs/{job_name}/metrics.jsonl",
            f"--tensorboard_dir={mount}/runs/{job_name}/tensorboard"]


def planner_flags(cluster: GpuCluster, job: Job, interconnect: Interconnect) -> list[str]:
    """The machine's bandwidths for torchrec's sharding planner (trainer/planning.py), from the
    catalog: HBM and NVLink per GPU where known, the network between nodes per GPU on the path
    NCCL takes (the fabric, or the primary NIC's sockets with interconnect.fabric false; the
    run estimate reads the same figure). Without them the planner costs every machine at its
    defaults (e.g. 12.5 GB/s between hosts)."""
    machine = job_pool(cluster, job).machine
    hbm, nvlink = gpu_hbm_gb_s(machine), gpu_nvlink_gb_s(machine)
    inter_host = inter_host_gb_s_per_gpu(machine, interconnect.fabric)
    return [f"--inter_host_gb_per_sec={inter_host:g}",
            *([f"--hbm_gb_per_sec={hbm:g}"] if hbm else []),
            *([f"--intra_host_gb_per_sec={nvlink:g}"] if nvlink else [])]


def gate_enforced(cluster: GpuCluster, job: Job, interconnect: Interconnect) -> bool:
    """Whether the gate enforces (and so may leave a node out): the fabric is used."""
    return (interconnect.gate and interconnect.fabric
            and job_pool(cluster, job).machine.interconnect != FabricKind.NONE)


def gate_leaves_out(cluster: GpuCluster, job: Job, interconnect: Interconnect) -> bool:
    """Whether the gate may leave a node out (its pods need API access for the taint): on
    every GPU stack with the gate on, fabric or not, since a GPU that fails the health check
    is left out in report mode too (trainer/fabric_gate.py)."""
    return interconnect.gate and job_pool(cluster, job).machine.gpu_count > 0


def fabric_gate_flags(cluster: GpuCluster, job: Job, interconnect: Interconnect) -> list[str]:
    """Enforce the machine's transport, fabric NIC count, NCCL version, GPU matmul
    floor and, across nodes, the all_reduce and all_to_all floors for this node count at their
    plateau size, when the stack uses its fabric; otherwise only report (CPU/gloo or sockets
    have no floor)."""
    if not interconnect.gate:
        return ["--fabric_gate=off"]
    machine = job_pool(cluster, job).machine
    matmul = gpu_matmul_floor_tflops(machine)
    if not gate_enforced(cluster, job, interconnect):
        # GPU health only: a bad GPU's node is left out on a stack without a fabric too.
        return ["--fabric_gate=report", *gang_gate_flags(machine, job.nodes, enforced=False),
                *([f"--gpu_matmul_floor_tflops={matmul:g}"] if matmul else [])]
    rails = cluster.interconnect.fabric_rails
    # The NCCL of the image this program builds; a job.image of the user's brings its own torch
    # and NCCL, which the gate cannot know.
    nccl = "" if job.image else cluster.interconnect.nccl_version
    flags = ["--fabric_gate=enforce", f"--fabric_transport={machine.fabric_transport}",
             *([f"--fabric_rails={rails}"] if rails else []),
             *([f"--fabric_nccl_version={nccl}"] if nccl else []),
             *([f"--gpu_matmul_floor_tflops={matmul:g}"] if matmul else [])]
    return [*flags, *gang_gate_flags(machine, job.nodes)]


def gang_gate_flags(machine: Machine, nodes: int, enforced: bool = True) -> list[str]:
    """The bound on nodes left out and, where the gate enforces across nodes, the floors for
    this node count at their plateau size (one node: NVLink only, no fabric floor applies)."""
    # When bandwidth misses the floor and no node stands out, the gate leaves out the whole
    # gang: the bound must allow that, or a 3+ node gang would fail for good at once.
    flags = [f"--fabric_max_nodes_left_out={gate_left_out_bound(nodes)}"]
    if not enforced or nodes < 2:
        return flags
    floor = machine.fabric_floor(nodes)  # infra/catalog/gate_floors.py: each floor with its source
    sizes = ",".join(str(s) for s in (*GATE_SMALLER_SIZES, floor.size))
    return [*flags, f"--fabric_gate_sizes={sizes}",
            f"--fabric_floor_gbps={floor.all_reduce_gbps:g}",
            f"--fabric_all_to_all_floor_gbps={floor.all_to_all_gbps:g}"]


def gang_gate_flag_names() -> frozenset[str]:
    """Every flag gang_gate_flags can pass, asked of gang_gate_flags itself (each catalog GPU
    machine, one node and more, enforced or not): the flags that follow the node count, which a
    submitted job of another size gets anew (workloads/submitted.py) while it keeps the rest of
    the gate's flags as the stack has them. No second list: a new per-size flag is one here."""
    return frozenset(
        flag[2:].split("=", 1)[0]
        for machine in MACHINES if machine.has_gpus and machine.interconnect != FabricKind.NONE
        for nodes in (1, 2, 3) for enforced in (True, False)
        for flag in gang_gate_flags(machine, nodes, enforced))


def trainer_flags(cluster: GpuCluster, job: Job, checkpoints: Checkpoints, dataset: Dataset,
                  budget: StopBudget, save_estimate: SaveEstimate | None,
                  interconnect: Interconnect) -> list[pulumi.Input[str]]:
    """User flags first, then the stack's (argparse keeps the last value of a repeated flag)."""
    return [*user_flags(job.trainer_args),
            *stack_flags(job, cluster.checkpoints.uri, cluster.shared_file_system.mount_path,
                         cluster.cloud, checkpoints, dataset, budget, save_estimate),
            *planner_flags(cluster, job, interconnect),
            *fabric_gate_flags(cluster, job, interconnect)]
