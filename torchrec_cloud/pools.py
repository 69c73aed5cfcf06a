"""Node pools as the cluster shows them, and what the nodes alive now have cost so far.

Pure functions over the objects the API returns (core/v1 Node, the Cluster Autoscaler's status
ConfigMap and events), so the tests feed recorded objects and pass the time.

Where each fact comes from:
- the pool of a node: this stack's own label `torchrec-cloud/pool` (infra/aws/node_groups.py,
  infra/azure/node_pools.py, infra/gcp/node_pools.py POOL_LABEL), else the cloud's own pool
  label (EKS eks.amazonaws.com/nodegroup, GKE cloud.google.com/gke-nodepool, AKS
  kubernetes.azure.com/agentpool);
- its machine: the well-known label node.kubernetes.io/instance-type (Kubernetes "Well-Known
  Labels, Annotations and Taints"), priced from infra/catalog/machines.py;
- spot or on-demand: the labels each cloud (and this stack) puts on spot nodes, one table in
  workloads/waiting/pods.py SPOT_LABELS;
- pending scale-up and backoff: the autoscaler's status ConfigMap, nodeGroups[].health
  (cloudProviderTarget, nodeCounts.registered) and scaleUp (status InProgress / Backoff with
  backoffInfo), Cluster Autoscaler 1.30+ (clusterstate/api/types.go); its node group names hold
  the pool name (EKS "eks-<nodegroup>-<uuid>", AKS "aks-<pool>-<id>-vmss", GKE
  "gke-<cluster>-<pool>-<hash>-grp");
- the cloud's reason for a failed scale-up: workloads/cloud_errors.py over the autoscaler's
  events, ConfigMap and (EKS) log lines, as workloads/waiting/autoscaler.py reads them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Mapping

from infra.catalog.machines import find_machine
from workloads import cloud_errors
from workloads.waiting import (SCALE_UP_FAILED_EVENTS, SPOT_LABELS, ClusterView, Event,
                               autoscaler_node_groups)

POOL_LABELS = ("torchrec-cloud/pool", "eks.amazonaws.com/nodegroup",
               "cloud.google.com/gke-nodepool", "kubernetes.azure.com/agentpool", "agentpool")
INSTANCE_TYPE_LABELS = ("node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type")
# EKS labels a node launched into a Capacity Block (a managed node group with capacityType
# CAPACITY_BLOCK: https://docs.aws.amazon.com/eks/latest/userguide/capacity-blocks-mng.html).
EKS_CAPACITY_TYPE_LABEL = "eks.amazonaws.com/capacityType"
CAPACITY_BLOCK = "capacity block (priced as on-demand)"


def parse_time(value: str | None) -> datetime | None:
    """An RFC 3339 time as the API writes it (creationTimestamp, lastTransitionTime)."""
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def hours_between(start: datetime | None, now: datetime) -> float:
    return max((now - start).total_seconds(), 0.0) / 3600 if start else 0.0


@dataclass(frozen=True)
class Node:
    name: str
    pool: str
    machine_type: str
    spot: bool
    ready: bool
    created: datetime | None
    gpus: int  # from the catalog, else the node's nvidia.com/gpu capacity
    left_out: bool  # tainted by the health gate (workloads/waiting/pods.py UNHEALTHY_TAINT)
    capacity_block: bool = False  # EKS Capacity Block: a reservation paid up front

    @property
    def capacity(self) -> str:
        return "spot" if self.spot else CAPACITY_BLOCK if self.capacity_block else "on-demand"

    @classmethod
    def of(cls, raw: dict[str, Any]) -> "Node":
        from workloads.waiting import UNHEALTHY_TAINT

        meta, status = raw.get("metadata") or {}, raw.get("status") or {}
        labels = meta.get("labels") or {}
        machine_type = next((labels[k] for k in INSTANCE_TYPE_LABELS if labels.get(k)), "")
        ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                    for c in status.get("conditions") or [])
        capacity = (status.get("capacity") or {}).get("nvidia.com/gpu")
        taints = (raw.get("spec") or {}).get("taints") or []
        return cls(name=meta.get("name", ""),
                   pool=next((labels[k] for k in POOL_LABELS if labels.get(k)), "(no pool label)"),
                   machine_type=machine_type,
                   spot=any(str(labels.get(k, "")).lower() == v.lower() for k, v in SPOT_LABELS.items()),
                   ready=ready, created=parse_time(meta.get("creationTimestamp")),
                   gpus=int(capacity) if str(capacity or "").isdigit() else 0,
                   left_out=any(t.get("key") == UNHEALTHY_TAINT for t in taints),
                   capacity_block=labels.get(EKS_CAPACITY_TYPE_LABEL) == "CAPACITY_BLOCK")


@dataclass(frozen=True)
class NodeGroup:
    """One node group of the autoscaler's status ConfigMap."""

    name: str
    target: int | None
    registered: int | None
    scale_up: str  # InProgress, NoActivity, Backoff
    backoff: str  # "<errorCode>: <errorMessage>" when in backoff


def node_groups(status_map: dict[str, Any] | None) -> list[NodeGroup]:
    groups = []
    for group in autoscaler_node_groups(status_map):
        health, scale_up = group.get("health") or {}, group.get("scaleUp") or {}
        registered = ((health.get("nodeCounts") or {}).get("registered") or {})
        info = scale_up.get("backoffInfo") or {}
        groups.append(NodeGroup(
            name=str(group.get("name", "")), target=health.get("cloudProviderTarget"),
            registered=registered.get("total", registered.get("ready")) if registered else None,
            scale_up=str(scale_up.get("status", "")),
            backoff=f"{info.get('errorCode', '')}: {info.get('errorMessage', '')}" if info else ""))
    return groups


def pool_of(text: str, pools: list[str]) -> str | None:
    """The pool a node group name or a log line names: the longest pool name found between
    separators (a pool "gpu" must not claim "gke-c-gpu-spot-1a2b-grp")."""
    found = [p for p in pools if re.search(rf"(^|[-/_ ]){re.escape(p)}(-|\b)", text)]
    return max(found, key=len) if found else None


def refusal_lines(view: ClusterView) -> list[str]:
    """Every line where the autoscaler reports a failed scale-up, oldest first: its events on
    the status ConfigMap and on pods, the ConfigMap's backoff, and (EKS) its log."""
    events = sorted((Event.of(e) for e in [*view.autoscaler_events, *view.events]),
                    key=lambda e: e.time)
    lines = [e.line() for e in events if e.reason in SCALE_UP_FAILED_EVENTS]
    lines += [f"node group {g.name} scale-up Backoff: {g.backoff}"
              for g in node_groups(view.autoscaler_status) if g.scale_up == "Backoff"]
    lines += [line for line in view.autoscaler_log.splitlines() if "scaling failed" in line]
    return lines


@dataclass
class Pool:
    name: str
    nodes: list[Node] = field(default_factory=list)
    groups: list[NodeGroup] = field(default_factory=list)
    failure: str = ""  # the newest scale-up failure naming this pool, with the cloud's reason
    configured: str = ""  # the stack's word for it (node_pools output), when it has no nodes

    @property
    def capacity(self) -> str:
        kinds = sorted({n.capacity for n in self.nodes}, key=len)
        return " and ".join(kinds) if kinds else self.configured

    @property
    def pending(self) -> int:
        """Nodes the cloud was asked for that have not registered yet."""
        return sum(max((g.target or 0) - (g.registered or 0), 0) for g in self.groups
                   if g.target is not None)

    def line(self) -> str:
        ready = sum(n.ready for n in self.nodes)
        machines = sorted({n.machine_type for n in self.nodes if n.machine_type})
        parts = [f"{ready} ready", f"{len(self.nodes) - ready} not ready"]
        if self.pending or any(g.scale_up == "InProgress" for g in self.groups):
            parts.append(f"{self.pending} pending scale-up")
        left_out = [n.name for n in self.nodes if n.left_out]
        if left_out:
            parts.append(f"left out by the health gate: {', '.join(left_out)}")
        kind = ", ".join(x for x in (self.capacity, ", ".join(machines)) if x)
        return f"{self.name}{f' ({kind})' if kind else ''}: {', '.join(parts)}"


def pools(view: ClusterView, configured: Mapping[str, str] | None = None) -> tuple[list[Pool], list[str]]:
    """The pools (from the nodes and the autoscaler's node groups), and the scale-up failures
    that name no pool (GKE's pod events name zones only). `configured`: the stack's pools
    (node_pools output, name -> capacity), so a group of a pool with no node yet (scaling up
    from zero; GKE: one group per zone) is named after its pool."""
    by_name: dict[str, Pool] = {}
    for raw in view.nodes:
        node = Node.of(raw)
        by_name.setdefault(node.pool, Pool(node.pool)).nodes.append(node)
    known = [*by_name, *(n for n in configured or {} if n not in by_name)]
    for group in node_groups(view.autoscaler_status):
        name = pool_of(group.name, known) or group.name.rsplit("/", 1)[-1]
        by_name.setdefault(name, Pool(name)).groups.append(group)
    for name, pool in by_name.items():
        pool.configured = (configured or {}).get(name, "")
    unnamed: list[str] = []
    for line in refusal_lines(view):
        reason = _with_reason(line)
        pool = pool_of(line, list(by_name))
        if pool:
            by_name[pool].failure = reason
        else:
            unnamed.append(reason)
    return sorted(by_name.values(), key=lambda p: p.name), unnamed[-1:]


def _with_reason(line: str) -> str:
    """The line, led by what the cloud's words mean (no quota, no capacity) where known."""
    match = cloud_errors.match(line)
    meaning = {cloud_errors.Refusal.NO_QUOTA: "no quota",
               cloud_errors.Refusal.NO_CAPACITY: "no capacity",
               cloud_errors.Refusal.NO_RESERVATION: "reservation full or not active"}
    return f"{meaning[match.refusal]}: {line}" if match else line


@dataclass(frozen=True)
class Spend:
    usd: float
    usd_per_hour: float
    counted: int
    unpriced: list[str]  # nodes whose machine type the catalog does not have
    fixed_usd: float = 0.0  # the fixed hourly items over the cluster's age
    fixed_usd_per_hour: float = 0.0
    fixed_items: tuple[str, ...] = ()  # their names, as infra/estimate.py writes them


# The pre-mark shape: stacks last deployed before infra/estimate.py marked its per-node items
# ("nodes": true) exported them unmarked, under these names (the GPU nodes with a
# spot_usd_per_hour when there was a spot pool). Status reads only outputs, so such a stack
# keeps that shape until its next `pulumi up`.
PRE_MARK_NODE_ITEMS = ("GPU nodes", "system nodes")


def _per_node(entry: Mapping[str, Any], marked: bool) -> bool:
    """Whether an item is priced per node: by its mark, or (pre-mark shape) by its old name or
    its spot price, which only the GPU nodes carried."""
    if marked:
        return bool(entry.get("nodes"))
    return entry.get("item") in PRE_MARK_NODE_ITEMS or "spot_usd_per_hour" in entry


def fixed_items(estimated_cost: Mapping[str, Any]) -> list[tuple[str, float]]:
    """(item, USD/h) of the stack's `estimated_cost` output that are not nodes: they cost the
    same every hour the cluster exists. Nodes are left out: status prices the nodes it sees."""
    entries = [e for e in estimated_cost.get("items") or [] if isinstance(e, Mapping)]
    marked = any("nodes" in e for e in entries)
    found = []
    for entry in entries:
        price = entry.get("usd_per_hour")
        if _per_node(entry, marked) or isinstance(price, bool) or not isinstance(price, (int, float)):
            continue
        found.append((str(entry.get("item")), float(price)))
    return found


def spend(nodes: list[dict[str, Any]], cloud: str, now: datetime,
          estimated_cost: Mapping[str, Any] | None = None,
          cluster_created: datetime | None = None) -> Spend:
    """Each node's age (creationTimestamp) times its catalog price, spot or on-demand by its
    labels (a Capacity Block node at the on-demand price: its block is paid up front, at a
    price the catalog does not hold), plus the stack's fixed hourly items (estimated_cost)
    times the cluster's age. An estimate: list prices, only the nodes alive now, no disks or
    per-GB traffic."""
    usd = rate = 0.0
    counted, unpriced = 0, []
    for raw in nodes:
        node = Node.of(raw)
        machine = find_machine(cloud, node.machine_type) if node.machine_type else None
        if machine is None:
            unpriced.append(f"{node.name} ({node.machine_type or 'no instance-type label'})")
            continue
        price = machine.spot_usd_per_hour if node.spot else machine.on_demand_usd_per_hour
        usd += price * hours_between(node.created, now)
        rate += price
        counted += 1
    items = fixed_items(estimated_cost or {}) if cluster_created is not None else []
    fixed_rate = sum(price for _, price in items)
    fixed = fixed_rate * hours_between(cluster_created, now)
    return Spend(usd=usd + fixed, usd_per_hour=rate + fixed_rate, counted=counted,
                 unpriced=unpriced, fixed_usd=fixed, fixed_usd_per_hour=fixed_rate,
                 fixed_items=tuple(name for name, _ in items))


def now_utc() -> datetime:
    return datetime.now(timezone.utc)
