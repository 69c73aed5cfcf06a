"""The admission webhook servers the stack installs, and the port each listens on.

A webhook with failurePolicy Fail rejects every object it guards when the API server cannot
reach it. On a GKE cluster with private nodes the control plane reaches nodes only on 443 and
10250 unless a firewall rule opens more ("Adding firewall rules for specific use cases",
https://cloud.google.com/kubernetes-engine/docs/how-to/private-clusters#add_firewall_rules), so
infra/gcp opens exactly these ports from the control plane's range. The workload layer installs
the servers (workloads/jobset.py, workloads/pytorchjob.py); tests check each port against the
manifest that installs it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AdmissionWebhook:
    """One webhook server: the Service's targetPort is where the API server connects."""

    name: str
    namespace: str
    port: int
    source: str


ADMISSION_WEBHOOKS: tuple[AdmissionWebhook, ...] = (
    AdmissionWebhook(
        "jobset-webhook-service", "jobset-system", 9443,
        "kubernetes-sigs/jobset v0.10.1 config/components/webhook/service.yaml (targetPort 9443)"),
    AdmissionWebhook(
        "training-operator", "kubeflow", 9443,
        "kubeflow/trainer v1.9.4 manifests/base/service.yaml (webhook-server targetPort 9443); "
        "vendored in workloads/manifests/"),
)


def webhook_ports() -> list[int]:
    """Every port the control plane must reach on the nodes, once each, sorted."""
    return sorted({hook.port for hook in ADMISSION_WEBHOOKS})
