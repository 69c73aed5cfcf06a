"""The VPC: one subnetwork with pod and service ranges, NAT for private nodes, and firewalls.

GKE creates its own rules for node-to-control-plane and pod traffic; the only rule added here
lets GPU nodes reach each other on every port (NCCL picks ports at run time). Nothing is
opened to the internet: nodes have no public IPs and reach registries through Cloud NAT.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

PODS_RANGE = "pods"
SERVICES_RANGE = "services"
GPU_NODE_TAG = "gpu-node"  # network tag on every GPU node: the firewall's source and target
POD_PREFIX = 18  # 64 nodes at GKE's default 110 pods per node (/24 each)
SERVICE_PREFIX = 20  # 4096 Service IPs


@dataclass(frozen=True)
class SecondaryRanges:
    pods: str
    services: str


def secondary_ranges(node_cidr: str) -> SecondaryRanges:
    """Pod and service ranges that do not overlap the node range.

    Searched first in the node range's own /16, then in 10.0.0.0/8, so the default
    10.2.0.0/20 gives pods 10.2.64.0/18 and services 10.2.16.0/20: stable for a given setting.
    """
    nodes = ipaddress.ip_network(node_cidr)
    own = nodes.supernet(new_prefix=16) if nodes.prefixlen > 16 else nodes
    pools = [own, ipaddress.ip_network("10.0.0.0/8")]

    def first_free(prefix: int, taken: list[ipaddress.IPv4Network]) -> ipaddress.IPv4Network:
        for pool in pools:
            if pool.prefixlen > prefix:
                continue
            for candidate in pool.subnets(new_prefix=prefix):
                if not any(candidate.overlaps(t) for t in taken):
                    return candidate
        raise ValueError(f"no free /{prefix} next to gcp.networkCidr {node_cidr}")

    pods = first_free(POD_PREFIX, [nodes])
    services = first_free(SERVICE_PREFIX, [nodes, pods])
    return SecondaryRanges(pods=str(pods), services=str(services))


@dataclass(frozen=True)
class Network:
    network: gcp.compute.Network
    subnetwork: gcp.compute.Subnetwork
    nat: gcp.compute.RouterNat
    ranges: SecondaryRanges


def create_network(prefix: str, region: str, node_cidr: str,
                   opts: pulumi.ResourceOptions) -> Network:
    """VPC, subnetwork with secondary ranges and private Google access, router and NAT."""
    ranges = secondary_ranges(node_cidr)
    network = gcp.compute.Network(
        f"{prefix}-vpc", auto_create_subnetworks=False, routing_mode="REGIONAL", opts=opts)
    subnetwork = gcp.compute.Subnetwork(
        f"{prefix}-nodes",
        network=network.id,
        region=region,
        ip_cidr_range=node_cidr,
        private_ip_google_access=True,  # private nodes reach Google APIs without NAT
        secondary_ip_ranges=[
            gcp.compute.SubnetworkSecondaryIpRangeArgs(range_name=PODS_RANGE,
                                                       ip_cidr_range=ranges.pods),
            gcp.compute.SubnetworkSecondaryIpRangeArgs(range_name=SERVICES_RANGE,
                                                       ip_cidr_range=ranges.services),
        ],
        opts=opts,
    )
    router = gcp.compute.Router(f"{prefix}-router", network=network.id, region=region, opts=opts)
    nat = gcp.compute.RouterNat(
        f"{prefix}-nat",
        router=router.name,
        region=region,
        nat_ip_allocate_option="AUTO_ONLY",
        source_subnetwork_ip_ranges_to_nat="ALL_SUBNETWORKS_ALL_IP_RANGES",
        log_config=gcp.compute.RouterNatLogConfigArgs(enable=True, filter="ERRORS_ONLY"),
        opts=opts,
    )
    gcp.compute.Firewall(
        f"{prefix}-gpu-to-gpu",
        network=network.id,
        description="GPU nodes talk to each other on every port (NCCL, c10d rendezvous).",
        direction="INGRESS",
        allows=[gcp.compute.FirewallAllowArgs(protocol="all")],
        source_tags=[GPU_NODE_TAG],
        target_tags=[GPU_NODE_TAG],
        opts=opts,
    )
    return Network(network=network, subnetwork=subnetwork, nat=nat, ranges=ranges)
