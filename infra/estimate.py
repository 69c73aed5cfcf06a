"""What a stack costs an hour, and what one run of its job takes in hours and dollars, before
anything exists: pure functions of the settings, the machine catalog (infra/catalog/) and the
other list prices (infra/prices.py). `make check` prints `estimate_lines`, the stack exports
`estimate_output` as `estimated_cost`, and the spend ceiling (job.maxHourlyUsd,
infra/settings/rules.py) judges `most_hourly`.

Assumptions, each a choice of what to count:
- Hourly: the GPU nodes of the job (job.nodes on the pool it runs on: on-demand or spot prices
  of that pool's machine), the system pool at its desired size, the shared file system at its
  provisioned size, the outbound path infra/<cloud>/network.py creates, the control plane fee,
  Azure's registry, and the checkpoints kept. Not counted: per-GB charges (NAT processing,
  egress), node boot disks (cents an hour a node), the dataset's own storage.
- At most: every GPU pool at its maxNodes (the spot pool at on-demand prices, or Azure's
  gpuPools.spot.maxPrice where set lower: a spot price may rise that far) and the system pool at
  its maxNodes: the autoscaler's bounds are the only bounds the stack sets on the bill, whatever
  schedules there (the job, dataset.prepare, a user's pod).
- One run: the stack at the job's hourly rate from the GPU nodes' start (up to the catalog's
  node_ready_minutes, Kueue's PodsReady bound) through the preparation (the job's pods wait on
  their nodes; one GPU node more on dataset.prepare.pool gpu; the vocabulary pass is not in its
  hours) and training (samples / throughput: always a rough plan from recorded public and bench
  runs, with its inputs named, the GPUs assumed to scale linearly, see infra/throughput.py) to
  the autoscaler's scale-down after the last step. Only node start is an upper bound ("up
  to"); the run's hours and dollars are estimates ("about"). Evaluation, checkpoint saves
  (async) and preemptions' lost work are not counted, and `pulumi up` itself (control plane,
  file system: the standing items of the hourly figure) comes before.
"""

from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from infra.catalog.cloud import Cloud
from infra.catalog.machines import Machine, machine
from infra.catalog.node_times import SCALE_DOWN_UNNEEDED_MINUTES
from infra.prices import (
    ACR_STANDARD_DAY, AKS_TIER_HOUR, ANF_GIB_HOUR, AWS_NAT_GATEWAY_HOUR, AWS_PUBLIC_IPV4_HOUR,
    AZURE_LOAD_BALANCER_HOUR, AZURE_PUBLIC_IP_HOUR, EKS_CLUSTER_HOUR, FILESTORE_GIB_MONTH,
    FSX_LUSTRE_GB_MONTH, GCP_NAT_IP_HOUR, GCP_NAT_MAX_HOUR, GCP_NAT_PER_VM_HOUR, GCP_NAT_VM_CAP,
    GKE_CLUSTER_HOUR, OBJECT_STORE_GB_MONTH, PRICE_REGIONS, per_hour,
)
from infra.throughput import Throughput, job_trainer_flags, planned_throughput

if TYPE_CHECKING:  # the settings package imports its rules, which import this module
    from infra.settings.model.stack_file import Settings

# Above this much an hour at its largest, a stack without job.maxHourlyUsd gets a note.
LARGE_STACK_USD_PER_HOUR = 1_000.0
GIB = 1024**3


@dataclass(frozen=True)
class Line:
    """One item of the hourly figure. GPU nodes carry a second price: the same nodes on the
    spot pool (None where there is no spot pool); every other item costs the same either way."""

    item: str
    detail: str
    usd_per_hour: float
    spot_usd_per_hour: float | None = None
    gpu: bool = False
    nodes: bool = False  # priced per node: `status` prices the nodes it sees instead

    def on(self, spot: bool) -> float | None:
        return (self.spot_usd_per_hour if spot else self.usd_per_hour) if self.gpu else self.usd_per_hour


@dataclass(frozen=True)
class Hourly:
    lines: tuple[Line, ...]

    def total(self, spot: bool = False) -> float | None:
        """Sum of the items with the GPU nodes on-demand (or on spot; None without a spot pool)."""
        figures = [line.on(spot) for line in self.lines]
        return None if any(f is None for f in figures) else sum(f for f in figures if f is not None)


# --- What each cloud creates besides the nodes -------------------------------------------------
def _system_nodes(s: Settings, per_pool: int) -> int:
    """GKE sizes a multi-zone pool per zone (node_locations: the zones, infra/gcp/node_pools.py)."""
    return per_pool * (len(s.zones) if s.cloud == Cloud.GCP else 1)


def _nodes_line(item: str, m: Machine, count: int, spot: bool = False) -> Line:
    price = m.spot_usd_per_hour if spot else m.on_demand_usd_per_hour
    return Line(item, f"{count} x {m.name} {'spot' if spot else 'on-demand'} at {price:g}/h",
                price * count, nodes=True)


def _outbound(s: Settings, nodes: int) -> Line:
    """The NAT or load balancer the stack's private nodes leave through (infra/<cloud>/network.py)."""
    if s.cloud == Cloud.AWS:
        return Line("outbound", "1 NAT gateway + its Elastic IP (per-GB processing not counted)",
                    per_hour(AWS_NAT_GATEWAY_HOUR) + per_hour(AWS_PUBLIC_IPV4_HOUR))
    if s.cloud == Cloud.GCP:
        gateway = (per_hour(GCP_NAT_PER_VM_HOUR, nodes) if nodes <= GCP_NAT_VM_CAP
                   else per_hour(GCP_NAT_MAX_HOUR))
        return Line("outbound", f"Cloud NAT for {nodes} VMs + 1 address (per-GB not counted)",
                    gateway + per_hour(GCP_NAT_IP_HOUR))
    return Line("outbound", "AKS outbound load balancer + 1 public IP (outboundType loadBalancer)",
                per_hour(AZURE_LOAD_BALANCER_HOUR) + per_hour(AZURE_PUBLIC_IP_HOUR))


def control_plane_plan(s: Settings) -> str:
    """The fee's key: EKS upgradePolicy.supportType (infra/aws/cluster.py support_type), AKS
    sku.tier (infra/azure/cluster.py control_plane_tier), GKE regional; tests/test_estimate.py
    checks these agree with the clouds' own functions."""
    if s.cloud == Cloud.AWS:
        return "EXTENDED" if s.kubernetes.extended_support else "STANDARD"
    if s.cloud == Cloud.AZURE:
        return "Premium" if s.azure is not None and s.azure.long_term_support else "Standard"
    return "regional"


def _control_plane(s: Settings) -> Line:
    plan = control_plane_plan(s)
    if s.cloud == Cloud.AWS:
        return Line("control plane", f"EKS, {plan.lower()} support", per_hour(EKS_CLUSTER_HOUR[plan]))
    if s.cloud == Cloud.AZURE:
        return Line("control plane", f"AKS {plan} tier", per_hour(AKS_TIER_HOUR[plan]))
    return Line("control plane", "GKE regional cluster (no free tier)", per_hour(GKE_CLUSTER_HOUR))


def file_system_line(s: Settings) -> Line:
    """The shared file system at its provisioned size: FSx per GB-month at its deployment type and
    throughput tier, ANF per GiB-hour of the capacity pool (billed whole, whatever the volume
    holds), Filestore per GiB-month of its tier."""
    fs: Any = s.shared_file_system
    if fs.kind == "fsx-lustre":
        deployment = fs.deployment_type.value
        tier = None if deployment == "SCRATCH_2" else fs.throughput_per_tib
        price = FSX_LUSTRE_GB_MONTH[(deployment, tier)]
        return Line("file system", f"FSx for Lustre {deployment}, {fs.capacity_gib} GiB"
                    + (f" at {tier} MB/s/TiB" if tier else ""), per_hour(price, fs.capacity_gib))
    if fs.kind == "azure-netapp-files":
        level = fs.service_level.value
        return Line("file system", f"NetApp Files {level} pool, {fs.pool_size_tib} TiB",
                    per_hour(ANF_GIB_HOUR[level], fs.pool_size_tib * 1024))
    tier = fs.tier.value
    return Line("file system", f"Filestore {tier}, {fs.capacity_gib} GiB",
                per_hour(FILESTORE_GIB_MONTH[tier], fs.capacity_gib))


def _checkpoints(s: Settings) -> Line | None:
    """The kept checkpoints in the object store: cents a month, said so rather than left out."""
    if not s.checkpoints.enabled:
        return None
    if s.checkpoints.location.value != "objectStore":
        return Line("checkpoints", "on the shared file system (inside its capacity)", 0.0)
    from infra.preemption import checkpoint_bytes

    gb = checkpoint_bytes(dict(s.job.trainer_args)) * s.checkpoints.keep / 1e9
    price = OBJECT_STORE_GB_MONTH[s.cloud]
    return Line("checkpoints", f"{s.checkpoints.keep} kept, about {gb:,.1f} GB at "
                f"{price.usd:g}/GB-month", per_hour(price, gb))


def _standing(s: Settings, nodes: int) -> list[Line]:
    """Everything but the nodes; `nodes`: how many VMs a per-VM NAT price counts."""
    lines = [file_system_line(s), _outbound(s, nodes), _control_plane(s)]
    if s.cloud == Cloud.AZURE:
        lines.append(Line("registry", "ACR Standard (daily fee)", per_hour(ACR_STANDARD_DAY)))
    checkpoints = _checkpoints(s)
    return lines + ([checkpoints] if checkpoints else [])


# --- The hourly figures -----------------------------------------------------------------------
def hourly(s: Settings) -> Hourly:
    """The stack at the job's size: job.nodes GPU nodes (priced on the on-demand pool's machine,
    and on the spot pool's at spot prices), the system pool at its desired size, the rest."""
    pools = s.gpu_pools
    on_demand = machine(s.cloud, pools.on_demand.machine_type)
    spot = machine(s.cloud, pools.spot.machine_type) if pools.spot.enabled else None
    n = s.job.nodes
    gpu = Line("GPU nodes", f"{n} x {on_demand.name} at {on_demand.on_demand_usd_per_hour:g}/h"
               + (f", spot {n} x {spot.name} at {spot.spot_usd_per_hour:g}/h" if spot else ""),
               on_demand.on_demand_usd_per_hour * n,
               spot.spot_usd_per_hour * n if spot else None, gpu=True, nodes=True)
    system_count = _system_nodes(s, s.system_pool.desired_nodes)
    system = _nodes_line("system nodes", machine(s.cloud, s.system_pool.machine_type), system_count)
    return Hourly((gpu, system, *_standing(s, n + system_count)))


def job_on_spot(s: Settings) -> bool:
    return s.job.pool.value == "spot"


def job_hourly_usd(s: Settings) -> float:
    """The stack's hourly rate while the job runs, on the pool it runs on."""
    total = hourly(s).total(spot=job_on_spot(s))
    assert total is not None  # a spot job needs the spot pool (rules.job_fits_its_pool)
    return total


def spot_most_usd_per_hour(s: Settings, m: Machine) -> tuple[float, str]:
    """The most a spot node may cost an hour, and why: spot prices move up to on-demand (AWS's
    default maximum price is the on-demand price; GCP Spot VMs have no cap; an Azure spot pool
    with maxPrice -1 pays "up to on-demand"), so on-demand, or Azure's
    gpuPools.spot.maxPrice where set below it (infra/azure/node_pools.py spot_max_price)."""
    cap = s.gpu_pools.spot.max_price
    if s.cloud == Cloud.AZURE and 0 < cap < m.on_demand_usd_per_hour:
        return cap, f"spot at most gpuPools.spot.maxPrice {cap:g}/h"
    return m.on_demand_usd_per_hour, f"spot priced at on-demand {m.on_demand_usd_per_hour:g}/h, " \
                                     "what a spot price may reach"


def most_hourly(s: Settings) -> Hourly:
    """The most the stack can cost an hour: every GPU pool and the system pool at its maxNodes,
    the spot pool at the most a spot node may cost (spot_most_usd_per_hour), not its typical
    discount: job.maxHourlyUsd judges this figure."""
    pools = s.gpu_pools
    lines = [_nodes_line("GPU pool onDemand", machine(s.cloud, pools.on_demand.machine_type),
                         pools.on_demand.max_nodes)]
    nodes = pools.on_demand.max_nodes
    if pools.spot.enabled:
        spot = machine(s.cloud, pools.spot.machine_type)
        price, why = spot_most_usd_per_hour(s, spot)
        lines.append(Line("GPU pool spot", f"{pools.spot.max_nodes} x {spot.name} {why}",
                          price * pools.spot.max_nodes, nodes=True))
        nodes += pools.spot.max_nodes
    system_count = _system_nodes(s, s.system_pool.max_nodes)
    lines.append(_nodes_line("system nodes", machine(s.cloud, s.system_pool.machine_type),
                             system_count))
    return Hourly((*lines, *_standing(s, nodes + system_count)))


def job_most_hourly(s: Settings) -> Hourly:
    """What job.maxHourlyUsd judges: most_hourly with only the GPU pools the job can use (a
    pool it never schedules on does not grow for it), the system pool and the standing items."""
    used = f"GPU pool {s.job.pool.value}"  # its own only: no fallback (workloads/kueue.py)
    return Hourly(tuple(line for line in most_hourly(s).lines
                        if not line.item.startswith("GPU pool") or line.item == used))


def standing_usd_per_hour(s: Settings) -> float:
    """What stays while the stack exists, job or no job: everything but the GPU nodes (the
    system nodes at their desired size, file system, network, control plane, storage)."""
    return sum(line.usd_per_hour for line in hourly(s).lines if not line.gpu)


HOURS_PER_MONTH = 730  # 365 x 24 / 12


def standing_line(s: Settings, stack: str | None = None) -> str:
    rate = standing_usd_per_hour(s)
    items = ", ".join(line.item for line in hourly(s).lines if not line.gpu)
    where = f" --stack {stack}" if stack else ""
    return (f"while the stack exists, even idle: about USD {rate * HOURS_PER_MONTH:,.0f} a month "
            f"(USD {rate:,.2f}/h: {items}) until `pulumi destroy{where}` ("
            + ("the checkpoint bucket is kept)" if s.checkpoints.retain_on_destroy
               else "checkpoints.retainOnDestroy is false: the checkpoints go with it)"))


# --- One run of the job -----------------------------------------------------------------------
@dataclass(frozen=True)
class Steps:
    steps: int | None
    global_batch: int
    how: str
    epochs: int | None = None  # where the steps are epochs of the prepared data

    @property
    def per_epoch(self) -> int | None:
        return self.steps // self.epochs if self.steps and self.epochs else None


def run_steps(s: Settings) -> Steps:
    """Steps of one run: --max_steps where given; else epochs of the synthetic data
    (--synthetic_steps_per_epoch, 1,000 by default) or of the prepared Criteo rows; None where
    the data's size is unknown before it is read (a dataset.path without dataset.prepare)."""
    flags = job_trainer_flags(s)
    ranks = s.job.nodes * s.job.processes_per_node
    batch = int(flags.get("global_batch_size") or int(flags["batch_size"]) * ranks)
    epochs = int(flags["num_epochs"])
    if flags.get("max_steps"):
        return Steps(int(flags["max_steps"]), batch, "--max_steps")
    if not s.dataset.path:
        per_epoch = int(flags["synthetic_steps_per_epoch"])
        return Steps(epochs * per_epoch, batch,
                     f"{epochs} epoch(s) x {per_epoch:,} synthetic steps")
    prepare = s.dataset.prepare
    if not prepare.enabled:
        return Steps(None, batch, "dataset.path's size is unknown before it is read: set "
                     "job.trainerArgs.max_steps for a run estimate")
    from infra.settings.prepare_rules import prepare_days
    from trainer.prepare import CRITEO_1TB_ROWS, CRITEO_1TB_TRAINING_ROWS, CRITEO_KAGGLE_ROWS

    if prepare.format.value == "criteo_1tb":
        days = len(prepare_days(prepare.days, "criteo_1tb") or [])
        train_days = days - 1 if days > 1 else days  # the last day is held out
        rows, what = CRITEO_1TB_ROWS * train_days // 24, f"{train_days} Criteo 1TB day(s)"
        if train_days == 23:  # days 0-22 exactly, as the advisor counts an epoch
            rows = CRITEO_1TB_TRAINING_ROWS
    else:  # the held-out tenth counted as training: a bound
        rows, what = CRITEO_KAGGLE_ROWS, "Criteo Kaggle"
    per_epoch = math.ceil(rows / batch)
    return Steps(per_epoch * epochs, batch, f"{epochs} epoch(s) of {what}", epochs)


@dataclass(frozen=True)
class RunEstimate:
    """One run, from the GPU nodes' scale-up to their scale-down, at the job's hourly rate:
    node start (the catalog's node_ready_minutes: Kueue's PodsReady bound, so "up to"), the
    preparation (the job's pods hold their nodes while they wait for its layout.json; on
    dataset.prepare.pool gpu it holds one more GPU node), training, and the autoscaler's
    scale-down-unneeded-time after the last step (SCALE_DOWN_UNNEEDED_MINUTES)."""

    steps: Steps
    gpus: int
    throughput: Throughput | None
    node_start_hours: float
    usd_per_hour: float
    prepare_hours: float = 0.0
    prepare_extra_usd_per_hour: float = 0.0  # the preparation's own GPU node (pool gpu)
    scale_down_hours: float = 0.0

    @property
    def samples(self) -> int | None:
        return None if self.steps.steps is None else self.steps.steps * self.steps.global_batch

    @property
    def training_hours(self) -> float | None:
        if self.samples is None or self.throughput is None:
            return None
        return self.samples / (self.throughput.samples_per_s_per_gpu * self.gpus) / 3600

    @property
    def hours(self) -> float | None:
        training = self.training_hours
        return None if training is None else (self.node_start_hours + self.prepare_hours
                                              + training + self.scale_down_hours)

    @property
    def usd(self) -> float | None:
        return None if self.hours is None else (self.hours * self.usd_per_hour
                                                + self.prepare_hours * self.prepare_extra_usd_per_hour)


def _prepare(s: Settings) -> tuple[float, float]:
    """(hours, extra USD an hour): the rules' preparation estimate (prepare_rules.prepare_hours),
    and the GPU node it holds beside the job's on dataset.prepare.pool gpu."""
    from infra.settings.prepare_rules import prepare_hours

    estimate = prepare_hours(s)
    if estimate is None:
        return 0.0, 0.0
    found, hours = estimate[0], estimate[-1]
    if s.dataset.prepare.pool.value != "gpu":
        return hours, 0.0
    return hours, found.spot_usd_per_hour if job_on_spot(s) else found.on_demand_usd_per_hour


def run_estimate(s: Settings) -> RunEstimate:
    """One run from the GPU nodes' scale-up to their scale-down, at the job's hourly rate."""
    gpu = machine(s.cloud, s.job_pool.machine_type)
    prepare_h, prepare_usd = _prepare(s)
    return RunEstimate(steps=run_steps(s), gpus=s.job.nodes * s.job.processes_per_node,
                       throughput=planned_throughput(s),
                       node_start_hours=gpu.node_ready_minutes / 60,
                       usd_per_hour=job_hourly_usd(s), prepare_hours=prepare_h,
                       prepare_extra_usd_per_hour=prepare_usd,
                       scale_down_hours=SCALE_DOWN_UNNEEDED_MINUTES[s.cloud] / 60)


# --- Output -----------------------------------------------------------------------------------
def _round(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)


def _prices_note(s: Settings) -> str:
    reference = PRICE_REGIONS[s.cloud]
    note = f"USD list prices for {reference}: infra/catalog/machines.py, infra/prices.py"
    return note if s.region == reference else f"{note}; {s.region} may differ"


def estimate_output(s: Settings) -> dict[str, Any]:
    """The stack export `estimated_cost`: the hourly items, the totals (on_demand_usd_per_hour
    and spot_usd_per_hour keep the names earlier versions exported), the most the stack may
    reach, and one run of the job. Keys whose figure is unknown are left out."""
    now, most, run = hourly(s), most_hourly(s), run_estimate(s)
    out: dict[str, Any] = {
        "prices": _prices_note(s),
        "job_pool": s.job.pool.value,
        "usd_per_hour": _round(run.usd_per_hour),
        "on_demand_usd_per_hour": _round(now.total()),
        "spot_usd_per_hour": _round(now.total(spot=True)),
        "items": [{k: v for k, v in {"item": line.item, "detail": line.detail,
                                     "usd_per_hour": _round(line.usd_per_hour, 4),
                                     "spot_usd_per_hour": _round(line.spot_usd_per_hour, 4)
                                     if line.gpu else None,
                                     "nodes": line.nodes or None}.items() if v is not None}
                  for line in now.lines],
        "at_most_usd_per_hour": _round(most.total()),
        "max_hourly_usd": s.job.max_hourly_usd,
        "run": {
            "steps": run.steps.steps, "global_batch": run.steps.global_batch,
            "steps_from": run.steps.how, "samples": run.samples, "gpus": run.gpus,
            "samples_per_s_per_gpu": _round(run.throughput.samples_per_s_per_gpu, 0)
            if run.throughput else None,
            "throughput_source": run.throughput.source if run.throughput else None,
            "throughput_scaling": _scaling(run.gpus) if run.throughput else None,
            "node_start_hours": _round(run.node_start_hours),  # up to: Kueue's PodsReady bound
            "prepare_hours": _round(run.prepare_hours, 3) if run.prepare_hours else None,
            "scale_down_hours": _round(run.scale_down_hours),
            "training_hours": _round(run.training_hours, 3),
            "hours": _round(run.hours),  # an estimate: node start counted at its bound
            "usd": _round(run.usd),
        },
    }
    out["run"] = {k: v for k, v in out["run"].items() if v is not None}
    return {k: v for k, v in out.items() if v is not None}


def _scaling(gpus: int) -> str:
    return f"x {gpus} GPUs assumed to scale linearly" if gpus > 1 else "1 GPU"


def _money(value: float | None) -> str:
    return "unknown" if value is None else f"{value:,.2f}"


def _hours(value: float) -> str:
    return f"{value:.2f} h" if value >= 0.01 else f"{value * 3600:.0f} s"


CONTINUATION = " " * 16  # under the figures' column, so a long explanation reads as one item


def wrapped(text: str, width: int = 100) -> list[str]:
    """A long explanation as indented lines, one clause ("; ") at a time, none wider than
    `width` where a word allows: one 800-character line is unreadable in a terminal."""
    lines: list[str] = []
    for clause in _clauses(text):
        lines += textwrap.wrap(clause, width, initial_indent=CONTINUATION,
                               subsequent_indent=CONTINUATION + "  ", break_long_words=False,
                               break_on_hyphens=False)
    return lines


def _clauses(text: str) -> list[str]:
    """`text` split at each "; " outside parentheses (one inside belongs to its aside)."""
    clauses, depth, start = [], 0, 0
    for index, char in enumerate(text):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth == 0 and text.startswith("; ", index):
            clauses.append(text[start:index])
            start = index + 2
    return clauses + [text[start:]]


def estimate_lines(s: Settings) -> list[str]:
    """Short lines for a person: the hourly items (on-demand and spot), the most the stack may
    reach, and one run's hours and dollars with the throughput's source."""
    now, most, run = hourly(s), most_hourly(s), run_estimate(s)
    lines = [f"Cost per hour ({_prices_note(s)}):"]
    for line in now.lines:
        figure = f"{line.usd_per_hour:>9,.2f}"
        if line.gpu and line.spot_usd_per_hour is not None:
            figure += f"   spot {line.spot_usd_per_hour:,.2f}"
        lines.append(f"  {line.item:<14}{figure}   {line.detail}")
    spot_total = now.total(spot=True)
    lines.append(f"  {'total':<14}{_money(now.total()):>9} on-demand"
                 + (f", {_money(spot_total)} with the GPU nodes on spot" if spot_total else "")
                 + f"; the job runs on {s.job.pool.value}: {_money(run.usd_per_hour)}/h")
    lines.append(f"  {'at most':<14}{_money(most.total()):>9} with every pool at its maxNodes, spot "
                 "at the most a spot price may reach ("
                 + ", ".join(l.detail for l in most.lines if "nodes" in l.item or "pool" in l.item)
                 + "; " + ", ".join(l.item for l in most.lines
                                    if not ("nodes" in l.item or "pool" in l.item))
                 + " included)")
    ceiling = s.job.max_hourly_usd
    if ceiling is not None:
        lines.append(f"  {'ceiling':<14}{ceiling:>9,.2f} job.maxHourlyUsd")
    elif (most.total() or 0) > LARGE_STACK_USD_PER_HOUR:
        lines.append(f"  note: at most {_money(most.total())}/h and no job.maxHourlyUsd: set one "
                     "to have a larger stack refused before it is created")
    steps = run.steps
    lines.append(f"One run of job {s.job.name}:")
    if steps.steps is None:
        lines.append(f"  steps         unknown: {steps.how}")
    else:
        lines.append(f"  steps         {steps.steps:,} x {steps.global_batch:,} samples "
                     f"({steps.how}) = {run.samples:,} samples")
    if run.throughput is None:
        lines.append("  throughput    unknown: no planned figure for this machine's GPU")
    else:
        rate = run.throughput.samples_per_s_per_gpu
        lines.append(f"  throughput    about {rate * run.gpus / 1e6:,.2f}M samples/s "
                     f"({rate / 1e6:.3f}M per GPU{', ' + _scaling(run.gpus) if run.gpus > 1 else ''}):")
        lines += wrapped(run.throughput.source)
        if steps.per_epoch:  # what `python -m torchrec_cloud plan` calls one epoch GPU-bound
            epoch = steps.per_epoch * steps.global_batch / (rate * run.gpus)
            lines.append(f"  one epoch     {epoch / 3600:.2f} h GPU-bound ({steps.per_epoch:,} steps "
                         f"at {steps.per_epoch / epoch:,.0f} steps/s)")
    if run.hours is not None and run.training_hours is not None:
        parts = [f"up to {_hours(run.node_start_hours)} node start (the PodsReady bound)"]
        if run.prepare_hours:
            parts.append(f"{_hours(run.prepare_hours)} preparation")
        parts += [f"{_hours(run.training_hours)} training",
                  f"{_hours(run.scale_down_hours)} idle before scale-down"]
        lines.append(f"  time          {' + '.join(parts)} = about {run.hours:.2f} h (an estimate)")
        extra = (f" + the preparation's GPU node {_money(run.prepare_extra_usd_per_hour)}/h"
                 if run.prepare_extra_usd_per_hour and run.prepare_hours else "")
        lines.append(f"  cost          about USD {_money(run.usd)} at "
                     f"{_money(run.usd_per_hour)}/h{extra} (an estimate: training is planned, "
                     "never measured; evaluation, saves, preemptions and the preparation's "
                     "vocabulary pass not counted)")
    return lines
