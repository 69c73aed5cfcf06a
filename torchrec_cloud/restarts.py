"""Why the gang restarted: a preemption or lost node, a node the health gate left out, a fault
of the trainer, or a configuration error that ends the job.

JobSet deletes the old generation's Jobs and pods when it restarts the gang, so the reasons are
read from what outlives them (workloads/jobset.py sets the rules that produce them):
- the JobSet's status: `restarts` (every restart) and `restartsCountTowardsMax` (restarts that
  used the retry budget: the default RestartJobSet action, i.e. a fault), jobset.x-k8s.io/v1alpha2
  JobSetStatus (pkg/controllers/failure_policy.go failurePolicyRecreateAll);
- the Job controller's Warning event on each failed child Job, reason = the Job's Failed
  condition reason, message = its message (kubernetes pkg/controller/job/job_controller.go:
  `recorder.Event(job, Warning, finishedCond.Reason, finishedCond.Message)`): "PodFailurePolicy"
  with "Container <c> for pod <ns>/<pod> failed with exit code <n> matching FailJob rule at
  index <i>" or "Pod <ns>/<pod> has condition DisruptionTarget matching FailJob rule at index
  <i>" (pod_failure_policy.go), and "BackoffLimitExceeded" for a crash (backoffLimit 0);
- the current pods' own terminations (state / lastState.terminated exitCode and reason, and a
  DisruptionTarget condition), read the same way.
Exit codes mean what trainer/exit_codes.py says.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from enum import Enum

from trainer.exit_codes import CONFIG_ERROR, FABRIC_ERROR, NODE_LEFT_OUT, RESUME
from workloads.waiting import ClusterView, Event

_EXIT = re.compile(r"failed with exit code (\d+)")
_DISRUPTION = re.compile(r"has condition DisruptionTarget")


class Cause(str, Enum):
    PREEMPTION = "preemption or lost node"
    NODE_LEFT_OUT = "node left out by the health gate"
    FAULT = "trainer fault"
    CONFIG = "configuration error"
    FABRIC = "fabric error"


_BY_EXIT = {RESUME: Cause.PREEMPTION, NODE_LEFT_OUT: Cause.NODE_LEFT_OUT,
            CONFIG_ERROR: Cause.CONFIG, FABRIC_ERROR: Cause.FABRIC}
# What each cause means for the user, and what to do.
ADVICE = {
    Cause.PREEMPTION: "not counted against maxRestarts; the gang resumed from its newest checkpoint",
    Cause.NODE_LEFT_OUT: "not counted; the gang restarted on other nodes",
    Cause.FAULT: "counted against maxRestarts (job.backoffLimit): read the log of the failed run",
    Cause.CONFIG: "the job failed at once: fix job.trainerArgs or the dataset, then pulumi up",
    Cause.FABRIC: "the job failed at once: the interconnect is unusable, see the gate's line in the log",
}


def cause_of_exit(code: int | None) -> Cause:
    """An exit status as trainer/exit_codes.py defines it; any other is a crash (a fault)."""
    return _BY_EXIT.get(code, Cause.FAULT) if code is not None else Cause.FAULT


@dataclass(frozen=True)
class Restart:
    cause: Cause
    evidence: str


def _job_of_ours(name: str, job: str) -> bool:
    return name == job or name.startswith(f"{job}-")


def restarts(view: ClusterView) -> list[Restart]:
    """Each failure the cluster still remembers, oldest first."""
    found: list[Restart] = []
    for event in sorted((Event.of(e) for e in view.events), key=lambda e: e.time):
        if event.kind != "Job" or not _job_of_ours(event.name, view.job):
            continue
        if event.reason == "PodFailurePolicy":
            m = _EXIT.search(event.message)
            if m:
                found.append(Restart(cause_of_exit(int(m.group(1))), event.line()))
            elif _DISRUPTION.search(event.message):
                found.append(Restart(Cause.PREEMPTION, event.line()))
        elif event.reason == "BackoffLimitExceeded":
            found.append(Restart(Cause.FAULT, event.line()))
    seen = {r.evidence for r in found}
    for pod in view.pods:
        meta = pod.get("metadata") or {}
        if (meta.get("labels") or {}).get("app.kubernetes.io/instance") != view.job:
            continue
        for status in (pod.get("status") or {}).get("containerStatuses") or []:
            for state in ((status.get("state") or {}).get("terminated"),
                          (status.get("lastState") or {}).get("terminated")):
                if not state or state.get("exitCode") in (0, None):
                    continue
                line = (f"Pod/{meta.get('name')} container {status.get('name')} exited "
                        f"{state.get('exitCode')} ({state.get('reason', '')})"
                        + (f" at {state['finishedAt']}" if state.get("finishedAt") else ""))
                if line not in seen:
                    found.append(Restart(cause_of_exit(state.get("exitCode")), line))
                    seen.add(line)
        disrupted = [c for c in (pod.get("status") or {}).get("conditions") or []
                     if c.get("type") == "DisruptionTarget" and c.get("status") == "True"]
        for c in disrupted:
            found.append(Restart(Cause.PREEMPTION, f"Pod/{meta.get('name')} DisruptionTarget "
                                 f"({c.get('reason', '')}): {c.get('message', '')}"))
    return found


def summary(view: ClusterView) -> list[str]:
    """Lines: the JobSet's counts, then each remembered failure with its cause and meaning."""
    status = (view.jobset or {}).get("status") or {}
    total = int(status.get("restarts") or 0)
    counted = int(status.get("restartsCountTowardsMax") or 0)
    max_restarts = (((view.jobset or {}).get("spec") or {}).get("failurePolicy") or {}).get("maxRestarts")
    found = restarts(view)
    if not total and not found:
        return ["no restarts"]
    limit = f" of maxRestarts {max_restarts}" if max_restarts is not None else ""
    lines = [f"{total} restarts of the gang: {counted} counted{limit} (faults), "
             f"{total - counted} not counted (preemptions, lost nodes, nodes left out)"]
    counts = Counter(r.cause for r in found)
    if counts:
        lines.append("remembered by the cluster (events last about an hour): "
                     + ", ".join(f"{n} {cause.value}" for cause, n in counts.items()))
    for r in found[-5:]:
        lines.append(f"  {r.cause.value}: {r.evidence}")
        lines.append(f"    {ADVICE[r.cause]}")
    return lines
