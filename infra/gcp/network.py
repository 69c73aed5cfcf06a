"""The VPC: one subnetwork with pod and service ranges, NAT for private nodes, and firewalls;
with GPUDirect, one more VPC per GPU NIC.

GKE creates its own rules for node and pod traffic: `gke-<cluster>-<id>-vms` admits every TCP
and UDP port and ICMP from the node range to the nodes, `-all` every protocol from the pod
range (https://cloud.google.com/kubernetes-engine/docs/concepts/firewall-rules), which is all
NCCL and the c10d rendezvous need, so this stack adds no node-to-node rule of its own. The one
rule added here lets the control plane reach the admission webhooks the stack installs
(infra/webhooks.py). Nothing is opened to the internet: nodes have no public IPs and reach
registries through Cloud NAT.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from infra.webhooks import webhook_ports

PODS_RANGE = "pods"
SERVICES_RANGE = "services"
GPU_NODE_TAG = "gpu-node"  # network tag on every GPU node: the GPU VPCs' firewall target
# Kueue's visibility API (APIService v1beta2.visibility.kueue.x-k8s.io) is served by the Kueue
# controller pod on 8082 (Service kueue-visibility-server: port 443, targetPort 8082, Kueue's
# charts and manifests): the API server proxies to it like a webhook, and on a private cluster a
# closed port shows as FailedDiscoveryCheck on the APIService (kubectl warns on every call and
# namespace deletion retries on destroy).
KUEUE_VISIBILITY_PORT = 8082


def control_plane_ports() -> list[int]:
    """Ports on nodes the GKE control plane calls: the admission webhooks and Kueue's
    aggregated visibility API."""
    return [*webhook_ports(), KUEUE_VISIBILITY_PORT]


NODE_TAG = "torchrec-cloud-node"  # network tag on every node of the stack: the webhook rule's target
# The main VPC's MTU: 8896, the largest a VPC takes (1300-8896, https://cloud.google.com/vpc/docs/mtu)
# and the largest gVNIC carries (https://cloud.google.com/compute/docs/networking/using-gvnic).
# Node-to-node and pod-to-pod traffic in one VPC runs at the VPC's MTU (same page), so NCCL's
# sockets over gVNIC (A2, and A3 without GPUDirect) send 6x fewer packets than at GKE's 1460.
# Fixed at creation: changing it replaces the VPC and so the cluster.
MAIN_VPC_MTU = 8896
# The control plane's private range (private_cluster_config.master_ipv4_cidr_block): a /28 that
# overlaps no subnet of the VPC (https://cloud.google.com/kubernetes-engine/docs/how-to/private-clusters).
CONTROL_PLANE_PREFIX = 28
# GPUDirect's VPCs: one /20 each (4,096 nodes), carved in order from the first of these /16s
# that the cluster's own ranges do not touch. cluster-toolkit's A3 Mega blueprint uses
# 192.168.0.0/16 split into /20s (modules/network/multivpc: global_ip_address_range,
# subnetwork_cidr_suffix: 20); GKE refuses overlapping networks on one node.
GPU_NETWORK_SUPERNETS = ("192.168.0.0/16", "172.16.0.0/16", "172.17.0.0/16", "172.18.0.0/16")
GPU_SUBNET_PREFIX = 20
POD_PREFIX = 18  # 64 nodes at GKE's default 110 pods per node (/24 each)
SERVICE_PREFIX = 20  # 4096 Service IPs


@dataclass(frozen=True)
class SecondaryRanges:
    pods: str
    services: str
    control_plane: str  # not a secondary range: the private control plane's /28


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
    control_plane = first_free(CONTROL_PLANE_PREFIX, [nodes, pods, services])
    return SecondaryRanges(pods=str(pods), services=str(services),
                           control_plane=str(control_plane))


@dataclass(frozen=True)
class Network:
    network: gcp.compute.Network
    subnetwork: gcp.compute.Subnetwork
    nat: gcp.compute.RouterNat
    ranges: SecondaryRanges
    webhook_rule: gcp.compute.Firewall  # the job's objects must not be sent before it exists


def create_network(prefix: str, region: str, node_cidr: str,
                   opts: pulumi.ResourceOptions) -> Network:
    """VPC, subnetwork with secondary ranges and private Google access, router and NAT."""
    ranges = secondary_ranges(node_cidr)
    network = gcp.compute.Network(
        f"{prefix}-vpc", auto_create_subnetworks=False, routing_mode="REGIONAL",
        mtu=MAIN_VPC_MTU, opts=opts)
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
    webhook_rule = gcp.compute.Firewall(
        f"{prefix}-control-plane-to-webhooks",
        network=network.id,
        description="The GKE control plane calls the admission webhooks the stack installs "
                    "(JobSet, Kueue, the training operator) and Kueue's visibility API; private "
                    "nodes admit only 443 and 10250 from it otherwise.",
        direction="INGRESS",
        allows=[gcp.compute.FirewallAllowArgs(
            protocol="tcp", ports=[str(port) for port in control_plane_ports()])],
        source_ranges=[ranges.control_plane],
        target_tags=[NODE_TAG],
        opts=opts,
    )
    return Network(network=network, subnetwork=subnetwork, nat=nat, ranges=ranges,
                   webhook_rule=webhook_rule)


def gpu_subnet_ranges(node_cidr: str, count: int) -> list[str]:
    """`count` /20s for the GPU VPCs, clear of the node, pod and service ranges."""
    ranges = secondary_ranges(node_cidr)
    taken = [ipaddress.ip_network(c)
             for c in (node_cidr, ranges.pods, ranges.services, ranges.control_plane)]
    for supernet in map(ipaddress.ip_network, GPU_NETWORK_SUPERNETS):
        if not any(supernet.overlaps(t) for t in taken):
            return [str(s) for s in list(supernet.subnets(new_prefix=GPU_SUBNET_PREFIX))[:count]]
    raise ValueError(f"no free range for the GPU VPCs next to gcp.networkCidr {node_cidr}")


@dataclass(frozen=True)
class GpuNetwork:
    """The VPC behind one GPU NIC (eth1 ... ethN in the pod)."""

    nic: int  # 1-based, as the pod's interface and the Kubernetes Network object are numbered
    network: gcp.compute.Network
    subnetwork: gcp.compute.Subnetwork
    cidr: str


def create_gpu_networks(prefix: str, region: str, node_cidr: str, count: int, mtu: int,
                        source_tag: str, opts: pulumi.ResourceOptions) -> list[GpuNetwork]:
    """One VPC, subnet and internal firewall rule per GPU NIC, as cluster-toolkit's
    modules/network/multivpc makes them (network_count 4 on A3 High, 8 on A3 Mega; mtu 8244).

    The rule is multivpc's `enable_internal_traffic` (modules/network/vpc allow_internal_traffic:
    TCP, UDP and ICMP from the VPC's own range), limited to the GPU nodes. These VPCs carry only
    GPU-to-GPU traffic inside the zone: no router, no NAT, no route to the internet needed.
    """
    networks = []
    for nic, cidr in enumerate(gpu_subnet_ranges(node_cidr, count), start=1):
        network = gcp.compute.Network(
            f"{prefix}-gpu-nic{nic}", auto_create_subnetworks=False, routing_mode="REGIONAL",
            mtu=mtu, description=f"GPUDirect: GPU NIC {nic} (eth{nic} in the training pods)",
            opts=opts)
        subnetwork = gcp.compute.Subnetwork(
            f"{prefix}-gpu-nic{nic}", network=network.id, region=region, ip_cidr_range=cidr,
            opts=opts)
        gcp.compute.Firewall(
            f"{prefix}-gpu-nic{nic}-internal",
            network=network.id,
            description="GPU nodes talk to each other over this GPU NIC (GPUDirect).",
            direction="INGRESS",
            allows=[gcp.compute.FirewallAllowArgs(protocol=protocol)
                    for protocol in ("tcp", "udp", "icmp")],
            source_ranges=[cidr],
            target_tags=[source_tag],
            opts=opts,
        )
        networks.append(GpuNetwork(nic=nic, network=network, subnetwork=subnetwork, cidr=cidr))
    return networks
