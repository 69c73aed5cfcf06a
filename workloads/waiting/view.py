"""The input every waiting answer shares: `ClusterView` holds the cluster's objects as the API
returns them (recorded JSON; nothing here calls a cluster), `Event` reads core/v1 and
events.k8s.io/v1 Events the same way, `Facts` is what `decide.facts` works out once from a view
(our pods, the pending ones, the events about them, spot or not, the cloud), and the small
readers pick labels, names and conditions out of any object."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from workloads.names import JobNames


@dataclass(frozen=True)
class ClusterView:
    """What the classifier reads, each as the Kubernetes API returns it."""

    job: str
    namespace: str
    cloud: str | None = None  # "aws", "azure", "gcp"; None: read from the nodes' providerID
    jobset: dict[str, Any] | None = None  # the JobSet (or PyTorchJob) object
    pods: list[dict[str, Any]] = field(default_factory=list)  # every pod of the namespace
    events: list[dict[str, Any]] = field(default_factory=list)  # the namespace's events
    workloads: list[dict[str, Any]] = field(default_factory=list)  # Kueue Workloads there
    nodes: list[dict[str, Any]] = field(default_factory=list)
    autoscaler_status: dict[str, Any] | None = None  # the ConfigMap, if the cluster has one
    autoscaler_events: list[dict[str, Any]] = field(default_factory=list)  # on that ConfigMap
    autoscaler_log: str = ""  # the autoscaler's recent log where it runs as a pod (EKS)


@dataclass(frozen=True)
class Event:
    """core/v1 and events.k8s.io/v1 Events, read the same way."""

    reason: str
    message: str
    kind: str
    name: str
    time: str
    source: str

    @classmethod
    def of(cls, raw: dict[str, Any]) -> "Event":
        target = raw.get("involvedObject") or raw.get("regarding") or {}
        source = (raw.get("source") or {}).get("component") or raw.get("reportingComponent") \
            or raw.get("reportingController") or ""
        time = (raw.get("lastTimestamp") or (raw.get("series") or {}).get("lastObservedTime")
                or raw.get("deprecatedLastTimestamp") or raw.get("eventTime")
                or raw.get("firstTimestamp") or raw.get("metadata", {}).get("creationTimestamp")
                or "")
        return cls(reason=raw.get("reason") or "", message=raw.get("message") or raw.get("note")
                   or "", kind=target.get("kind") or "", name=target.get("name") or "",
                   time=str(time), source=source)

    def line(self) -> str:
        when = f", {self.time}" if self.time else ""
        by = f" ({self.source}{when})" if self.source or when else ""
        return f"{self.kind}/{self.name} {self.reason}{by}: {self.message}"


@dataclass(frozen=True)
class Facts:
    """The view, with what every answer asks of it worked out once (workloads/waiting/decide.py)."""

    view: ClusterView
    names: JobNames
    trainers: list[dict[str, Any]]
    preparers: list[dict[str, Any]]
    pending: list[dict[str, Any]]  # our pods with no node yet
    events: list[Event]  # events about our pending pods, oldest first
    all_events: list[Event]  # every event of the namespace, oldest first
    spot: bool
    cloud: str | None


def labels_of(obj: dict[str, Any]) -> dict[str, str]:
    return obj.get("metadata", {}).get("labels") or {}


def name_of(obj: dict[str, Any]) -> str:
    return obj.get("metadata", {}).get("name", "")


def conditions_of(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c.get("type", ""): c for c in (obj.get("status") or {}).get("conditions") or []}


def selected(pods: list[dict[str, Any]], selector: dict[str, str]) -> list[dict[str, Any]]:
    return [p for p in pods if all(labels_of(p).get(k) == v for k, v in selector.items())]
