"""Resource group, virtual network, the node subnet and the subnet delegated to NetApp Files."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

import pulumi
from pulumi_azure_native import network, resources

ANF_DELEGATION = "Microsoft.NetApp/volumes"
ANF_SUBNET_PREFIX = 24  # Microsoft recommends a /24 (at least /28) for a delegated ANF subnet
# Pods reach the checkpoint account from the node subnet (overlay pods leave through their
# node's address); the account's firewall admits this subnet through the service endpoint
# (https://learn.microsoft.com/azure/virtual-network/virtual-network-service-endpoints-overview).
STORAGE_SERVICE_ENDPOINT = "Microsoft.Storage"


@dataclass(frozen=True)
class SubnetPlan:
    """The VNet split in two: nodes get the first half, NetApp Files a /24 of the second."""

    nodes: str
    netapp: str


def plan_subnets(vnet_cidr: str) -> SubnetPlan:
    """Derive the subnets from the VNet range, so one setting decides the whole address plan."""
    vnet = ipaddress.ip_network(vnet_cidr, strict=True)
    nodes, rest = vnet.subnets(prefixlen_diff=1)
    netapp = next(rest.subnets(new_prefix=max(ANF_SUBNET_PREFIX, rest.prefixlen)))
    return SubnetPlan(nodes=str(nodes), netapp=str(netapp))


@dataclass
class Network:
    resource_group: resources.ResourceGroup
    vnet: network.VirtualNetwork
    nodes_subnet: network.Subnet
    netapp_subnet: network.Subnet
    plan: SubnetPlan


def create_network(prefix: str, vnet_cidr: str, tags: dict[str, str],
                   opts: pulumi.ResourceOptions) -> Network:
    """One resource group holds everything except the AKS-managed node resource group and the
    kept checkpoint group (infra/azure/storage.py)."""
    group = resources.ResourceGroup(
        f"{prefix}-rg", resource_group_name=f"{prefix}-rg", tags=tags, opts=opts)
    plan = plan_subnets(vnet_cidr)
    vnet = network.VirtualNetwork(
        f"{prefix}-vnet",
        resource_group_name=group.name,
        virtual_network_name=f"{prefix}-vnet",
        address_space=network.AddressSpaceArgs(address_prefixes=[vnet_cidr]),
        tags=tags,
        opts=opts,
    )
    nodes = network.Subnet(
        f"{prefix}-nodes",
        resource_group_name=group.name,
        virtual_network_name=vnet.name,
        subnet_name="nodes",
        address_prefix=plan.nodes,
        service_endpoints=[network.ServiceEndpointPropertiesFormatArgs(
            service=STORAGE_SERVICE_ENDPOINT)],
        opts=opts,
    )
    netapp = network.Subnet(
        f"{prefix}-netapp",
        resource_group_name=group.name,
        virtual_network_name=vnet.name,
        subnet_name="netapp",
        address_prefix=plan.netapp,
        delegations=[network.DelegationArgs(name="netapp", service_name=ANF_DELEGATION)],
        # Azure refuses concurrent subnet writes in one VNet ("AnotherOperationInProgress").
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[nodes])),
    )
    return Network(resource_group=group, vnet=vnet, nodes_subnet=nodes, netapp_subnet=netapp,
                   plan=plan)
