"""What a stack costs an hour, and what one run of its job takes in hours and dollars, before
anything exists: pure functions of the settings, the machine catalog (infra/catalog.py) and the
other list prices (infra/prices.py). `make check` prints `estimate_lines`, the stack exports
`estimate_output` as `estimated_cost`, and the spend ceiling (job.maxHourlyUsd,
infra/settings/rules.py) judges `most_hourly`.

Assumptions, each a choice of what to count:
- Hourly: the GPU nodes of the job (job.nodes on the pool it runs on: on-demand or spot prices
  of that pool's machine), the system pool at its desired size, the shared file system at its
  provisioned size, the outbound path infra/<cloud>/network.py creates, the control plane fee,
  Azure's registry, and the checkpoints kept. Not counted: per-GB charges (NAT processing,
  egress), node boot disks (cents an hour a node), the dataset's own storage.
- At most: every GPU pool at its maxNodes (on-demand pool at on-demand, spot pool at spot
  prices) and the system pool at its maxNodes: the autoscaler's bounds are the only bounds the
  stack sets on the bill, whatever schedules there (the job, dataset.prepare, a user's pod).
- One run: GPU nodes paid from their start (the catalog's node_ready_minutes) to the last step,
  at the job's hourly rate; training = samples / throughput. Evaluation, checkpoint saves (async)
  and preemptions' lost work are not counted, and `pulumi up` itself (control plane, file
  system: the standing items of the hourly figure) comes before.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from infra.catalog import MEASURED_THROUGHPUT, Cloud, Machine, gpu_hbm_gb_s, machine
from infra.prices import (
    ACR_STANDARD_DAY, AKS_TIER_HOUR, ANF_GIB_HOUR, AWS_NAT_GATEWAY_HOUR, AWS_PUBLIC_IPV4_HOUR,
    AZURE_LOAD_BALANCER_HOUR, AZURE_PUBLIC_IP_HOUR, EKS_CLUSTER_HOUR, FILESTORE_GIB_MONTH,
    FSX_LUSTRE_GB_MONTH, GCP_NAT_IP_HOUR, GCP_NAT_MAX_HOUR, GCP_NAT_PER_VM_HOUR, GCP_NAT_VM_CAP,
    GKE_CLUSTER_HOUR, OBJECT_STORE_GB_MONTH, PRICE_REGIONS, per_hour,
)

if TYPE_CHECKING:  # the settings package imports its rules, which import this module
    from infra.settings.model import Settings

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
                price * count)


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
               + (f", spot {spot.name} at {spot.spot_usd_per_hour:g}/h" if spot else ""),
               on_demand.on_demand_usd_per_hour * n,
               spot.spot_usd_per_hour * n if spot else None, gpu=True)
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


def most_hourly(s: Settings) -> Hourly:
    """The most the stack can cost an hour: every GPU pool and the system pool at its maxNodes."""
    pools = s.gpu_pools
    lines = [_nodes_line("GPU pool onDemand", machine(s.cloud, pools.on_demand.machine_type),
                         pools.on_demand.max_nodes)]
    nodes = pools.on_demand.max_nodes
    if pools.spot.enabled:
        lines.append(_nodes_line("GPU pool spot", machine(s.cloud, pools.spot.machine_type),
                                 pools.spot.max_nodes, spot=True))
        nodes += pools.spot.max_nodes
    system_count = _system_nodes(s, s.system_pool.max_nodes)
    lines.append(_nodes_line("system nodes", machine(s.cloud, s.system_pool.machine_type),
                             system_count))
    return Hourly((*lines, *_standing(s, nodes + system_count)))


def most_hourly_usd(s: Settings) -> float:
    total = most_hourly(s).total()
    assert total is not None  # no spot figure in it
    return total


# --- One run of the job -----------------------------------------------------------------------
@dataclass(frozen=True)
class Throughput:
    samples_per_s_per_gpu: float
    source: str


def _trainer_flags(s: Settings) -> dict[str, Any]:
    """The job's trainer flags as the trainer takes them: its defaults (trainer/config.py) under
    the recipe's (trainer/recipe.py) under the stack file's."""
    from trainer.config import TrainConfig  # torch-free
    from trainer.recipe import with_recipe

    defaults = {f.name: f.default for f in dataclasses.fields(TrainConfig)
                if f.default is not dataclasses.MISSING}
    return {**defaults, **with_recipe(dict(s.job.trainer_args))}


def _ids_per_sample(s: Settings, flags: dict[str, Any]) -> int:
    sizes = flags.get("multi_hot_sizes") or (
        s.dataset.prepare.multi_hot_sizes if s.dataset.path and s.dataset.prepare.enabled else None)
    from trainer.config import NUM_SPARSE_FEATURES

    return int(sum(sizes)) if sizes else NUM_SPARSE_FEATURES


def planned_throughput(s: Settings) -> Throughput | None:
    """Samples/s per GPU of the job's machine and model. DLRM's step is bound by its embedding
    lookups, which are memory-bound (each sample reads embedding_dim floats per id from HBM), so
    a measurement (infra/catalog.py MEASURED_THROUGHPUT) is scaled by the GPU's HBM bandwidth and
    by the embedding bytes a sample reads; it is "measured" only for the very GPU and model.
    None where neither GPU's bandwidth is known. A rough plan: dense layers (DCN), data readers
    and the fabric between nodes are not modelled."""
    gpu = machine(s.cloud, s.job_pool.machine_type)
    hbm = gpu_hbm_gb_s(gpu)
    if not gpu.has_gpus or hbm is None or not MEASURED_THROUGHPUT:
        return None
    flags = _trainer_flags(s)
    dim, ids = int(flags["embedding_dim"]), _ids_per_sample(s, flags)
    same_gpu = [m for m in MEASURED_THROUGHPUT
                if (m.gpu_model, m.gpu_memory_gib) == (gpu.gpu_model, gpu.gpu_memory_gib)]
    base = (same_gpu or list(MEASURED_THROUGHPUT))[0]
    base_hbm = gpu_hbm_gb_s(machine_with_gpu(base.gpu_model, base.gpu_memory_gib))
    if base_hbm is None:
        return None
    model_ratio = (base.embedding_dim * base.ids_per_sample) / (dim * ids)
    hbm_ratio = hbm / base_hbm
    rate = base.samples_per_s_per_gpu * hbm_ratio * model_ratio
    if hbm_ratio == 1.0 and model_ratio == 1.0:
        return Throughput(rate, base.source)
    how = [f"HBM bandwidth ({hbm:g}/{base_hbm:g} GB/s)" if hbm_ratio != 1.0 else "",
           f"embedding bytes per sample ({base.embedding_dim}x{base.ids_per_sample} / "
           f"{dim}x{ids})" if model_ratio != 1.0 else ""]
    return Throughput(rate, f"planned: {base.gpu_model} measurement scaled by "
                      + " and ".join(h for h in how if h)
                      + "; DLRM embedding lookups are memory-bound")


def machine_with_gpu(model: str, memory_gib: int) -> Machine:
    """Any catalog machine with this GPU (for its bandwidth figure)."""
    from infra.catalog import MACHINES

    return next(m for m in MACHINES if (m.gpu_model, m.gpu_memory_gib) == (model, memory_gib))


@dataclass(frozen=True)
class Steps:
    steps: int | None
    global_batch: int
    how: str


def run_steps(s: Settings) -> Steps:
    """Steps of one run: --max_steps where given; else epochs of the synthetic data
    (--synthetic_steps_per_epoch, 1,000 by default) or of the prepared Criteo rows; None where
    the data's size is unknown before it is read (a dataset.path without dataset.prepare)."""
    flags = _trainer_flags(s)
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
    from infra.settings.rules import prepare_days
    from trainer.prepare import CRITEO_1TB_ROWS, CRITEO_KAGGLE_ROWS

    if prepare.format.value == "criteo_1tb":
        days = len(prepare_days(prepare.days, "criteo_1tb") or [])
        train_days = days - 1 if days > 1 else days  # the last day is held out
        rows, what = CRITEO_1TB_ROWS * train_days // 24, f"{train_days} Criteo 1TB day(s)"
    else:  # the held-out tenth counted as training: a bound
        rows, what = CRITEO_KAGGLE_ROWS, "Criteo Kaggle"
    return Steps(math.ceil(rows * epochs / batch), batch, f"{epochs} epoch(s) of {what}")


@dataclass(frozen=True)
class RunEstimate:
    steps: Steps
    gpus: int
    throughput: Throughput | None
    node_start_hours: float
    usd_per_hour: float

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
        return None if training is None else self.node_start_hours + training

    @property
    def usd(self) -> float | None:
        return None if self.hours is None else self.hours * self.usd_per_hour


def run_estimate(s: Settings) -> RunEstimate:
    """One run from the GPU nodes' scale-up to the last step, at the job's hourly rate."""
    gpu = machine(s.cloud, s.job_pool.machine_type)
    return RunEstimate(steps=run_steps(s), gpus=s.job.nodes * s.job.processes_per_node,
                       throughput=planned_throughput(s),
                       node_start_hours=gpu.node_ready_minutes / 60,
                       usd_per_hour=job_hourly_usd(s))


# --- Output -----------------------------------------------------------------------------------
def _round(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)


def _prices_note(s: Settings) -> str:
    reference = PRICE_REGIONS[s.cloud]
    note = f"USD list prices for {reference}: infra/catalog.py, infra/prices.py"
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
                                     if line.gpu else None}.items() if v is not None}
                  for line in now.lines],
        "at_most_usd_per_hour": _round(most.total()),
        "max_hourly_usd": s.job.max_hourly_usd,
        "run": {
            "steps": run.steps.steps, "global_batch": run.steps.global_batch,
            "steps_from": run.steps.how, "samples": run.samples, "gpus": run.gpus,
            "samples_per_s_per_gpu": _round(run.throughput.samples_per_s_per_gpu, 0)
            if run.throughput else None,
            "throughput_source": run.throughput.source if run.throughput else None,
            "node_start_hours": _round(run.node_start_hours),
            "training_hours": _round(run.training_hours, 3),
            "hours": _round(run.hours),
            "usd": _round(run.usd),
        },
    }
    out["run"] = {k: v for k, v in out["run"].items() if v is not None}
    return {k: v for k, v in out.items() if v is not None}


def _money(value: float | None) -> str:
    return "unknown" if value is None else f"{value:,.2f}"


def _hours(value: float) -> str:
    return f"{value:.2f} h" if value >= 0.01 else f"{value * 3600:.0f} s"


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
    lines.append(f"  {'at most':<14}{_money(most.total()):>9} with every pool at its maxNodes ("
                 + ", ".join(l.detail for l in most.lines if "nodes" in l.item or "pool" in l.item)
                 + ")")
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
        lines.append("  throughput    unknown: no measured or planned figure for this machine")
    else:
        rate = run.throughput.samples_per_s_per_gpu
        lines.append(f"  throughput    {rate * run.gpus / 1e6:,.2f}M samples/s ({run.gpus} GPUs x "
                     f"{rate / 1e6:.3f}M): {run.throughput.source}")
    if run.hours is not None and run.training_hours is not None:
        lines.append(f"  time          {_hours(run.node_start_hours)} node start (catalog) + "
                     f"{_hours(run.training_hours)} training = {run.hours:.2f} h")
        lines.append(f"  cost          USD {_money(run.usd)} at {_money(run.usd_per_hour)}/h "
                     "(evaluation, saves and preemptions not counted)")
    return lines
