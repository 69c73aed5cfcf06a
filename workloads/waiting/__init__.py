"""Why the training gang is not running: one plain-language reason, the evidence and a next step.

Pure (it reads the Kubernetes objects as the API returns them and never talks to a cluster, so
`python -m workloads.why` and `status` share it and the tests feed it recorded objects), and split
by where the evidence comes from: view.py (what is read), verdict.py (the answer's shape),
pods.py (the JobSet, its pods, the scheduler's events, the nodes), kueue.py (the Workload),
autoscaler.py (the autoscaler's events, status ConfigMap and log, with the clouds' refusals that
workloads/cloud_errors.py recognises), cloud_steps.py (each cloud's next step for a refusal) and
decide.py (the one precedence); this module only re-exports their names, so callers import from
`workloads.waiting`."""

from __future__ import annotations

from workloads.waiting.autoscaler import (AUTOSCALER_STATUS, SCALE_UP_FAILED_EVENTS,
                                          autoscaler_node_groups)
from workloads.waiting.cloud_steps import (AWS_ON_DEMAND_P_QUOTA, AWS_SPOT_P_QUOTAS, aws_family,
                                           azure_provisioning_step, capacity_step, quota_step,
                                           reservation_step)
from workloads.waiting.decide import explain
from workloads.waiting.kueue import EVICTED_DEACTIVATED, EVICTED_PODS_READY_TIMEOUT
from workloads.waiting.pods import IMAGE_PULL_REASONS, SPOT_LABELS, UNHEALTHY_TAINT
from workloads.waiting.verdict import Kind, Verdict
from workloads.waiting.view import ClusterView, Event

__all__ = [
    "AUTOSCALER_STATUS", "AWS_ON_DEMAND_P_QUOTA", "AWS_SPOT_P_QUOTAS", "EVICTED_DEACTIVATED",
    "EVICTED_PODS_READY_TIMEOUT", "IMAGE_PULL_REASONS", "SCALE_UP_FAILED_EVENTS", "SPOT_LABELS",
    "UNHEALTHY_TAINT", "ClusterView", "Event", "Kind", "Verdict", "autoscaler_node_groups",
    "aws_family", "azure_provisioning_step", "capacity_step", "explain", "quota_step",
    "reservation_step",
]
