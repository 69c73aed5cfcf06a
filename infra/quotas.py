"""Which cloud quota a machine counts against, how much a pool needs, and the command that asks
for more: one place for `torchrec-cloud doctor` (every pool at maxNodes, every cloud) and
`pulumi up`'s check before any resource (the job's pool at job.nodes: infra/aws/quotas.py,
infra/azure/quotas.py, infra/gcp/quotas.py). No cloud SDK here: the answers the clouds give
(Service Quotas' value, ARM's Compute usages, Compute Engine's region quotas) come in as data.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from infra.catalog.machines import Machine, find_machine
from infra.settings.errors import set_command
from infra.settings.model.job import PoolChoice
from infra.settings.model.stack_file import Settings


@dataclass(frozen=True)
class Ec2Quota:
    """One EC2 vCPU quota of Service Quotas (service code ec2)."""

    code: str
    name: str  # as Service Quotas names it (what the console and a quota request show)
    label: str  # the families it covers, in messages: "P", "P5"


# EC2 vCPU quotas by instance family: (on-demand, spot), counted in vCPUs. The one table for
# `doctor`, `pulumi up`'s check (infra/aws/quotas.py) and `why` (workloads/waiting/cloud_steps.py).
# Spot: AWS EC2 User Guide, "Spot Instance quotas" (docs.aws.amazon.com/AWSEC2/latest/UserGuide/
# using-spot-limits.html) lists "All P4, P3 and P2 Spot Instance Requests" and, apart from it,
# "All P5 Spot Instance Requests" (P5, P5e, P5en). On-demand: its "On-Demand Instance quotas"
# keep one "Running On-Demand P instances" quota for every P generation, P5 included (no P5
# on-demand quota of its own exists in the Service Quotas catalogue). The guide gives names, not
# codes: the codes are the catalogue's (`aws service-quotas list-service-quotas --service-code
# ec2`); L-C4BD4855 for the P5 Spot quota is as public listings of that catalogue give it.
_P_ON_DEMAND = Ec2Quota("L-417A185B", "Running On-Demand P instances", "P")
_P4_P3_P2_SPOT = Ec2Quota("L-7212CCBC", "All P4, P3 and P2 Spot Instance Requests", "P4, P3 and P2")
EC2_QUOTAS: dict[str, tuple[Ec2Quota, Ec2Quota]] = {
    "p5": (_P_ON_DEMAND, Ec2Quota("L-C4BD4855", "All P5 Spot Instance Requests", "P5")),
    "p4": (_P_ON_DEMAND, _P4_P3_P2_SPOT),
    "p3": (_P_ON_DEMAND, _P4_P3_P2_SPOT),
    "p2": (_P_ON_DEMAND, _P4_P3_P2_SPOT),
    "g": (Ec2Quota("L-DB2E81BA", "Running On-Demand G and VT instances", "G and VT"),
          Ec2Quota("L-3819A6DF", "All G and VT Spot Instance Requests", "G and VT")),
    "standard": (Ec2Quota("L-1216C47A", "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) "
                          "instances", "Standard"),
                 Ec2Quota("L-34B43A08", "All Standard (A, C, D, H, I, M, R, T, Z) Spot Instance "
                          "Requests", "Standard")),
}
# Azure: a dedicated VM counts against its size's family quota (Resource SKUs' `family`) and the
# region's total ("cores"); a Spot VM against the regional low-priority quota only
# (learn.microsoft.com/azure/quotas/per-vm-quota-requests, .../spot-quota).
AZURE_SPOT_QUOTA = "lowPriorityCores"
AZURE_REGIONAL_QUOTA = "cores"
# GCP: a machine's regional GPU quota metric is the catalog's Machine.gcp_gpu_quota_metric
# (Spot/preemptible GPUs: PREEMPTIBLE_<metric>).


@dataclass(frozen=True)
class Need:
    """What one GPU pool needs of the quota at a node count."""

    pool: str
    spot: bool
    machine: Machine
    nodes: int

    @property
    def vcpus(self) -> int:
        return self.machine.vcpus * self.nodes

    @property
    def gpus(self) -> int:
        return self.machine.gpu_count * self.nodes

    def describe(self) -> str:
        return f"{self.pool} {self.nodes} x {self.machine.name}"


def pool_needs(settings: Settings) -> list[Need]:
    """What each GPU pool at its maxNodes needs (doctor: a pool the job does not use yet)."""
    found = []
    for key, pool in settings.gpu_pools_by_key.items():
        machine = find_machine(settings.cloud, pool.machine_type)
        if machine is not None and pool.max_nodes > 0:
            found.append(Need(pool.name, key == PoolChoice.SPOT, machine, pool.max_nodes))
    return found


def job_need(settings: Settings) -> Need | None:
    """What the job's own nodes need (`pulumi up`: the gang must fit, other pools may wait)."""
    machine = find_machine(settings.cloud, settings.job_pool.machine_type)
    if machine is None:
        return None
    return Need(settings.job_pool.name, settings.job.pool == PoolChoice.SPOT, machine,
                settings.job.nodes)


@dataclass(frozen=True)
class Reading:
    """One quota as the cloud reported it, against what a pool needs."""

    quota: str  # e.g. "Azure standardNDASv4_A100Family vCPUs (eastus)"
    need: Need
    amount: int  # vCPUs or GPUs the pool needs
    unit: str
    limit: float | None  # None: the cloud lists no such quota (0 for the purpose)
    used: float
    request: str  # the command, or the value and console page, that asks for more

    @property
    def free(self) -> float:
        return 0.0 if self.limit is None else self.limit - self.used

    @property
    def short(self) -> bool:
        return self.free < self.amount

    def numbers(self) -> str:
        if self.limit is None:
            return f"not listed: 0 < {self.amount} {self.unit}"
        return (f"{self.free:g} free (limit {self.limit:g}, used {self.used:g}) "
                f"{'<' if self.short else '>='} {self.amount} {self.unit}")


# --- AWS ------------------------------------------------------------------------------------
def p_generation(instance_type: str) -> str | None:
    """The P generation of an EC2 instance type ("p4" for p4d.24xlarge, "p5" for p5en.48xlarge,
    "p6" for p6-b200.48xlarge), None for any other family: EC2 names its P quotas by it. The
    one parse of it (the waiting messages' quota step uses it too)."""
    generation = re.match(r"p\d+", instance_type.split(".")[0].lower())
    return generation.group(0) if generation else None


def ec2_family(machine: Machine | str) -> str:
    """The key of EC2_QUOTAS a machine (or an instance type's name) counts under: its P
    generation, "g" for G and VT, else "standard"."""
    name = machine if isinstance(machine, str) else machine.name
    generation = p_generation(name)
    if generation in EC2_QUOTAS:
        return generation
    return "g" if name.lower().startswith(("g", "vt")) else "standard"


def ec2_quota(machine: Machine | str, spot: bool) -> Ec2Quota:
    return EC2_QUOTAS[ec2_family(machine)][1 if spot else 0]


def ec2_request_command(code: str, vcpus: int, region: str) -> str:
    return (f"aws service-quotas request-service-quota-increase --service-code ec2 --quota-code "
            f"{code} --desired-value {vcpus} --region {region}")


# --- Azure ----------------------------------------------------------------------------------
def azure_family(skus: Iterable[Mapping[str, Any]], size: str) -> str | None:
    """The quota family of a VM size, from Resource SKUs rows (ARM `Microsoft.Compute/skus`,
    or `az vm list-skus`, the same rows)."""
    for sku in skus:
        if str(sku.get("name", "")).lower() == size.lower() and \
                sku.get("resourceType", "virtualMachines") == "virtualMachines":
            family = sku.get("family")
            return str(family) if family else None
    return None


def azure_request_command(quota: str, spot: bool, subscription: str, region: str,
                          new_limit: int) -> str:
    scope = (f"/subscriptions/{subscription or '<subscription id>'}/providers/"
             f"Microsoft.Compute/locations/{region}")
    return (f"az quota update --resource-name {quota} --scope {scope} --limit-object "
            f"value={new_limit} --resource-type {'lowPriority' if spot else 'dedicated'}")


def azure_readings(need: Need, family: str, usages: Iterable[Mapping[str, Any]],
                   subscription: str, region: str) -> list[Reading]:
    """The quotas a pool counts against, from ARM's Compute usages (`value[]`: name.value,
    currentValue, limit; `az vm list-usage` prints the same rows): Spot, the regional
    low-priority vCPUs; dedicated, the size's family and the region's total (when listed)."""
    by_name = {str(u["name"]["value"]): u for u in usages}
    names = [AZURE_SPOT_QUOTA] if need.spot else [family, AZURE_REGIONAL_QUOTA]
    found = []
    for name in names:
        entry = by_name.get(name)
        if entry is None and name == AZURE_REGIONAL_QUOTA:
            continue  # not every listing names it: the family's quota is the one that binds
        limit = None if entry is None else float(entry["limit"])
        used = 0.0 if entry is None else float(entry["currentValue"])
        label = ("spot (low-priority) vCPUs" if name == AZURE_SPOT_QUOTA else
                 "total regional vCPUs" if name == AZURE_REGIONAL_QUOTA else f"{name} vCPUs")
        found.append(Reading(
            f"Azure {label} ({region})", need, need.vcpus, "vCPUs", limit, used,
            azure_request_command(name, need.spot, subscription, region,
                                  int(used) + need.vcpus)))
    return found


# --- GCP ------------------------------------------------------------------------------------
def gcp_gpu_metric(machine: Machine) -> str | None:
    return machine.gcp_gpu_quota_metric


def gcp_console(project: str) -> str:
    return f"https://console.cloud.google.com/iam-admin/quotas?project={project or '<project>'}"


def gcp_readings(need: Need, quotas: Iterable[Mapping[str, Any]], region: str,
                 project: str) -> list[Reading]:
    """The region's GPU quota of the model (PREEMPTIBLE_ for Spot) and the machine family's
    CPUs (`<FAMILY>_CPUS` where the region lists it, else CPUS), from Compute Engine's
    regions.get `quotas[]` (`gcloud compute regions describe` prints the same)."""
    listed = {str(q["metric"]): q for q in quotas}
    gpu = gcp_gpu_metric(need.machine)
    family = f"{need.machine.name.split('-')[0].upper()}_CPUS"
    cpu = family if family in listed else "CPUS"
    checks = [(f"{'PREEMPTIBLE_' if need.spot else ''}{gpu}" if gpu else None, need.gpus, "GPUs"),
              (cpu, need.vcpus, "vCPUs")]
    found = []
    for metric, amount, unit in checks:
        if metric is None:
            continue  # a machine without a known GPU metric (none in the catalog today)
        entry = listed.get(metric)
        limit = None if entry is None else float(entry["limit"])
        used = 0.0 if entry is None else float(entry.get("usage", 0))
        found.append(Reading(
            f"GCP {metric} ({region})", need, amount, unit, limit, used,
            f"{metric} = {used + amount:g} in {region} at {gcp_console(project)}"))
    return found


def preflight_refusal(reading: Reading, region: str) -> str:
    """`pulumi up`'s words for a quota the job's nodes do not fit (Problem.allowed)."""
    return (f"{reading.need.nodes} x {reading.need.machine.name} need {reading.amount} "
            f"{reading.unit} of {reading.quota}, which has {reading.numbers()}; request: "
            f"{reading.request}, then `pulumi up` again")


def pending_hint() -> str:
    """How to go ahead below the quota once an increase is on its way."""
    return f"or, once requested, `{set_command('quota.pending', 'true')}`"


def refuse_or_go_ahead(s: Settings, refusals: list[str],
                       warn: "Callable[[str], None]") -> None:
    """`pulumi up`'s answer to the job's quota shortfalls, on every cloud: nothing when there
    are none; with quota.pending, one warning each and go ahead; else refused before any
    resource, naming job.nodes with each shortfall's request and the pending hint."""
    if not refusals:
        return
    if s.quota.pending:
        for refusal in refusals:
            warn(pending_warning(refusal))
        return
    from infra.settings.errors import Problem, SettingsError

    raise SettingsError([Problem("job.nodes", s.job.nodes, f"{'; '.join(refusals)}; "
                                 f"{pending_hint()}")])


def pending_warning(refusal: str) -> str:
    """What `pulumi up` says instead of refusing when quota.pending is true."""
    return (f"quota.pending: true, so going ahead below the quota ({refusal}); the gang waits in "
            "Kueue until the increase arrives")
