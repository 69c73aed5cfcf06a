"""Kueue's Workload as evidence: the Workload the job owns, its QuotaReserved and Admitted
conditions, spec.active, and an eviction (Evicted, Requeued, status.requeueState); it answers held
(deactivated, never admitted again by itself), requeued after a PodsReady timeout (with the
autoscaler's last word on the evicted pods, from autoscaler.py) and waiting for admission."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from workloads.cloud_errors import Refusal
from workloads.waiting.autoscaler import refusal, refusal_step, refusal_texts
from workloads.waiting.verdict import Kind, Verdict
from workloads.waiting.view import ClusterView, Facts, conditions_of, name_of

# Where the words come from:
# - Kueue (pkg/scheduler/flavorassigner/flavorassigner.go, apis/kueue/v1beta2/workload_types.go):
#   the Workload's QuotaReserved=False condition, reasons WaitingForQuota / ExceedsMaxQuota /
#   Pending, message "couldn't assign flavors to pod set <name>: insufficient quota for <resource>
#   in flavor <flavor>, ... > maximum capacity (...)"; Admitted=False while admission checks wait.
# - Kueue v0.19.2, a held or requeued gang (apis/kueue/v1beta2/workload_types.go: spec.active,
#   status.requeueState {count, requeueAt}, condition Evicted with reasons PodsReadyTimeout and
#   Deactivated; pkg/workload/evict/evict.go IsEvictedByDeactivation: a reason that starts with
#   "Deactivated", written "Deactivated" + "DueTo" + the cause, e.g.
#   DeactivatedDueToRequeuingLimitExceeded with "The workload is deactivated due to exceeding the
#   maximum number of re-queuing retries" (pkg/controller/core/workload_controller.go
#   triggerDeactivation); a PodsReadyTimeout eviction says "Exceeded the PodsReady timeout
#   <ns/name>" and sets requeueState (workload.go UpdateRequeueState);
#   pkg/controller/jobframework/reconciler.go ~585-605 stops the job on Evicted=True and sets
#   Requeued=False with the eviction's reason until the backoff ends (Requeued=True,
#   BackoffFinished). A deactivated Workload is never admitted again until spec.active is set
#   back to true.

# The Workload's condition types read here (apis/kueue/v1beta2/workload_types.go, v0.19.2): this
# module is the one place that knows them; `status` and `list` ask it (workload_admission).
QUOTA_RESERVED = "QuotaReserved"
ADMITTED = "Admitted"
EVICTED = "Evicted"
REQUEUED = "Requeued"
# Kueue's Evicted reasons (apis/kueue/v1beta2/workload_types.go, v0.19.2).
EVICTED_PODS_READY_TIMEOUT = "PodsReadyTimeout"
EVICTED_DEACTIVATED = "Deactivated"  # a prefix: "DeactivatedDueTo<cause>"


def owned_workload(view: ClusterView) -> dict[str, Any] | None:
    """Kueue's Workload for the job: the one its JobSet (or PyTorchJob) owns; `status` reads it
    too (torchrec_cloud/status.py)."""
    kinds = {"JobSet", "PyTorchJob"}
    for wl in view.workloads:
        for owner in wl.get("metadata", {}).get("ownerReferences") or []:
            if owner.get("kind") in kinds and owner.get("name") == view.job:
                return wl
    return None


def is_admitted(wl: dict[str, Any]) -> bool:
    """Admitted=True: Kueue let the gang start (quota reserved and admission checks passed)."""
    return (conditions_of(wl).get(ADMITTED) or {}).get("status") == "True"


@dataclass(frozen=True)
class WorkloadAdmission:
    """Where Kueue stands on the job's Workload: admitted, with its ClusterQueue and flavors
    (status.admission.clusterQueue, podSetAssignments[].flavors), or the condition that says
    why not (Admitted once quota is reserved, else QuotaReserved; empty before either)."""

    name: str
    admitted: bool
    cluster_queue: str | None
    flavors: tuple[str, ...]
    waiting_on: dict[str, Any]


def workload_admission(view: ClusterView) -> WorkloadAdmission | None:
    """The job's Workload (owned_workload) as a WorkloadAdmission; None without one."""
    wl = owned_workload(view)
    if wl is None:
        return None
    conditions = conditions_of(wl)
    admission = (wl.get("status") or {}).get("admission") or {}
    flavors = sorted({f for a in admission.get("podSetAssignments") or []
                      for f in (a.get("flavors") or {}).values()})
    return WorkloadAdmission(
        name_of(wl), is_admitted(wl), admission.get("clusterQueue") or None, tuple(flavors),
        conditions.get(ADMITTED) or conditions.get(QUOTA_RESERVED) or {})


def _held(f: Facts, wl: dict[str, Any]) -> Verdict | None:
    """A deactivated Workload (spec.active false; Evicted reason Deactivated...): Kueue never
    admits it again by itself."""
    evicted = conditions_of(wl).get(EVICTED) or {}
    deactivated = (evicted.get("status") == "True"
                   and str(evicted.get("reason", "")).startswith(EVICTED_DEACTIVATED))
    if (wl.get("spec") or {}).get("active", True) is not False and not deactivated:
        return None
    name = name_of(wl)
    evidence = (f"Workload/{name} spec.active=false"
                + (f", Evicted=True ({evicted.get('reason', '')}): {evicted.get('message', '')}"
                   if deactivated else ""))
    found = refusal(f, refusal_texts(f, after_eviction=True))
    if found:
        evidence += f"; last refusal: {found[0]}"
    return Verdict(Kind.HELD, "held: Kueue deactivated the job's Workload (it gave up requeuing "
                   "it) and will not admit it again by itself", evidence,
                   f"after fixing the cause, reactivate it: kubectl -n {f.view.namespace} patch "
                   f"workload {name} --type merge -p '{{\"spec\":{{\"active\":true}}}}'")


def _requeued(f: Facts, wl: dict[str, Any]) -> Verdict | None:
    """Evicted for PodsReadyTimeout and waiting out the requeue backoff: no pods exist now, so
    the reason is read from what the autoscaler said about the gang's earlier pods."""
    conditions = conditions_of(wl)
    evicted, requeued = conditions.get(EVICTED) or {}, conditions.get(REQUEUED) or {}
    state = (wl.get("status") or {}).get("requeueState") or {}
    if not (evicted.get("status") == "True"
            and evicted.get("reason") == EVICTED_PODS_READY_TIMEOUT
            and requeued.get("status") != "True"):
        return None
    when = state.get("requeueAt") or "after its backoff"
    count = state.get("count")
    evidence = (f"Workload/{name_of(wl)} Evicted=True ({EVICTED_PODS_READY_TIMEOUT}): "
                f"{evicted.get('message', '')}; requeueState requeueAt={when}"
                + (f" count={count}" if count is not None else ""))
    found = refusal(f, refusal_texts(f, after_eviction=True))
    why, step = "the autoscaler's last word about its pods is below", (
        f"nothing to do: Kueue tries again at {when}; kubectl -n {f.view.namespace} describe "
        f"workload {name_of(wl)}")
    if found:
        line, m = found
        why = ("no quota" if m.refusal == Refusal.NO_QUOTA else "no capacity") + f": {line}"
        step = refusal_step(f, m, line)
        evidence += f"; last refusal: {line}"
    return Verdict(Kind.REQUEUED, f"requeued: the gang's pods were not all ready within "
                   f"waitForPodsReady's timeout, so Kueue evicted it; it is requeued at {when}"
                   + (f" (requeue {count})" if count is not None else "") + f"; why: {why}",
                   evidence, step)


def admission(f: Facts) -> Verdict | None:
    wl = owned_workload(f.view)
    if wl is None:
        return None
    held = _held(f, wl) or _requeued(f, wl)
    if held is not None:
        return held
    conditions = conditions_of(wl)
    reserved, admitted = conditions.get(QUOTA_RESERVED), conditions.get(ADMITTED)
    if is_admitted(wl):
        return None
    where = f"Workload/{name_of(wl)}"
    if reserved is None or reserved.get("status") != "True":
        c = reserved or {}
        message = c.get("message", "not yet considered by Kueue")
        if c.get("reason") == "ExceedsMaxQuota" or "maximum capacity" in message:
            step = ("the ClusterQueue's quota is smaller than the gang: raise its nominalQuota "
                    "for that flavor, or lower job.nodes")
        else:
            step = ("Kueue admits the whole gang when the quota frees up; see who holds it: "
                    "kubectl get clusterqueue -o wide; kubectl get workloads -A")
        return Verdict(Kind.ADMISSION, "waiting for admission: Kueue has not reserved quota "
                       "for the whole gang", f"{where} QuotaReserved=False "
                       f"({c.get('reason', '')}): {message}", step)
    c = admitted or {}
    return Verdict(Kind.ADMISSION, "waiting for admission: quota is reserved, admission checks "
                   "are not yet satisfied", f"{where} Admitted=False ({c.get('reason', '')}): "
                   f"{c.get('message', '')}",
                   f"kubectl -n {f.view.namespace} describe workload {name_of(wl)}")
