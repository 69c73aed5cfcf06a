"""`python -m torchrec_cloud plan`: the sizing advisor. Plans a table set on a cloud machine
offline (CPU, tables on the meta device, no GPU) with torchrec's own planner, told the
machine's topology from infra/catalog/machines.py, and prints the whole time-to-train before it is paid
for: per step embeddings, dense layers, input; per run evaluations, checkpoints, start-up,
preparation, a spot preemption's cost, and hours and dollars to MLPerf's target.

    python -m torchrec_cloud plan --tables mlperf --cloud aws --machine p5.48xlarge --nodes 2
    python -m torchrec_cloud plan --tables mlperf            # the cheapest fit per cloud

The trainer's flags are those of --recipe (mlperf: exact Adagrad, fp32 matmuls) under any
--trainer_args given; the file system is the one of the cloud's stack file (Pulumi.<cloud>.yaml)
unless --read_mb_s says otherwise. Where the file system cannot feed the GPUs, the advisor says
which setting to change and assumes it changed (said so in its output).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional, Sequence

from torchrec_cloud import time_to_train as ttt
from torchrec_cloud.file_systems import FileSystem, faster_file_system, file_system

GB = 1e9
GIB = 1 << 30
NODE_COUNTS = (1, 2, 4, 8)
# Input may add at most this share of the GPU-bound step before the advisor asks for a faster
# file system (the loader reads ahead: within it, reading is hidden).
INPUT_HIDDEN = 1.0


def hardware_of(machine: Any, nodes: int, fabric: bool = True) -> Any:
    """planning.Hardware of ``nodes`` catalog machines, one rank per GPU, the network between
    them over the fabric (the stack's default, interconnect.fabric) or plain sockets."""
    from infra.catalog.machines import gpu_hbm_gb_s, gpu_nvlink_gb_s, inter_host_gb_s_per_gpu
    from trainer.planning import Hardware

    gpus = machine.gpu_count
    return Hardware(world_size=gpus * nodes, local_world_size=gpus, compute_device="cuda",
                    hbm_bytes=int(machine.gpu_memory_gib * GIB),
                    ddr_bytes=int(machine.memory_gib * GIB) // gpus,
                    hbm_gb_per_sec=gpu_hbm_gb_s(machine),
                    intra_host_gb_per_sec=gpu_nvlink_gb_s(machine),
                    inter_host_gb_per_sec=inter_host_gb_s_per_gpu(machine, fabric))


def recipe_flags(recipe: str, trainer_args: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """The trainer's flags in effect for ``--recipe`` under ``trainer_args``, read as the pod's
    trainer reads them (infra/settings/trainer_flags.py)."""
    from infra.settings.trainer_flags import trainer_flags_in_effect

    given = {"recipe": recipe} if recipe else {}
    return trainer_flags_in_effect({**given, **(trainer_args or {})})


@dataclass
class Advice:
    """One table set on one machine type and node count, with its time-to-train."""

    machine: str
    cloud: str
    nodes: int
    ranks: int
    optimizer: str
    tf32: bool
    data_form: str
    sharding: Dict[str, str]  # table -> sharding type
    hbm_gib: List[float]  # per rank, the planner's storage estimate
    ddr_gib: List[float]
    checkpoint_gb: float
    fullest_rank_gb: float
    save_seconds: float
    load_seconds: float
    spot_save_deadline_seconds: int
    usd_per_hour: float
    spot_usd_per_hour: float
    epoch: ttt.Epoch
    file_system: FileSystem
    shipped_file_system: FileSystem  # the stack file's (the same where it feeds the GPUs)
    shipped_step: ttt.Step
    # the cadence the stack derives for this job (infra/cadence.py: the same save estimate,
    # at the stack's planned steps per second): --checkpoint_every, and on spot also a save
    # every checkpoint_every_seconds
    checkpoint_every_steps: int
    checkpoint_every_seconds: int
    stack_steps_per_second: Optional[float]  # the stack's planned rate the cadence is sized at
    node_start_seconds: float
    readers: int  # reader processes a rank (trainer/data/loader.py) drawing multi-hot ids
    multi_hot_tables_seconds: float  # drawn at each pod's start when on the fly; else 0
    prepare: Dict[str, float]
    epochs_to_target: float
    compare: Dict[str, float] = field(default_factory=dict)  # other rules' step estimates

    @property
    def fits_spot_notice(self) -> bool:
        return self.save_seconds <= self.spot_save_deadline_seconds

    @property
    def gpu_bound_hours(self) -> float:
        """Embeddings and dense layers to the target, nothing else."""
        return self.epochs_to_target * self.epoch.gpu_seconds / 3600

    @property
    def training_hours(self) -> float:
        """Training to the target with its input, evaluations and checkpoints."""
        return self.epochs_to_target * self.epoch.seconds / 3600

    @property
    def prepare_hours(self) -> float:
        return sum(self.prepare.values())

    @property
    def start_seconds(self) -> float:
        """A pod's start: its node (image pull included), then the multi-hot lookup tables
        where the ids are drawn on the fly."""
        return self.node_start_seconds + self.multi_hot_tables_seconds

    @property
    def spot_interval_seconds(self) -> float:
        """Seconds between saves on spot: by steps, or by time where that comes first."""
        return min(self.epoch.checkpoint_interval_seconds, float(self.checkpoint_every_seconds))

    @property
    def preemption_hours(self) -> float:
        return ttt.preemption_loss_seconds(self.spot_interval_seconds, self.start_seconds,
                                           self.load_seconds) / 3600

    @property
    def run_hours(self) -> float:
        """Start-up, training to the target, then the final save (preparation apart: done
        once, reused)."""
        return (self.start_seconds + self.save_seconds) / 3600 + self.training_hours

    def usd(self, spot: bool = False) -> float:
        return self.run_hours * (self.spot_usd_per_hour if spot else self.usd_per_hour)

    def prepare_usd(self, spot: bool = False) -> float:
        """The preparation on one GPU node of the pool (dataset.prepare.pool gpu) while the
        job's nodes wait for its layout.json, as the stack runs it (infra/estimate.py)."""
        per_node = (self.spot_usd_per_hour if spot else self.usd_per_hour) / self.nodes
        return self.prepare_hours * per_node * (self.nodes + 1)


def advise(tables: Any, cloud: str, machine_name: str, nodes: int, recipe: str = "mlperf",
           trainer_args: Optional[Dict[str, Any]] = None, data_form: str = "on-the-fly",
           read_mb_s: Optional[float] = None, compare: bool = True,
           debug: bool = False) -> Advice:
    """Plan ``tables`` on ``nodes`` x ``machine_name`` and work out memory, the time-to-train
    part by part, and cost. Raises torchrec's PlannerError when the tables do not fit."""
    from infra.catalog.machines import (inter_host_gb_s_per_gpu, gpu_nvlink_gb_s,
                                        machine as catalog_machine)
    from infra.catalog.planning import (GPU_SORT_KEYS_PER_S, HOST_STAGING_GB_S,
                                        MULTI_HOT_EXPAND_MS_PER_SAMPLE)
    from infra.throughput import dense_macs_per_sample
    from infra.preemption import object_store_save, stop_budget
    from trainer import offline_plan, planning
    from trainer.data.loader import multi_hot_readers
    from trainer.prepare import (CRITEO_1TB_ROWS, CRITEO_1TB_TRAINING_ROWS,
                                 MULTI_HOT_TABLE_IDS_PER_SECOND, PERMUTATION_SECONDS_PER_ROW,
                                 WRITE_MULTI_HOT_ROWS_PER_SECOND, default_workers, estimated_hours)

    flags = recipe_flags(recipe, trainer_args)
    optimizer = str(flags["optimizer"])
    tf32 = str(flags["tf32"]) == "on"
    max_mb = float(flags["data_parallel_max_mb"])
    dense = dict(dense_arch_layer_sizes=list(flags["dense_arch_layer_sizes"]),
                 over_arch_layer_sizes=list(flags["over_arch_layer_sizes"]),
                 interaction=str(flags["interaction"]), dcn_num_layers=int(flags["dcn_num_layers"]),
                 dcn_low_rank_dim=int(flags["dcn_low_rank_dim"]))
    global_batch = int(flags.get("global_batch_size") or 0)
    m = catalog_machine(cloud, machine_name)
    hw = hardware_of(m, nodes)
    ranks = hw.world_size
    global_batch = global_batch or int(flags["batch_size"]) * ranks
    if global_batch % ranks:
        raise ValueError(f"global batch {global_batch} does not divide over {ranks} ranks")
    batch = global_batch // ranks
    plan = offline_plan.offline_plan(tables, hw, batch, optimizer, max_mb, dense, debug)
    others = {}
    if compare:
        for rule in ("sharded", "free"):
            try:
                done, _ = offline_plan.run_planner(tables, hw, batch, optimizer, rule, max_mb, dense)
                others[rule] = planning.step_estimate_ms(done._best_plan, ranks)
            except Exception:  # noqa: BLE001 (a rule that does not fit has no estimate)
                others[rule] = float("nan")

    # Per step: embeddings (planner), dense (rated FLOPs), all-reduce, input.
    macs = dense_macs_per_sample(tables.dim, dense["dense_arch_layer_sizes"],
                                 dense["over_arch_layer_sizes"], dense["interaction"],
                                 dense["dcn_num_layers"], dense["dcn_low_rank_dim"])
    assert m.gpu is not None, f"{m.name} has no GPUs"  # hardware_of divided by its GPUs already
    tflops = m.gpu.tf32_dense_tflops if tf32 else m.gpu.fp32_dense_tflops
    link = inter_host_gb_s_per_gpu(m, True) if nodes > 1 else (gpu_nvlink_gb_s(m) or 0.0)
    multi_hot = list(flags.get("multi_hot_sizes") or [])
    bytes_per_sample = (ttt.materialized_bytes(multi_hot) if data_form == "materialized"
                        and multi_hot else ttt.ONE_HOT_BYTES)
    fs = (FileSystem(read_mb_s, read_mb_s, f"{read_mb_s:g} MB/s (--read_mb_s)")
          if read_mb_s else file_system(cloud))
    # Multi-hot drawn on the fly costs CPU per batch, on the readers the trainer gives a rank
    # of this machine (trainer/data/loader.py); materialized ids are read, not drawn.
    readers = multi_hot_readers(m.vcpus // m.gpu_count) if m.gpu_count else 0
    expand_ms = (ttt.expand_step_ms(batch, MULTI_HOT_EXPAND_MS_PER_SAMPLE, readers)
                 if multi_hot and data_form != "materialized" else 0.0)

    def step_with(fs_now: FileSystem) -> ttt.Step:
        return ttt.Step(embeddings_ms=plan.step_ms,
                        dense_ms=ttt.dense_step_ms(batch, macs, tflops),
                        all_reduce_ms=ttt.all_reduce_ms(plan.dense_parameters, ranks, link),
                        read_ms=ttt.input_step_ms(bytes_per_sample, global_batch,
                                                  fs_now.read_mb_s),
                        expand_ms=expand_ms, readers=readers)

    step = step_with(fs)
    shipped = (fs, step)
    # Only the read is the file system's to shorten: the expansion is the readers' CPU.
    if not read_mb_s and step.read_ms > step.gpu_ms * INPUT_HIDDEN:
        need = bytes_per_sample * global_batch / (step.gpu_ms * INPUT_HIDDEN / 1e3) / 1e6
        fs = faster_file_system(cloud, need)
        step = step_with(fs)

    # Checkpoints: timed as the stack times them (infra/preemption.py: the whole checkpoint at
    # the store's rate, the fullest rank at one stream's), staged to host memory first (the
    # stall); read back the same way on a resume; saved at the cadence the stack derives.
    fullest = plan.fullest_rank_bytes
    save = object_store_save(cloud, ranks, plan.checkpoint_bytes, fullest).seconds
    stall = fullest / (HOST_STAGING_GB_S * 1e9)
    stack = stack_cadence(cloud, m.name, nodes, recipe, trainer_args, m.gpu_count)
    step_s = (step.gpu_ms + step.input_extra_ms) / 1e3

    # Evaluations: the validation set's forward passes (embeddings forward, a third of the
    # dense work) every 1/evals_per_epoch epoch, and the exact AUC on the GPU. Its batches are
    # drawn by the same readers, ahead: a batch takes the longer of its forward and its draw.
    evals = int(flags.get("evals_per_epoch") or 0)
    eval_steps = math.ceil(ttt.VALIDATION_SAMPLES / global_batch)
    forward_ms = max(plan.forward_ms + step.dense_ms / 3, expand_ms)
    auc = ttt.auc_seconds(ttt.VALIDATION_SAMPLES, GPU_SORT_KEYS_PER_S, link or 1.0)
    one_eval = eval_steps * forward_ms / 1e3 + auc
    validation_read = ttt.VALIDATION_SAMPLES * bytes_per_sample / (fs.read_mb_s * 1e6) if evals else 0.0

    epoch = ttt.Epoch(steps=ttt.steps_per_epoch(global_batch), step=step, evaluations=evals,
                      evaluation_seconds=one_eval, auc_seconds=auc,
                      first_validation_read_seconds=validation_read,
                      checkpoint_interval_seconds=stack.every_steps * step_s,
                      checkpoint_save_seconds=save, checkpoint_stall_seconds=stall)

    # Preparation (once per data set) on one GPU node of the machine: 24 days. MLPerf's
    # lookup tables: drawn once there when materialized, at each pod's start when on the fly.
    workers = default_workers(m.vcpus, int(m.memory_gib))
    materialize = data_form == "materialized" and bool(multi_hot)
    tables_seconds = (ttt.multi_hot_tables_seconds(list(tables.rows), multi_hot,
                                                   MULTI_HOT_TABLE_IDS_PER_SECOND)
                      if multi_hot else 0.0)
    prepare = ttt.prepare_hours(
        CRITEO_1TB_ROWS, CRITEO_1TB_TRAINING_ROWS,
        ttt.ONE_HOT_BYTES, fs.read_mb_s, fs.write_mb_s,
        WRITE_MULTI_HOT_ROWS_PER_SECOND if materialize else None,
        estimated_hours(CRITEO_1TB_ROWS, 24, workers, False), PERMUTATION_SECONDS_PER_ROW,
        tables_seconds)

    return Advice(
        machine=m.name, cloud=m.cloud.value, nodes=nodes, ranks=ranks, optimizer=optimizer,
        tf32=tf32, data_form="materialized" if materialize else "on-the-fly",
        sharding=plan.sharding,
        hbm_gib=[r.hbm_bytes / GIB for r in plan.ranks],
        ddr_gib=[r.ddr_bytes / GIB for r in plan.ranks],
        checkpoint_gb=plan.checkpoint_bytes / GB, fullest_rank_gb=fullest / GB,
        save_seconds=save, load_seconds=save,
        spot_save_deadline_seconds=stop_budget(cloud, spot=True,
                                               planned_grace_seconds=0).save_deadline_seconds,
        usd_per_hour=m.on_demand_usd_per_hour * nodes,
        spot_usd_per_hour=m.spot_usd_per_hour * nodes,
        epoch=epoch, file_system=fs, shipped_file_system=shipped[0], shipped_step=shipped[1],
        checkpoint_every_steps=stack.every_steps, checkpoint_every_seconds=stack.every_seconds,
        stack_steps_per_second=stack.steps_per_second,
        node_start_seconds=m.node_ready_minutes * 60.0, readers=readers,
        multi_hot_tables_seconds=0.0 if materialize else tables_seconds,
        prepare=prepare, epochs_to_target=ttt.epochs_to_target(), compare=others)


def stack_cadence(cloud: str, machine_name: str, nodes: int, recipe: str,
                  trainer_args: Optional[Dict[str, Any]], gpus: int) -> Any:
    """The checkpoint cadence the stack derives for this job (infra/cadence.py cadence) on
    stack_settings."""
    from infra.cadence import cadence

    return cadence(stack_settings(cloud, machine_name, nodes, recipe, trainer_args, gpus))


def stack_settings(cloud: str, machine_name: str, nodes: int, recipe: str,
                   trainer_args: Optional[Dict[str, Any]], gpus: int,
                   overrides: Optional[Dict[str, Any]] = None) -> Any:
    """The settings the stack would run this job with: the
    cloud's stack file with its GPU pools on ``machine_name`` and its job on ``nodes`` nodes
    running ``recipe`` under ``trainer_args`` over the machine's fabric, the cadence left to be
    derived; ``overrides`` (sections) over it."""
    import yaml

    from infra.settings.loader import PLACEHOLDERS, with_cloud_defaults
    from infra.settings.model.stack_file import Settings
    from torchrec_cloud.file_systems import ROOT

    data = yaml.safe_load((ROOT / f"Pulumi.{cloud}.yaml").read_text()) or {}
    raw = {k.split(":", 1)[1]: v for k, v in (data.get("config") or {}).items()
           if k.startswith("torchrec-cloud:")}
    pool = {"machineType": machine_name, "minNodes": 0, "desiredNodes": 0, "maxNodes": nodes}
    raw["gpuPools"] = {"onDemand": pool, "spot": dict(pool)}
    raw["job"] = {**(raw.get("job") or {}), "nodes": nodes, "processesPerNode": gpus,
                  "pool": "onDemand",
                  "trainerArgs": {**({"recipe": recipe} if recipe else {}),
                                  **(trainer_args or {})}}
    # over the fabric, as the advisor plans (hardware_of): the stack then times the step the
    # advisor does (infra/estimate.py planned_step), one rate for both
    raw["interconnect"] = {**(raw.get("interconnect") or {}), "fabric": True}
    checkpoints = dict(raw.get("checkpoints") or {})
    checkpoints.pop("everySteps", None)
    checkpoints.pop("everySeconds", None)
    raw["checkpoints"] = checkpoints
    for (section, key), value in PLACEHOLDERS.items():  # the user's own, unknown here
        raw[str(section)] = {str(key): value, **(raw.get(str(section)) or {})}
    for section, values in (overrides or {}).items():
        raw[section] = {**(raw.get(section) or {}), **values}
    return Settings.model_validate(with_cloud_defaults(raw))


def recommend(tables: Any, recipe: str = "mlperf", **kwargs: Any) -> Dict[str, Advice]:
    """Per cloud, the GPU machine and node count (of NODE_COUNTS) that fits with the fewest
    dollars to the target."""
    from torchrec.distributed.planner.types import PlannerError

    from infra.catalog.machines import MACHINES

    best: Dict[str, Advice] = {}
    for m in MACHINES:
        if not m.has_gpus:
            continue
        for nodes in NODE_COUNTS:
            try:
                advice = advise(tables, m.cloud.value, m.name, nodes, recipe, compare=False,
                                **kwargs)
            except (PlannerError, ValueError, KeyError):
                continue  # does not fit (more nodes may), or no rated throughput for its GPU
            if m.cloud.value not in best or advice.usd() < best[m.cloud.value].usd():
                best[m.cloud.value] = advice
            break  # more nodes of this machine: faster, but not cheaper here
    return best


def _h(seconds: float) -> str:
    return f"{seconds / 3600:.2f} h"


def render(a: Advice, tables: Any) -> str:
    """The advisor's report: one line per part, then the totals."""
    kinds: Dict[str, int] = {}
    for kind in a.sharding.values():
        kinds[kind] = kinds.get(kind, 0) + 1
    e, s = a.epoch, a.epoch.step
    target = a.epochs_to_target
    lines = [
        f"{tables.name} tables on {a.nodes} x {a.machine} ({a.cloud}, {a.ranks} GPUs), "
        f"{a.optimizer}, {'TF32' if a.tf32 else 'fp32'} matmuls, {a.data_form} multi-hot",
        "  plan: " + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())),
        f"  HBM per rank (planner): max {max(a.hbm_gib):.1f} GiB, mean "
        f"{sum(a.hbm_gib) / len(a.hbm_gib):.1f} GiB; host memory per rank: max "
        f"{max(a.ddr_gib):.1f} GiB",
    ]
    if a.compare:
        lines.append("  embedding step, other rules: " + ", ".join(
            f"{rule} {ms:.2f} ms" for rule, ms in a.compare.items())
            + " (sharded = no data-parallel tables; free = the planner's unconstrained choice)")
    lines += [
        f"  checkpoint: {a.checkpoint_gb:.1f} GB; fullest rank {a.fullest_rank_gb:.1f} GB, "
        f"written to the object store in about {a.save_seconds:.0f} s against a "
        f"{a.spot_save_deadline_seconds} s "
        "spot save deadline: " + ("fits" if a.fits_spot_notice
                                 else "does not fit (a preemption loses work since the last save)"),
        f"  per step ({e.steps:,} steps an epoch):",
        f"    embeddings   {s.embeddings_ms:6.2f} ms  the planner's estimate, slowest rank",
        f"    dense        {s.dense_ms:6.2f} ms  forward + backward at the rated "
        f"{'TF32' if a.tf32 else 'FP32'} throughput; all-reduce {s.all_reduce_ms:.2f} ms, "
        f"{s.exposed_all_reduce_ms:.2f} ms not hidden by the backward",
        f"    input        {s.input_ms:6.2f} ms  {a.data_form} data at {a.file_system.read_mb_s:,.0f} "
        f"MB/s ({a.file_system.what})"
        + (f", multi-hot drawn by {a.readers} readers a rank in {s.expand_ms:.2f} ms"
           if s.expand_ms else "")
        + f", read ahead: adds {s.input_extra_ms:.2f} ms",
    ]
    if a.file_system.change:
        old = a.shipped_step
        extra = e.steps * old.input_extra_ms / 1e3
        lines.append(f"    assumed: {a.file_system.change}; the stack file's "
                     f"{a.shipped_file_system.what} reads {a.shipped_file_system.read_mb_s:,.0f} "
                     f"MB/s: {old.input_ms:.2f} ms a step, +{_h(extra)} an epoch "
                     f"(+{100 * extra / e.gpu_seconds:.0f}% over GPU-bound)")
    planned = (f" at its planned {a.stack_steps_per_second:,.0f} steps/s"
               if a.stack_steps_per_second else "")
    lines.append(
        f"  checkpoints: every {a.checkpoint_every_steps:,} steps (the stack's derived "
        f"checkpoints.everySteps{planned}; on spot also every {a.checkpoint_every_seconds:,} s), "
        f"about {e.checkpoint_interval_seconds:.0f} s at this step: a save is written "
        f"{min(1.0, a.save_seconds / e.checkpoint_interval_seconds):.0%} of the time; one due "
        "while another is written is skipped")
    lines += [
        f"  one epoch: GPU-bound {_h(e.gpu_seconds)} (embeddings + dense), input "
        f"+{_h(e.input_seconds)}, evaluation +{_h(e.eval_seconds)} ({e.evaluations} x "
        f"{e.evaluation_seconds:.1f} s, AUC {e.auc_seconds:.2f} s each on the GPU), checkpoints "
        f"+{_h(e.checkpoint_seconds)} ({e.checkpoint_stall_seconds:.1f} s stall each) = "
        f"{_h(e.seconds)}, "
        f"+{100 * e.overhead:.0f}% over GPU-bound",
        f"  to the target (AUC 0.80275 at {target} epoch, MLPerf's reference runs): GPU-bound "
        f"{a.gpu_bound_hours:.2f} h, training {a.training_hours:.2f} h",
        f"  start-up: up to {_h(a.node_start_seconds)} node start (image pull included)"
        + (f", then the multi-hot lookup tables drawn on each node in {_h(a.multi_hot_tables_seconds)}"
           if a.multi_hot_tables_seconds else "")
        + f"; a resume loads the checkpoint in about {a.load_seconds:.0f} s; the final save "
        f"after the target {a.save_seconds:.0f} s",
        f"  preparation (once, on one {a.machine} of the GPU pool): "
        + ", ".join(f"{k} {v:.2f} h" for k, v in a.prepare.items())
        + f" = {a.prepare_hours:.2f} h",
        f"  spot preemption: about {a.preemption_hours:.2f} h lost each (half a checkpoint "
        "interval, a new pod's start, the load)",
        f"  cost of the GPU nodes: ${a.usd_per_hour:,.2f}/h on demand (${a.spot_usd_per_hour:,.2f}/h "
        "spot); to "
        f"the target {a.run_hours:.2f} h with start-up and the final save: ${a.usd():,.0f} on demand "
        f"(${a.usd(spot=True):,.0f} spot, before preemptions); preparation ${a.prepare_usd():,.0f}",
    ]
    return "\n".join(lines)


def _json(a: Advice) -> Dict[str, Any]:
    out = asdict(a)
    out["epoch"].update(gpu_seconds=a.epoch.gpu_seconds, seconds=a.epoch.seconds,
                        overhead=a.epoch.overhead)
    out.update(start_seconds=a.start_seconds, gpu_bound_hours=a.gpu_bound_hours, training_hours=a.training_hours,
               prepare_hours=a.prepare_hours, run_hours=a.run_hours, usd=a.usd(),
               spot_usd=a.usd(spot=True), preemption_hours=a.preemption_hours)
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tables", default="mlperf",
                        help="mlperf (multi-hot), criteo (one-hot, frequency threshold 3) or a "
                             "path to a layout.json")
    parser.add_argument("--recipe", default="mlperf",
                        help="the trainer recipe whose flags are planned ('' for the defaults)")
    parser.add_argument("--trainer_args", default="{}",
                        help='trainer flags over the recipe\'s, as JSON: \'{"tf32": "on"}\'')
    parser.add_argument("--cloud", choices=("aws", "azure", "gcp"))
    parser.add_argument("--machine", help="a GPU machine of infra/catalog/machines.py")
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--embedding_dim", type=int,
                        help="the tables' width (default: the recipe's, or the trainer's)")
    parser.add_argument("--data", choices=("on-the-fly", "materialized"), default="on-the-fly",
                        help="multi-hot ids drawn by the trainer (one-hot on disk) or read")
    parser.add_argument("--read_mb_s", type=float,
                        help="the shared file system's read throughput (default: the stack file's)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")


def run(args: argparse.Namespace) -> int:
    # torchrec's planner chatter, silenced for this command only: the process-wide switch is
    # put back, or whatever runs next in the same process (a test) would log nothing.
    previous = logging.root.manager.disable
    logging.disable(logging.WARNING)
    try:
        return _run(args)
    finally:
        logging.disable(previous)


def _run(args: argparse.Namespace) -> int:
    from trainer.sizing import table_set

    trainer_args = json.loads(args.trainer_args)
    if args.embedding_dim:
        trainer_args["embedding_dim"] = args.embedding_dim
    dim = int(recipe_flags(args.recipe, trainer_args)["embedding_dim"])
    if args.tables.endswith(".json"):
        with open(args.tables) as fh:
            tables = table_set("layout", dim, json.load(fh))
    else:
        tables = table_set(args.tables, dim)
    options = dict(trainer_args=trainer_args, data_form=args.data, read_mb_s=args.read_mb_s)
    if args.machine:
        if not args.cloud:
            raise SystemExit("plan: --machine needs --cloud")
        results = {args.cloud: advise(tables, args.cloud, args.machine, args.nodes, args.recipe,
                                      **options)}
    else:
        results = recommend(tables, args.recipe, **options)
    if args.json:
        print(json.dumps({cloud: _json(a) for cloud, a in results.items()}, indent=1, default=str))
    else:
        print("\n\n".join(render(a, tables) for a in results.values()))
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="torchrec-cloud plan")
    add_arguments(parser)
    return run(parser.parse_args(argv))
