"""The headless service that gives every trainer pod a stable DNS name (`<job>-<i>.<service>`),
so pod 0 can be the c10d rendezvous host before any pod exists."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from workloads.names import RENDEZVOUS_PORT, JobNames

core = k8s.core.v1


def service_spec(names: JobNames) -> dict[str, Any]:
    """The spec, as the API server takes it: the stack's job (`pulumi up`) and a submitted one
    (`torchrec-cloud submit`, workloads/submitted.py) both render it here."""
    return {
        "clusterIP": "None",
        "selector": dict(names.selector),
        # Peers must resolve pod 0 while it starts, before it is Ready (no probes in a batch job).
        "publishNotReadyAddresses": True,
        "ports": [{"name": "rendezvous", "port": RENDEZVOUS_PORT,
                   "targetPort": RENDEZVOUS_PORT, "protocol": "TCP"}],
    }


def service_manifest(names: JobNames, labels: Mapping[str, str]) -> dict[str, Any]:
    """The whole object, for a job `pulumi up` does not own."""
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": names.service, "namespace": names.namespace,
                         "labels": dict(labels)},
            "spec": service_spec(names)}


def headless_service(name: str, names: JobNames, opts: pulumi.ResourceOptions) -> core.Service:
    return core.Service(
        name,
        metadata=k8s.meta.v1.ObjectMetaArgs(name=names.service, namespace=names.namespace,
                                            labels=names.common_labels),
        spec=service_spec(names),
        opts=opts,
    )
