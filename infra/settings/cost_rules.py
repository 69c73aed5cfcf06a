"""The rules that need a price or a size estimate: a checkpoint save against the spot notice,
the tables against GPU memory, the file system against the GPUs' reading, the spend ceiling.

They sit above the figures they use (infra/estimate.py prices, infra/preemption.py checkpoint
sizes), which themselves read the settings and the shared rules (infra/settings/rules.py): so the
figures never import a rule that imports them back. infra/settings/all_rules.py collects these
with the shared ones into the one list `check_all` runs.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from infra.cadence import SAVE_SHARE, cadence
from infra.catalog.cloud import Cloud
from infra.catalog.machines import find_machine
from infra.catalog.storage import fsx_persistent_2_for
from infra.estimate import job_hourly_usd, job_most_hourly, spot_most_usd_per_hour
from infra.throughput import planned_throughput
from infra.preemption import (TABLE_FLAGS, estimated_save, largest_rank_bytes,
                              shared_file_system_mb_s, stop_budget)
from infra.settings.errors import Problem, set_command
from infra.settings.model.job import PoolChoice
from infra.settings.model.shared_file_system import FsxLustre
from infra.settings.model.stack_file import Settings
from infra.settings.prepare_rules import _training_rows
from infra.settings.rules import Rule
from infra.settings.trainer_flags import parsed_trainer_args
from trainer.prepare import read_bytes_per_sample


def spot_save_fits_the_notice(s: Settings, node_version: str | None = None
                              ) -> Iterator[Problem]:
    """On spot, one checkpoint save (every byte over the store's write throughput, and the
    fullest rank's bytes under the trainer's sharding rule, trainer/sizing.py, over one
    stream's, infra/catalog/storage.py) must fit the trainer's save deadline inside the cloud's notice.

    `node_version`: the version the job's nodes run, where the cloud knows it and it decides the
    notice (GKE: infra/gcp/component.py checks again with the value the job's stop budget
    uses); without it, kubernetes.version, a minor, which counts as its newest build."""
    if s.job.pool != PoolChoice.SPOT or not s.checkpoints.enabled or _table_args(s) is None:
        return
    estimate = estimated_save(s)
    budget = stop_budget(s.cloud, True, s.job.termination_grace_seconds,
                         node_version or s.kubernetes.version)
    if estimate.seconds <= budget.save_deadline_seconds or s.checkpoints.accept_preemption_loss:
        return  # accepted: `check` prints what a preemption may lose (infra/cadence.py)
    yield Problem(
        "job.trainerArgs", f"{gb(estimate.bytes)} of tables and optimizer state",
        f"one checkpoint save takes about {estimate.seconds:.0f} s (the fullest rank writes "
        f"{gb(estimate.largest_rank_bytes)}; {estimate.store}, "
        f"{estimate.mb_per_second:,.0f} MB/s) but a {s.cloud.value} spot node's "
        f"{budget.notice.notice_seconds} s notice leaves the trainer "
        f"{budget.save_deadline_seconds} s; use smaller tables, more nodes "
        "(job.nodes: each node writes its share), faster checkpoint storage "
        "(checkpoints.location / the shared file system's throughput), or job.pool: onDemand; "
        "or accept that a preemption loses up to one checkpoint interval (checkpoints."
        "everySeconds; `make check` prints it): "
        f"`{set_command('checkpoints.acceptPreemptionLoss', 'true')}`")




def checkpoint_cadence_leaves_training_its_time(s: Settings) -> Iterator[Problem]:
    """A cadence set by hand must leave at least one save's time / SAVE_SHARE between saves
    (infra/cadence.py): shorter, saves are written back to back beside training, and the
    trainer skips each one due while the previous is still written."""
    c = s.checkpoints
    if not c.enabled or (c.every_steps is None and c.every_seconds is None) \
            or _table_args(s) is None:
        return
    found = cadence(s)
    save = (f"one save takes ~{found.save_seconds:,.0f} s ({gb(found.save.bytes)}, the fullest "
            f"rank {gb(found.save.largest_rank_bytes)}; {found.save.store})")
    least_steps = found.least_steps()
    if c.every_steps is not None and least_steps is not None and c.every_steps < least_steps:
        interval = c.every_steps / (found.steps_per_second or 1)
        yield Problem(
            "checkpoints.everySteps", c.every_steps,
            f"{save}; at the planned {found.steps_per_second:,.1f} steps/s, {c.every_steps:,} "
            f"steps leave {interval:,.0f} s between saves, so a save would be written "
            f"{min(found.save_seconds / interval, 1):.0%} of the time (one due while another is "
            f"written is skipped); at least {least_steps:,} steps keep it under "
            f"{SAVE_SHARE:.0%}: `pulumi config set --path checkpoints.everySteps {least_steps}`, "
            "or `pulumi config rm --path checkpoints.everySteps` to have it derived")
    least_seconds = int(math.ceil(found.least_interval_seconds))
    if (s.job.pool == PoolChoice.SPOT and c.every_seconds
            and c.every_seconds < least_seconds):
        yield Problem(
            "checkpoints.everySeconds", c.every_seconds,
            f"{save}; every {c.every_seconds:,} s a save would be written "
            f"{min(found.save_seconds / c.every_seconds, 1):.0%} of the time; at least "
            f"{least_seconds:,} s keep it under {SAVE_SHARE:.0%}: `pulumi config set --path "
            f"checkpoints.everySeconds {least_seconds}`, or `pulumi config rm --path "
            "checkpoints.everySeconds` to have it derived")


# torchrec's planner keeps this share of each GPU for dense weights, activations and the
# allocator (trainer/planning.py RESERVED_FRACTION, FixedPercentageStorageReservation).
PLANNER_RESERVED_FRACTION = 0.2
MOST_NODES_SUGGESTED = 64


def _table_args(s: Settings) -> dict[str, object] | None:
    """The trainer flags as the trainer converts them, or None where one the table sizes need
    was refused: its own rule names it, and sizes from anything else would be made up."""
    args = parsed_trainer_args(s.job.trainer_args)
    if any(flag in s.job.trainer_args and flag not in args for flag in TABLE_FLAGS):
        return None
    return args


def gb(nbytes: float) -> str:
    """Decimal gigabytes as a reader takes them in: thousands separated, no trailing `.0`
    (135,450 GB, 4.2 GB)."""
    return f"{nbytes / 1e9:,.1f}".removesuffix(".0") + " GB"


# The flags that size the tables, the one that decides first: a per-feature list overrides
# num_embeddings (trainer/config.py), a recipe brings its own tables.
TABLE_SIZE_FLAGS = ("num_embeddings_per_feature", "num_embeddings", "embedding_dim", "recipe")


def tables_fit_the_gpus(s: Settings) -> Iterator[Problem]:
    """The fullest rank's tables and optimizer state (a bound under the trainer's sharding
    rule, trainer/sizing.py, or torchrec's own plan where it is recorded there)
    must fit a GPU's memory less the planner's reservation, or the job fails when it plans,
    after the nodes are paid for. `.venv/bin/python -m torchrec_cloud plan` shows the plan itself.

    Blamed on job.nodes where a node count up to MOST_NODES_SUGGESTED holds the tables (the
    tables are fine, the gang is small); otherwise on the table flag the user set (100 billion
    rows are the mistake, not 2 nodes)."""
    gpu = find_machine(s.cloud, s.job_pool.machine_type)
    args = _table_args(s)
    # an unknown machine or a refused table flag is named by its own rule
    if gpu is None or not gpu.gpu_memory_gib or args is None:
        return
    usable = gpu.gpu_memory_gib * 2**30 * (1 - PLANNER_RESERVED_FRACTION)
    per_node = s.job.processes_per_node

    def fullest(nodes: int) -> int:
        return largest_rank_bytes(args, nodes * per_node, per_node, gpu.name)

    held = fullest(s.job.nodes)
    if held <= usable:
        return
    enough = next((n for n in range(s.job.nodes + 1, MOST_NODES_SUGGESTED + 1)
                   if fullest(n) <= usable), None)
    holds = (f"the fullest rank would hold about {gb(held)} of tables and optimizer state, "
             f"more than {gb(usable)} usable of a {gpu.gpu_memory_gib} GiB GPU ({gpu.name}, "
             f"less the planner's {PLANNER_RESERVED_FRACTION:.0%})")
    plan = "(`.venv/bin/python -m torchrec_cloud plan` shows the plan)"
    table_flag = next((f for f in TABLE_SIZE_FLAGS if f in s.job.trainer_args), None)
    if enough is None and table_flag is not None:
        yield Problem(
            f"job.trainerArgs.{table_flag}", s.job.trainer_args[table_flag],
            f"tables the GPUs can hold: with job.nodes = {s.job.nodes}, {holds}, and no "
            f"job.nodes up to {MOST_NODES_SUGGESTED} fits; use smaller tables (fewer rows or "
            f"a smaller embedding_dim) or a machine with more GPU memory {plan}")
        return
    more = (f"job.nodes: {enough} fits" if enough else
            f"no job.nodes up to {MOST_NODES_SUGGESTED} fits")
    tables = f" of job.trainerArgs.{table_flag}" if table_flag else ""
    yield Problem(
        "job.nodes", s.job.nodes,
        f"enough GPUs for the tables{tables}: {holds}; {more}, or pick a machine with more "
        f"GPU memory or smaller tables {plan}")



def materialized_multi_hot_keeps_up_with_the_gpus(s: Settings) -> Iterator[Problem]:
    """Materialized multi-hot days are read whole every epoch (MLPerf's: 912 bytes a sample,
    3.83 TB); drawn on the fly the trainer reads the one-hot days (160 bytes, 0.67 TB). When the
    file system's throughput cannot feed the GPUs at the planned rate, reading bounds the run:
    on-the-fly it is (the reference's own alternative)."""
    prepare = s.dataset.prepare
    if not (prepare.enabled and prepare.multi_hot_sizes and prepare.multi_hot.value == "materialize"):
        return
    training = _training_rows(prepare)

    try:
        plan = planned_throughput(s)
        have_mb_s, how = shared_file_system_mb_s(s.shared_file_system)
    except (KeyError, ValueError, TypeError):  # a machine or size another rule names
        return
    if plan is None or training is None or have_mb_s <= 0:
        return
    rows = training[0]
    samples_s = plan.samples_per_s_per_gpu * s.job.nodes * s.job.processes_per_node
    materialized, on_the_fly = (read_bytes_per_sample(prepare.multi_hot_sizes),
                                read_bytes_per_sample(None))
    need_mb_s = samples_s * materialized / 1e6
    if have_mb_s >= need_mb_s:
        return
    hours = rows / samples_s / 3600
    read_h = rows * materialized / (have_mb_s * 1e6) / 3600
    fly_h = rows * on_the_fly / (have_mb_s * 1e6) / 3600
    yield Problem("dataset.prepare.multiHot", prepare.multi_hot.value,
                  f"reading materialized multi-hot days ({materialized} bytes a sample, "
                  f"{rows * materialized / 1e12:.2f} TB an epoch) at the file system's "
                  f"{have_mb_s:,.0f} MB/s ({how}) takes {read_h:.1f} h an epoch, where the GPUs "
                  f"need {hours:.1f} h at the planned {samples_s / 1e6:.2f}M samples/s "
                  f"({need_mb_s:,.0f} MB/s): `{set_command('dataset.prepare.multiHot', 'onTheFly')}` "
                  f"(one-hot days, {on_the_fly} bytes a sample, {rows * on_the_fly / 1e12:.2f} TB "
                  f"and {fly_h:.1f} h of reading an epoch; the trainer draws the same ids as "
                  "MLPerf's reference alternative), or a file system with more throughput")


def on_the_fly_input_keeps_up_with_the_gpus(s: Settings) -> Iterator[Problem]:
    """Multi-hot drawn on the fly (the mlperf recipe's --multi_hot_sizes, or
    dataset.prepare.multiHot onTheFly) reads the one-hot days every epoch, 160 bytes a sample
    (0.67 TB for Criteo 1TB): at the planned rate on 2 x p5.48xlarge (7.9M samples/s, 1,259 MB/s)
    that is more than FSx at 250 MB/s/TiB on 2.34 TiB reads (586 MB/s), and the run would be
    bound by its file system. The materialized form has its own rule (above)."""
    prepare = s.dataset.prepare
    if not s.dataset.path:
        return  # synthetic data: nothing is read
    materialize = prepare.enabled and prepare.multi_hot_sizes and \
        prepare.multi_hot.value == "materialize"
    on_the_fly = (prepare.enabled and bool(prepare.multi_hot_sizes) and not materialize) or \
        bool(_multi_hot_flag(s))
    if materialize or not on_the_fly:
        return
    try:
        plan = planned_throughput(s)
        have_mb_s, how = shared_file_system_mb_s(s.shared_file_system)
    except (KeyError, ValueError, TypeError):  # a machine or size another rule names
        return
    if plan is None or have_mb_s <= 0:
        return
    per_sample = read_bytes_per_sample(None)
    samples_s = plan.samples_per_s_per_gpu * s.job.nodes * s.job.processes_per_node
    need_mb_s = samples_s * per_sample / 1e6
    if have_mb_s >= need_mb_s:
        return
    fs = s.shared_file_system
    reads = (f"drawing multi-hot ids on the fly reads the one-hot days ({per_sample} bytes a "
             f"sample) at the planned {samples_s / 1e6:.2f}M samples/s (the run estimate's): "
             f"{need_mb_s:,.0f} MB/s, more than the file system's {have_mb_s:,.0f} MB/s ({how}); "
             "the GPUs would wait for their input")
    if isinstance(fs, FsxLustre) and fs.deployment_type.value == "PERSISTENT_2":
        # The tier that feeds the GPUs is named (infra/catalog/storage.py FSX_MB_S_PER_TIB_TIERS).
        tier, capacity = fsx_persistent_2_for(need_mb_s, fs.capacity_gib)
        if capacity == fs.capacity_gib:
            yield Problem("sharedFileSystem.throughputPerTib", fs.throughput_per_tib,
                          f"{reads}: `{set_command('sharedFileSystem.throughputPerTib', tier)}` "
                          f"({tier * capacity / 1024:,.0f} MB/s)")
            return
        yield Problem("sharedFileSystem.capacityGib", fs.capacity_gib,
                      f"{reads}: throughputPerTib {tier} and capacityGib {capacity} "
                      f"(`{set_command('sharedFileSystem.throughputPerTib', tier)}`, then "
                      f"`{set_command('sharedFileSystem.capacityGib', capacity)}`)")
        return
    size = {"AzureNetAppFiles": "sharedFileSystem.volumeSizeGib",
            "Filestore": "sharedFileSystem.capacityGib"}.get(type(fs).__name__,
                                                             "sharedFileSystem.throughputPerTib")
    current = getattr(fs, {"sharedFileSystem.volumeSizeGib": "volume_size_gib",
                           "sharedFileSystem.capacityGib": "capacity_gib"}.get(size, "throughput_per_tib"), None)
    yield Problem(size, current,
                  f"{reads}: a file system of at least {need_mb_s:,.0f} MB/s (a larger size or a "
                  "faster level; `.venv/bin/python -m torchrec_cloud plan` names the change)")


def _multi_hot_flag(s: Settings) -> object:
    """The job's --multi_hot_sizes in effect (the mlperf recipe sets it), or None."""
    from infra.settings.trainer_flags import trainer_flags_in_effect

    try:
        return trainer_flags_in_effect(s.job.trainer_args).get("multi_hot_sizes")
    except (KeyError, ValueError, TypeError):  # a flag another rule names
        return None


# --- job.maxHourlyUsd: the spend ceiling (infra/estimate.py) ----------------------------------
def hourly_cost_fits_the_ceiling(s: Settings) -> Iterator[Problem]:
    """Judged at the most the job's pools may cost an hour (each GPU pool the job can use and
    the system pool at its maxNodes, spot nodes at the most a spot price may reach: on-demand,
    or Azure's maxPrice), not at the job's own size: the autoscaler's bounds are what the stack
    lets the bill reach. A GPU pool the job never uses is left out (infra/estimate.py
    job_most_hourly). The message gives both figures and the pools behind the first."""
    ceiling = s.job.max_hourly_usd
    if ceiling is None:
        return

    try:
        # Only the pools the job can use: a spot job's idle on-demand pool never grows for it.
        most = job_most_hourly(s)
        job = job_hourly_usd(s)
    except (KeyError, ValueError, TypeError):  # a machine, size or flag another rule names
        return
    total = most.total() or 0.0
    if total <= ceiling:
        return
    pools = "; ".join(f"{line.item}: {line.detail}" for line in most.lines
                      if "pool" in line.item or "nodes" in line.item)
    fixes = [f"Raise the ceiling: `{set_command('job.maxHourlyUsd', math.ceil(total))}`"]
    # Growing less is a fix only where the job's pool (its only one: workloads/kueue.py) may
    # grow past the gang and the stack at the gang's size fits the ceiling: otherwise the same
    # refusal would follow the command.
    key = s.job.pool.value
    if s.gpu_pools_by_key[s.job.pool].max_nodes > s.job.nodes and \
            (_most_at_the_gang_s_size(s) or math.inf) <= ceiling:
        fixes.append(f"let the {key} pool grow less: "
                     f"`{set_command(f'gpuPools.{key}.maxNodes', s.job.nodes)}` (the gang's "
                     "own size)")
    yield Problem(
        "job.maxHourlyUsd", ceiling,
        f"the stack may cost up to USD {total:,.2f} an hour with every pool at its maxNodes "
        f"that the job can use ({pools}; with the file system, network and control plane"
        + _spot_ceiling(s, ceiling, total, fixes) + "), above this ceiling; the "
        f"job itself on {s.job.nodes} {s.job.pool.value} node(s) costs USD {job:,.2f} an hour"
        + (" at today's spot price" if s.job.pool == PoolChoice.SPOT else "")
        + ". " + "; or ".join(fixes))


def _most_at_the_gang_s_size(s: Settings) -> float | None:
    """job_most_hourly with the job's pool bounded at job.nodes: what `maxNodes job.nodes`
    would leave (the standing items that count nodes included)."""
    pools = s.gpu_pools
    field = "spot" if s.job.pool == PoolChoice.SPOT else "on_demand"
    bounded = getattr(pools, field).model_copy(update={"max_nodes": s.job.nodes})
    return job_most_hourly(s.model_copy(
        update={"gpu_pools": pools.model_copy(update={field: bounded})})).total()


def _spot_ceiling(s: Settings, ceiling: float, total: float, fixes: list[str]) -> str:
    """How spot nodes were counted, said plainly; on Azure, the spot price cap that brings the
    most under the ceiling is added to `fixes` when Azure would still allocate nodes at it."""
    if s.job.pool != PoolChoice.SPOT:
        return ""
    spot = s.gpu_pools.spot
    found = find_machine(s.cloud, spot.machine_type)
    if found is None:
        return ""
    price, _ = spot_most_usd_per_hour(s, found)
    if price < found.on_demand_usd_per_hour:  # Azure's maxPrice below on-demand
        return f"; spot nodes counted at gpuPools.spot.maxPrice, USD {price:g} an hour each"
    text = (f"; spot nodes counted at the on-demand price, USD {price:g} an hour each: a spot "
            "price may rise to it, so the ceiling must cover that however low spot is now")
    if s.cloud != Cloud.AZURE:
        return text + f"; the stack sets no spot price cap on {s.cloud.value}"
    # A cap on the spot pool's price (infra/azure/node_pools.py spot_max_price): Azure evicts a
    # spot VM whose price passes it, so the pool cannot cost more.
    cap = math.floor((ceiling - (total - price * spot.max_nodes)) / max(spot.max_nodes, 1) * 100) / 100
    if found.spot_usd_per_hour and found.spot_usd_per_hour <= cap < found.on_demand_usd_per_hour:
        fixes.append(f"cap the spot price: `{set_command('gpuPools.spot.maxPrice', cap)}` "
                     "(Azure evicts a spot node whose price passes it)")
    return text


COST_RULES: tuple[Rule, ...] = (spot_save_fits_the_notice,
                                checkpoint_cadence_leaves_training_its_time,
                                tables_fit_the_gpus,
                                materialized_multi_hot_keeps_up_with_the_gpus,
                                on_the_fly_input_keeps_up_with_the_gpus,
                                hourly_cost_fits_the_ceiling)
