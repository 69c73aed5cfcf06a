"""The VPC: a private subnet per zone for nodes, public subnets only for the NAT gateway.

Subnet ranges are derived from the zone's letter (us-east-1a -> block 0), not from its position
in the settings, so reordering or adding zones never moves an existing subnet.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

PRIVATE_PREFIX_STEP = 3  # /16 VPC -> /19 private subnets: VPC CNI gives every pod a VPC address
PUBLIC_PREFIX_STEP = 8  # /16 VPC -> /24 public subnets: they only hold the NAT gateway


@dataclass(frozen=True)
class Network:
    vpc: aws.ec2.Vpc
    private_subnets: dict[str, aws.ec2.Subnet]  # by zone
    public_subnets: dict[str, aws.ec2.Subnet]
    nat_gateway: aws.ec2.NatGateway
    # Routes in place: a node launched before these cannot reach ECR or S3 and never joins.
    ready: list[pulumi.Resource]


def zone_index(zone: str) -> int:
    """The zone letter as a number: 'us-east-1a' -> 0, 'us-east-1f' -> 5."""
    letter = zone[-1]
    if not "a" <= letter <= "f":
        raise ValueError(f"zone {zone!r} does not end in a letter a-f")
    return ord(letter) - ord("a")


def subnet_cidrs(vpc_cidr: str, zone: str) -> tuple[str, str]:
    """(private, public) CIDRs for a zone: private from the first blocks, public from the last."""
    vpc = ipaddress.ip_network(vpc_cidr)
    index = zone_index(zone)
    private_blocks = list(vpc.subnets(prefixlen_diff=PRIVATE_PREFIX_STEP))
    public_pool = private_blocks[-1]  # the last private-sized block is carved into public /24s
    public_blocks = list(public_pool.subnets(new_prefix=vpc.prefixlen + PUBLIC_PREFIX_STEP))
    return str(private_blocks[index]), str(public_blocks[index])


def create_network(prefix: str, vpc_cidr: str, zones: list[str], nat_zone: str,
                   cluster_name: str, region: str, opts: pulumi.ResourceOptions) -> Network:
    """VPC, subnets in every zone, one NAT gateway (in the GPU zone) and route tables."""
    vpc = aws.ec2.Vpc(f"{prefix}-vpc", cidr_block=vpc_cidr, enable_dns_hostnames=True,
                      enable_dns_support=True, tags={"Name": f"{prefix}-vpc"}, opts=opts)
    child = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(parent=vpc))
    igw = aws.ec2.InternetGateway(f"{prefix}-igw", vpc_id=vpc.id,
                                  tags={"Name": f"{prefix}-igw"}, opts=child)
    cluster_tag = {f"kubernetes.io/cluster/{cluster_name}": "shared"}
    private: dict[str, aws.ec2.Subnet] = {}
    public: dict[str, aws.ec2.Subnet] = {}
    for zone in zones:
        private_cidr, public_cidr = subnet_cidrs(vpc_cidr, zone)
        private[zone] = aws.ec2.Subnet(
            f"{prefix}-private-{zone}", vpc_id=vpc.id, availability_zone=zone,
            cidr_block=private_cidr, map_public_ip_on_launch=False,
            tags={"Name": f"{prefix}-private-{zone}", "kubernetes.io/role/internal-elb": "1",
                  **cluster_tag},
            opts=child)
        public[zone] = aws.ec2.Subnet(
            f"{prefix}-public-{zone}", vpc_id=vpc.id, availability_zone=zone,
            cidr_block=public_cidr, map_public_ip_on_launch=False,
            tags={"Name": f"{prefix}-public-{zone}", "kubernetes.io/role/elb": "1", **cluster_tag},
            opts=child)
    eip = aws.ec2.Eip(f"{prefix}-nat-{nat_zone}", domain="vpc",
                      tags={"Name": f"{prefix}-nat-{nat_zone}"}, opts=child)
    nat = aws.ec2.NatGateway(f"{prefix}-nat-{nat_zone}", allocation_id=eip.id,
                             subnet_id=public[nat_zone].id, tags={"Name": f"{prefix}-nat"},
                             opts=pulumi.ResourceOptions.merge(
                                 child, pulumi.ResourceOptions(depends_on=[igw])))
    public_routes = aws.ec2.RouteTable(
        f"{prefix}-public", vpc_id=vpc.id,
        routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", gateway_id=igw.id)],
        tags={"Name": f"{prefix}-public"}, opts=child)
    private_routes = aws.ec2.RouteTable(
        f"{prefix}-private", vpc_id=vpc.id,
        routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", nat_gateway_id=nat.id)],
        tags={"Name": f"{prefix}-private"}, opts=child)
    associations = []
    for zone in zones:
        associations.append(aws.ec2.RouteTableAssociation(
            f"{prefix}-public-{zone}", subnet_id=public[zone].id,
            route_table_id=public_routes.id, opts=child))
        associations.append(aws.ec2.RouteTableAssociation(
            f"{prefix}-private-{zone}", subnet_id=private[zone].id,
            route_table_id=private_routes.id, opts=child))
    s3 = s3_gateway_endpoint(prefix, vpc.id, region, [private_routes.id], child)
    return Network(vpc=vpc, private_subnets=private, public_subnets=public, nat_gateway=nat,
                   ready=[*associations, s3])


def s3_gateway_endpoint(prefix: str, vpc_id: pulumi.Input[str], region: str,
                        route_table_ids: list[pulumi.Input[str]],
                        opts: pulumi.ResourceOptions) -> aws.ec2.VpcEndpoint:
    """S3 traffic (image layers from ECR, which serves them from S3; checkpoints; the dataset)
    stays off the NAT gateway, which bills per GB; a gateway endpoint itself costs nothing
    (https://docs.aws.amazon.com/vpc/latest/privatelink/vpc-endpoints-s3.html; EKS lists it for
    private nodes: https://docs.aws.amazon.com/eks/latest/userguide/private-clusters.html)."""
    return aws.ec2.VpcEndpoint(
        f"{prefix}-s3", vpc_id=vpc_id, service_name=f"com.amazonaws.{region}.s3",
        vpc_endpoint_type="Gateway", route_table_ids=route_table_ids,
        tags={"Name": f"{prefix}-s3"}, opts=opts)
