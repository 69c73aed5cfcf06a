"""The Cluster Autoscaler's word as evidence: its events on the pending pods (scale-up triggered,
or not and why; GKE's failed scale-up), its events and status YAML on the
kube-system/cluster-autoscaler-status ConfigMap (failed scale-ups, node groups in backoff) and, on
EKS, its log; it finds the newest cloud refusal in them (recognised by workloads/cloud_errors.py,
worded by cloud_steps.py) and answers no quota, no capacity, scale-up failed, will not scale up
and waiting for a node."""

from __future__ import annotations

from typing import Any

import yaml

from workloads import cloud_errors
from workloads.cloud_errors import Refusal
from workloads.waiting.cloud_steps import (aws_family, azure_provisioning_step, capacity_step,
                                           gang_vcpus, quota_step, reservation_step)
from workloads.waiting.verdict import Kind, Verdict
from workloads.waiting.view import Event, Facts

# Where the words come from:
# - Cluster Autoscaler pod events (processors/status/eventing_scale_up_processor.go; FAQ "What
#   events are emitted by CA?"): `TriggeredScaleUp` "pod triggered scale-up: [{<group> 0->2 (max:
#   2)}]" and `NotTriggerScaleUp` "pod didn't trigger scale-up: <n> <reason>, ..." with the reasons
#   "max node group size reached", "in backoff after failed scale-up", "not ready for scale-up",
#   "max cluster <resources> limit reached" (core/scaleup/orchestrator/skippedreasons.go).
# - Its events on kube-system/cluster-autoscaler-status: `FailedToScaleUpGroup` "Scale-up failed
#   for group %s: %v" (core/scaleup/orchestrator/executor.go) and `ScaleUpFailed` "Failed adding
#   %v nodes to group %v due to %v; source errors: %v" (clusterstate/clusterstate.go); the
#   ConfigMap's `status` YAML with nodeGroups[].scaleUp.status "Backoff" and
#   backoffInfo.errorCode/errorMessage (clusterstate/utils/status_test.yaml, CA 1.30+).
# - GKE's pod event `FailedScaleUp` "Node scale up in zones %v associated with this pod failed:
#   %v. Pod is at risk of not being scheduled." (GKE autoscaler's failed scale-up event logger).
# Cloud quota and capacity texts: workloads/cloud_errors.py.

AUTOSCALER_STATUS = "cluster-autoscaler-status"  # kube-system ConfigMap (FAQ.md)
SCALE_UP_FAILED_EVENTS = frozenset({"FailedScaleUp", "ScaleUpFailed", "FailedToScaleUpGroup"})


def autoscaler_node_groups(status_map: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The node groups of the autoscaler's status ConfigMap (YAML since CA 1.30; the older
    free-text status yields none here, its events still speak)."""
    if not status_map:
        return []
    try:
        status = yaml.safe_load((status_map.get("data") or {}).get("status") or "")
    except yaml.YAMLError:
        return []
    return list(status.get("nodeGroups") or []) if isinstance(status, dict) else []


def _backoffs(status_map: dict[str, Any] | None) -> list[str]:
    """Node groups in scale-up backoff in the autoscaler's status ConfigMap."""
    lines = []
    for group in autoscaler_node_groups(status_map):
        scale_up = group.get("scaleUp") or {}
        if scale_up.get("status") == "Backoff":
            info = scale_up.get("backoffInfo") or {}
            lines.append(f"ConfigMap/kube-system/{AUTOSCALER_STATUS} node group {group.get('name')}"
                         f" scale-up Backoff: {info.get('errorCode', '')}: "
                         f"{info.get('errorMessage', '')}")
    return lines


def refusal_texts(f: Facts, after_eviction: bool = False) -> list[str]:
    """Every line in which the autoscaler reports a cloud's refusal, newest last. With pods
    pending: the events about those pods. After Kueue evicted the gang (no pods now): the events
    about any pod of the job (named <job>-...), since they outlive the deleted pods."""
    if after_eviction:
        events = [e for e in f.all_events if e.kind == "Pod" and e.name.startswith(f"{f.view.job}-")]
    elif f.pending:
        events = f.events
    else:
        return []
    lines = [e.line() for e in events if e.reason in SCALE_UP_FAILED_EVENTS]
    lines += [Event.of(e).line() for e in sorted(f.view.autoscaler_events,
                                                 key=lambda e: Event.of(e).time)
              if Event.of(e).reason in SCALE_UP_FAILED_EVENTS]
    lines += _backoffs(f.view.autoscaler_status)
    lines += [line for line in f.view.autoscaler_log.splitlines() if "scaling failed" in line]
    return lines


def refusal(f: Facts, texts: list[str]) -> tuple[str, cloud_errors.CloudPattern] | None:
    """The newest line a cloud pattern recognises."""
    for line in reversed(texts):
        if m := cloud_errors.match(line):
            return line, m
    return None


def _gang_nodes(f: Facts) -> int | None:
    """The gang's node count: the JobSet's parallelism, else its trainer pods."""
    for replicated in ((f.view.jobset or {}).get("spec") or {}).get("replicatedJobs") or []:
        count = ((replicated.get("template") or {}).get("spec") or {}).get("parallelism")
        if isinstance(count, int):
            return count
    return len(f.trainers) or None


def _placement_texts(f: Facts) -> list[str]:
    out = []
    for pod in f.trainers:
        spec = pod.get("spec") or {}
        out += [f"{k}={v}" for k, v in (spec.get("nodeSelector") or {}).items()]
        out.append(str(spec.get("affinity") or ""))
    return out


def refusal_step(f: Facts, m: cloud_errors.CloudPattern, line: str) -> str:
    if m.refusal == Refusal.NO_QUOTA:
        family = aws_family([line, *_placement_texts(f)])
        return quota_step(f.cloud or m.cloud, f.spot, family, gang_vcpus(family, _gang_nodes(f)))
    if m.refusal == Refusal.NO_RESERVATION:
        return reservation_step()
    if m.likely and m.cloud == "azure":
        return azure_provisioning_step(f.view, f.spot)
    return capacity_step(f.spot)


def cloud_refusal(f: Facts) -> Verdict | None:
    texts = refusal_texts(f)
    found = refusal(f, texts)
    if found:
        line, m = found
        spot = "spot" if f.spot else "on-demand"
        step = refusal_step(f, m, line)
        if m.refusal == Refusal.NO_QUOTA:
            return Verdict(Kind.NO_QUOTA, f"no quota: the cloud refused a new {spot} GPU node "
                           "because the account's quota is used up", line, step)
        if m.refusal == Refusal.NO_RESERVATION:
            return Verdict(Kind.NO_CAPACITY, "no capacity in the reservation: the capacity "
                           "reservation the GPU pool launches into is full or not active yet",
                           line, step)
        if m.likely:
            return Verdict(Kind.NO_CAPACITY, f"no capacity (likely a stock-out): the cloud "
                           f"failed to create the {spot} GPU node", line, step)
        return Verdict(Kind.NO_CAPACITY, f"no capacity: the cloud has no {spot} GPU machine "
                       "to give in that zone now (a stock-out)", line, step)
    backoff = [e for e in f.events if e.reason == "NotTriggerScaleUp"
               and "in backoff after failed scale-up" in e.message]
    if texts or backoff:
        line = texts[-1] if texts else backoff[-1].line()
        where = ("aws autoscaling describe-scaling-activities --auto-scaling-group-name <group>"
                 if f.cloud == "aws" else "the node group's activity log in the cloud console")
        return Verdict(Kind.SCALE_UP_FAILED, "the autoscaler tried to add a node and the cloud "
                       "refused; it retries after a backoff", line,
                       f"kubectl -n kube-system describe configmap {AUTOSCALER_STATUS}; the "
                       f"cloud's reason is in {where}")
    return None


def _latest_autoscaler_event(f: Facts) -> Event | None:
    said = [e for e in f.events if e.reason in ("TriggeredScaleUp", "NotTriggerScaleUp")]
    return said[-1] if said else None


def no_scale_up(f: Facts) -> Verdict | None:
    latest = _latest_autoscaler_event(f)
    if latest is None or latest.reason != "NotTriggerScaleUp":
        return None
    if "max node group size reached" in latest.message:
        pool = "gpuPools.spot" if f.spot else "gpuPools.onDemand"
        return Verdict(Kind.NO_SCALE_UP, "the autoscaler will not add a node: the GPU pool is "
                       "at its maximum size", latest.line(),
                       f"raise {pool}.maxNodes to at least job.nodes (pulumi config set --path "
                       f"{pool}.maxNodes <n>, then pulumi up), or free a node")
    if "max cluster" in latest.message or "max total nodes" in latest.message:
        return Verdict(Kind.NO_SCALE_UP, "the autoscaler will not add a node: a cluster-wide "
                       "limit is reached", latest.line(),
                       "raise the cluster autoscaler's resource limits or max total nodes")
    return Verdict(Kind.NO_SCALE_UP, "the autoscaler will not add a node: no node pool it may "
                   "grow fits the pod", latest.line(),
                   "compare the pod's GPU request, node selector and tolerations with the pool "
                   f"(kubectl -n {f.view.namespace} describe pod "
                   f"{f.pending[0]['metadata']['name'] if f.pending else '<pod>'})")


def scaling_up(f: Facts) -> Verdict | None:
    latest = _latest_autoscaler_event(f)
    if latest is None or latest.reason != "TriggeredScaleUp":
        return None
    spot = "spot" if f.spot else "on-demand"
    return Verdict(Kind.SCALING_UP, f"waiting for a new {spot} GPU node: the autoscaler has "
                   "asked the cloud for it", latest.line(),
                   "a GPU node takes 5-15 minutes to join and load its drivers; run this "
                   "again: a refusal by the cloud shows here")
