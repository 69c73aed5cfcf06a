"""The headless service that gives every trainer pod a stable DNS name (`<job>-<i>.<service>`),
so pod 0 can be the c10d rendezvous host before any pod exists."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from workloads.names import RENDEZVOUS_PORT, JobNames

core = k8s.core.v1


def headless_service(name: str, names: JobNames, opts: pulumi.ResourceOptions) -> core.Service:
    return core.Service(
        name,
        metadata=k8s.meta.v1.ObjectMetaArgs(name=names.service, namespace=names.namespace,
                                            labels=names.common_labels),
        spec=core.ServiceSpecArgs(
            cluster_ip="None",
            selector=names.selector,
            # Peers must resolve pod 0 while it starts, before it is Ready (no probes in a batch job).
            publish_not_ready_addresses=True,
            ports=[core.ServicePortArgs(name="rendezvous", port=RENDEZVOUS_PORT,
                                        target_port=RENDEZVOUS_PORT, protocol="TCP")],
        ),
        opts=opts,
    )
