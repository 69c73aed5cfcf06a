"""Managed node groups: a small system group and the GPU groups (on-demand, spot).

Every group gets our own launch template, because pulumi-eks' generated one neither encrypts
the root volume nor lets us combine IMDSv2, EFA interfaces and a placement group we own.

Each GPU group's Auto Scaling group carries Cluster Autoscaler's node-template tags, so a group
at zero nodes can be grown for a pod that asks for GPUs, EFA devices and huge pages: the autoscaler reads
EKS' DescribeNodegroup for labels and taints only while a group has never had a node, and never
for extended resources such as vpc.amazonaws.com/efa (kubernetes/autoscaler @ 55c37cd5,
cluster-autoscaler/cloudprovider/aws/README.md, "Auto-Discovery Setup" and the
DescribeNodegroup note; tag parsing in aws_manager.go, extractAllocatableResourcesFromAsg).
"""

from __future__ import annotations

import base64
import hashlib

from collections.abc import Mapping
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws
import pulumi_eks as eks

from infra.catalog import Machine
from infra.contract import GpuPool, Taint
from infra.aws.interconnect import EFA_RESOURCE, GPU_RESOURCE, node_hugepages, uses_efa
from infra.settings.model import CapacityReservation, NodePool

POOL_LABEL = "torchrec-cloud/pool"
GPU_LABEL = "torchrec-cloud/gpu"
CAPACITY_LABEL = "torchrec-cloud/capacity"
# Cluster Autoscaler treats a node with this label as a GPU node whose GPUs the device plugin
# has not advertised yet, instead of scaling up again for the same pods
# (kubernetes/autoscaler cluster-autoscaler/cloudprovider/aws/README.md, "Special note on GPU
# instances"; GPULabel in cloudprovider/aws/aws_cloud_provider.go). Any value works.
ACCELERATOR_LABEL = "k8s.amazonaws.com/accelerator"
GPU_TAINT = Taint(key="nvidia.com/gpu", value="true", effect="NoSchedule")
SPOT_TAINT = Taint(key="torchrec-cloud/spot", value="true", effect="NoSchedule")
EKS_EFFECT = {"NoSchedule": "NO_SCHEDULE", "PreferNoSchedule": "PREFER_NO_SCHEDULE",
              "NoExecute": "NO_EXECUTE"}
ROOT_DEVICE = "/dev/xvda"  # AL2023 root volume
# Cluster Autoscaler's ASG tag prefixes for scaling up from zero nodes (AWS README above).
NODE_TEMPLATE = "k8s.io/cluster-autoscaler/node-template"
SYSTEM_ROOT_GIB = 50
# Node group versions: every group names the control plane's minor (`version`). EKS creates
# a group without one at the cluster's version and never moves it after a control-plane
# upgrade; the AMI (ami_type, no image id) is EKS' latest release of that minor. Named, the
# groups follow the minor this run chose (infra/kubernetes_release.py): unchanged on a kept
# cluster, the next minor on an upgrade, after the control plane (the groups depend on it)
# (https://docs.aws.amazon.com/eks/latest/userguide/update-managed-node-group.html).
GPU_ROOT_GIB = 200  # CUDA images are large; the dataset lives on FSx, not here


@dataclass(frozen=True)
class NodeGroupPlan:
    """One GPU group: what the scheduler sees (contract) and how EC2 builds it."""

    key: str  # "onDemand" / "spot"
    pool: GpuPool
    efa: bool
    placement: bool  # our own cluster placement group (never with a reservation: it has its own)
    reservation: CapacityReservation | None = None

    @property
    def capacity_type(self) -> str:
        """The EKS node group capacity type (https://docs.aws.amazon.com/eks/latest/APIReference/API_Nodegroup.html)."""
        if self.pool.spot:
            return "SPOT"
        if self.reservation is not None and self.reservation.capacity_block:
            return "CAPACITY_BLOCK"
        return "ON_DEMAND"


def gpu_pool_plan(key: str, pool: NodePool, machine: Machine, spot: bool, fabric: bool,
                  placement: bool, reservation: CapacityReservation | None = None
                  ) -> NodeGroupPlan:
    labels = {POOL_LABEL: pool.name, GPU_LABEL: "true",
              CAPACITY_LABEL: "spot" if spot else "on-demand",
              ACCELERATOR_LABEL: f"nvidia-{(machine.gpu_model or 'gpu').lower()}"}
    taints = [GPU_TAINT, SPOT_TAINT] if spot else [GPU_TAINT]
    return NodeGroupPlan(
        key=key,
        pool=GpuPool(name=pool.name, machine=machine, min_nodes=pool.min_nodes,
                     desired_nodes=pool.desired_nodes, max_nodes=pool.max_nodes, spot=spot,
                     node_labels=labels, taints=taints),
        efa=uses_efa(machine, fabric),
        placement=placement and reservation is None,
        reservation=reservation,
    )


def _metadata() -> aws.ec2.LaunchTemplateMetadataOptionsArgs:
    # IMDSv2 only (session tokens). Hop limit 2, as in EKS' own templates, because node agents
    # in containers (FSx CSI node, EFA plugin) read instance metadata; the node role they could
    # reach holds only kubelet's and ECR-read permissions, and the VPC CNI uses its own IRSA role.
    return aws.ec2.LaunchTemplateMetadataOptionsArgs(
        http_endpoint="enabled", http_tokens="required", http_put_response_hop_limit=2)


def _root_volume(size_gib: int) -> list[aws.ec2.LaunchTemplateBlockDeviceMappingArgs]:
    return [aws.ec2.LaunchTemplateBlockDeviceMappingArgs(
        device_name=ROOT_DEVICE,
        ebs=aws.ec2.LaunchTemplateBlockDeviceMappingEbsArgs(
            volume_size=size_gib, volume_type="gp3", encrypted="true",
            delete_on_termination="true"),
    )]


# What a launch tags: the instance, its volumes and its network interfaces (EFA included).
TAGGED_AT_LAUNCH = ("instance", "volume", "network-interface")


def _instance_tags(tags: Mapping[str, str]) -> list[aws.ec2.LaunchTemplateTagSpecificationArgs]:
    """The stack's tags (cost allocation) and the interruption handler's tag on every instance,
    volume and network interface a node group launches. Managed node groups launch from this
    template, so its tag specifications are how tags reach the nodes
    (https://docs.aws.amazon.com/eks/latest/userguide/launch-templates.html); the provider's
    default tags reach only resources Pulumi itself creates, not what an Auto Scaling group
    launches. The handler (infra/aws/interruption.py) recognises this cluster's nodes by its tag."""
    return [aws.ec2.LaunchTemplateTagSpecificationArgs(resource_type=kind, tags=dict(tags))
            for kind in TAGGED_AT_LAUNCH]


def system_launch_template(prefix: str, instance_tags: Mapping[str, str],
                           opts: pulumi.ResourceOptions) -> aws.ec2.LaunchTemplate:
    """No security groups here: EKS then attaches the cluster security group itself."""
    return aws.ec2.LaunchTemplate(
        f"{prefix}-system", metadata_options=_metadata(),
        block_device_mappings=_root_volume(SYSTEM_ROOT_GIB),
        tag_specifications=_instance_tags(instance_tags), update_default_version=True,
        opts=opts)


# RDMA (EFA) registers the trainer's memory, which counts against RLIMIT_MEMLOCK; the trainer is
# uid 1000, for whom IPC_LOCK does nothing, so the limit containers start with must be raised.
# The AL2023 AMI's containerd base runtime spec sets only RLIMIT_NOFILE
# (awslabs/amazon-eks-ami nodeadm base-runtime-spec.json); a NodeConfig's baseRuntimeSpec
# replaces that rlimit list, so it restates NOFILE and adds MEMLOCK unlimited
# (awslabs/amazon-eks-ami nodeadm doc/examples.md, "Modifying container RLIMITs"). EKS merges
# this MIME part with its own NodeConfig for managed node groups
# (https://docs.aws.amazon.com/eks/latest/userguide/launch-templates.html).
# Not RLIM_INFINITY (2**64 - 1): nodeadm merges the spec through JSON into float64 values, and
# 2**64 - 1 comes back as 18446744073709552000, which no longer fits the OCI spec's uint64 and
# breaks containerd. 2**53 (8 PiB) survives the round trip and is unlimited in practice.
UNLIMITED = 2**53
GPU_NODE_USER_DATA = f"""MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="TORCHREC"

--TORCHREC
Content-Type: application/node.eks.aws

---
apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  containerd:
    baseRuntimeSpec:
      process:
        rlimits:
          - type: RLIMIT_NOFILE
            soft: 65536
            hard: 1048576
          - type: RLIMIT_MEMLOCK
            soft: {UNLIMITED}
            hard: {UNLIMITED}

--TORCHREC--
"""


def gpu_launch_template(prefix: str, plan: NodeGroupPlan, security_group_ids: list,
                        placement_group: aws.ec2.PlacementGroup | None,
                        instance_tags: Mapping[str, str],
                        opts: pulumi.ResourceOptions) -> aws.ec2.LaunchTemplate:
    """IMDSv2, encrypted root, one EFA interface per network card, the placement group.

    Card 0 device 0 is the primary interface, EFA with ENA (it carries the node's IP); every
    other card gets an EFA-only interface at device index 0, as the current EC2 guide
    recommends for instances with several network cards (no public-IP setting on any of them:
    EC2 refuses associatePublicIPAddress on multi-interface launches, and the private subnets
    assign none): EFA-only interfaces take no IP address from the subnet (31 per
    p5 node otherwise) and add no Linux routes that could drop traffic
    (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-acc-inst-types.html;
    https://amazonaws.cn/en/new/2024/amazon-ec2-announces-efa-updates-for-scalability-with-aiml-applications)."""
    machine = plan.pool.machine
    network_interfaces = None
    vpc_security_group_ids = security_group_ids
    if plan.efa:
        # With network interfaces the groups go on each interface, not on the template.
        vpc_security_group_ids = None
        network_interfaces = [
            aws.ec2.LaunchTemplateNetworkInterfaceArgs(
                network_card_index=card, device_index=0,
                interface_type="efa" if card == 0 else "efa-only",
                security_groups=security_group_ids,
                delete_on_termination="true")
            for card in range(machine.efa_interfaces)
        ]
    placement = (aws.ec2.LaunchTemplatePlacementArgs(group_name=placement_group.name)
                 if placement_group is not None else None)
    reservation, market, instance_type = _reservation(plan)
    return aws.ec2.LaunchTemplate(
        f"{prefix}-{plan.key}", metadata_options=_metadata(),
        block_device_mappings=_root_volume(GPU_ROOT_GIB),
        network_interfaces=network_interfaces, vpc_security_group_ids=vpc_security_group_ids,
        placement=placement, tag_specifications=_instance_tags(instance_tags),
        capacity_reservation_specification=reservation, instance_market_options=market,
        instance_type=instance_type,
        user_data=base64.b64encode(GPU_NODE_USER_DATA.encode()).decode() if plan.efa else None,
        update_default_version=True, opts=opts)


def _reservation(plan: NodeGroupPlan) -> tuple[
        aws.ec2.LaunchTemplateCapacityReservationSpecificationArgs | None,
        aws.ec2.LaunchTemplateInstanceMarketOptionsArgs | None, str | None]:
    """(reservation target, market options, instance type) for the launch template.

    An On-Demand Capacity Reservation is targeted by id, so the group launches only into it
    (capacityReservationPreference left out: "capacity-reservations-only" is implied by a target,
    pulumi-aws LaunchTemplate docs). A Capacity Block also needs market type "capacity-block" and
    the instance type in the template itself
    (https://docs.aws.amazon.com/eks/latest/userguide/capacity-blocks-mng.html)."""
    if plan.reservation is None:
        return None, None, None
    target = aws.ec2.LaunchTemplateCapacityReservationSpecificationArgs(
        capacity_reservation_target=(
            aws.ec2.LaunchTemplateCapacityReservationSpecificationCapacityReservationTargetArgs(
                capacity_reservation_id=plan.reservation.id)))
    if not plan.reservation.capacity_block:
        return target, None, None
    return (target, aws.ec2.LaunchTemplateInstanceMarketOptionsArgs(market_type="capacity-block"),
            plan.pool.machine.name)


def _template_ref(template: aws.ec2.LaunchTemplate) -> aws.eks.NodeGroupLaunchTemplateArgs:
    return aws.eks.NodeGroupLaunchTemplateArgs(
        id=template.id, version=template.latest_version.apply(str))


def system_node_group(prefix: str, cluster: eks.Cluster, pool: NodePool,
                      node_role_arn: pulumi.Input[str], subnet_ids: list,
                      instance_tags: Mapping[str, str], kubernetes_version: str,
                      resource_opts: pulumi.ResourceOptions,
                      opts: pulumi.ResourceOptions) -> eks.ManagedNodeGroup:
    """`resource_opts` for the AWS resources, `opts` for the pulumi-eks component.
    `kubernetes_version`: the control plane's minor on this run (see "Node group versions" above)."""
    template = system_launch_template(prefix, instance_tags, resource_opts)
    return eks.ManagedNodeGroup(
        f"{prefix}-{pool.name}",
        eks.ManagedNodeGroupArgs(
            cluster=cluster, node_role_arn=node_role_arn,
            ami_type=eks.AmiType.AL2023_X86_64_STANDARD, instance_types=[pool.machine_type],
            version=kubernetes_version,
            capacity_type="ON_DEMAND",
            scaling_config=aws.eks.NodeGroupScalingConfigArgs(
                min_size=pool.min_nodes, desired_size=pool.desired_nodes,
                max_size=pool.max_nodes),
            ignore_scaling_changes=True,  # Cluster Autoscaler owns the size after creation
            subnet_ids=subnet_ids, labels={POOL_LABEL: pool.name},
            launch_template=_template_ref(template)),
        opts=opts)


def scale_from_zero_tags(plan: NodeGroupPlan) -> dict[str, str]:
    """Cluster Autoscaler node-template tags for one GPU group: what a node of it would offer
    (GPUs, EFA devices, from the catalog), carry (labels) and repel (taints)."""
    pool = plan.pool
    tags = {f"{NODE_TEMPLATE}/resources/{GPU_RESOURCE}": str(pool.machine.gpu_count)}
    if plan.efa:
        tags[f"{NODE_TEMPLATE}/resources/{EFA_RESOURCE}"] = str(pool.machine.efa_interfaces)
        for resource, quantity in node_hugepages(pool.machine).items():
            tags[f"{NODE_TEMPLATE}/resources/{resource}"] = quantity
    for key, value in sorted(pool.node_labels.items()):
        tags[f"{NODE_TEMPLATE}/label/{key}"] = value
    for taint in pool.taints:
        tags[f"{NODE_TEMPLATE}/taint/{taint.key}"] = f"{taint.value}:{taint.effect}"
    return tags


def gpu_node_group_name(prefix: str, plan: NodeGroupPlan) -> str:
    """The EKS node group's own name, known in advance so the program can look up its Auto
    Scaling group. It carries a digest of what EKS cannot change in place (instance type,
    capacity type), so a change that replaces the group also renames it: Pulumi creates the
    replacement before it deletes the old group, and EKS refuses two groups with one name."""
    replaced_by = f"{plan.pool.machine.name}/{'spot' if plan.pool.spot else 'on-demand'}"
    if plan.capacity_type == "CAPACITY_BLOCK":  # the capacity type cannot change in place
        replaced_by += "/capacity-block"
    digest = hashlib.sha256(replaced_by.encode()).hexdigest()[:6]
    return f"{prefix}-{plan.pool.name}-{digest}"


def tag_auto_scaling_group(prefix: str, cluster_name: str, plan: NodeGroupPlan,
                           group: eks.ManagedNodeGroup, resource_opts: pulumi.ResourceOptions
                           ) -> list[aws.autoscaling.Tag]:
    """Put the node-template tags on the Auto Scaling group EKS made for `group`. EKS does not
    copy node group labels, taints or tags to it (terraform-aws-eks does the same with
    aws_autoscaling_group_tag); the tags are not propagated to instances."""
    found = aws.eks.get_node_group_output(
        cluster_name=cluster_name, node_group_name=gpu_node_group_name(prefix, plan),
        opts=pulumi.InvokeOutputOptions(provider=resource_opts.provider, depends_on=[group]))
    asg_name = found.apply(lambda group: group.resources[0].autoscaling_groups[0].name)
    return [
        aws.autoscaling.Tag(
            f"{prefix}-{plan.pool.name}-{key.removeprefix(NODE_TEMPLATE + '/').replace('/', '-')}",
            autoscaling_group_name=asg_name,
            tag=aws.autoscaling.TagTagArgs(key=key, value=value, propagate_at_launch=False),
            opts=resource_opts)
        for key, value in scale_from_zero_tags(plan).items()
    ]


def gpu_node_group(prefix: str, cluster: eks.Cluster, plan: NodeGroupPlan,
                   node_role_arn: pulumi.Input[str], subnet_id: pulumi.Input[str], zone: str,
                   security_group_ids: list, instance_tags: Mapping[str, str],
                   kubernetes_version: str,
                   resource_opts: pulumi.ResourceOptions, opts: pulumi.ResourceOptions
                   ) -> tuple[eks.ManagedNodeGroup, aws.ec2.PlacementGroup | None]:
    """One GPU group in the GPU zone's private subnet, in its own cluster placement group."""
    placement_group = None
    if plan.placement:
        placement_group = aws.ec2.PlacementGroup(
            f"{prefix}-{plan.key}", strategy=aws.ec2.PlacementStrategy.CLUSTER,
            tags={"Name": f"{prefix}-{plan.key}", "zone": zone}, opts=resource_opts)
    template = gpu_launch_template(prefix, plan, security_group_ids, placement_group,
                                   instance_tags, resource_opts)
    pool = plan.pool
    group = eks.ManagedNodeGroup(
        f"{prefix}-{pool.name}",
        eks.ManagedNodeGroupArgs(
            cluster=cluster, node_role_arn=node_role_arn,
            node_group_name=gpu_node_group_name(prefix, plan),
            ami_type=eks.AmiType.AL2023_X86_64_NVIDIA,
            version=kubernetes_version,
            # A Capacity Block names its instance type in the launch template (_reservation).
            instance_types=None if plan.capacity_type == "CAPACITY_BLOCK" else [pool.machine.name],
            capacity_type=plan.capacity_type,
            # desiredSize is the size at creation only: afterwards Cluster Autoscaler owns it
            # (infra/aws/autoscaler.py), and a later `pulumi up` must not undo its work.
            scaling_config=aws.eks.NodeGroupScalingConfigArgs(
                min_size=pool.min_nodes, desired_size=pool.desired_nodes,
                max_size=max(pool.max_nodes, 1)),  # EKS needs maxSize >= 1
            ignore_scaling_changes=True,
            subnet_ids=[subnet_id], labels=dict(pool.node_labels),
            taints=[aws.eks.NodeGroupTaintArgs(key=t.key, value=t.value,
                                               effect=EKS_EFFECT[t.effect])
                    for t in pool.taints],
            launch_template=_template_ref(template)),
        opts=opts)
    return group, placement_group
