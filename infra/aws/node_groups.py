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
import re

from collections.abc import Mapping
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws
import pulumi_eks as eks

from infra.catalog.machines import Machine
from infra.contract import GpuPool, Taint
from infra.aws.interconnect import EFA_RESOURCE, GPU_RESOURCE, node_hugepages, uses_efa
from infra.settings.model.cloud_options import CapacityReservation
from infra.settings.model.pools import NodePool

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
    placement: bool  # our own cluster placement group (never with a reservation: see gpu_node_group)
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


# IMDSv2 token responses go no further than the host's own network namespace: a pod on the pod
# network (the trainer, whose egress is open) cannot get a token, so it cannot read the node
# role's credentials (https://docs.aws.amazon.com/eks/latest/best-practices/identity-and-access-management.html,
# "Restrict access to the instance profile assigned to the worker node"). What still works:
# - host-network agents: the VPC CNI (aws-node) and kube-proxy (EKS add-ons), the EFA device
#   plugin (aws/eks-charts stable/aws-efa-k8s-device-plugin templates/daemonset.yaml:
#   `hostNetwork: true`; it reads /dev/infiniband, not IMDS);
# - the FSx CSI node plugin is on the pod network, and falls back to the Kubernetes API (its
#   node's providerID and zone labels) when instance metadata does not answer
#   (kubernetes-sigs/aws-fsx-csi-driver pkg/cloud/metadata.go, NewMetadataService); its
#   controller is given the region (infra/aws/addons.py fsx_csi_values);
# - Cluster Autoscaler reads AWS_REGION (chart value awsRegion) before it would ask IMDS
#   (cluster-autoscaler/cloudprovider/aws/aws_manager.go getRegion); the termination handler
#   in queue mode never builds an IMDS client (aws-node-termination-handler
#   cmd/node-termination-handler.go: `imdsDisabled := nthConfig.EnableSQSTerminationDraining`);
#   both, the CNI, the FSx controller and the job take credentials from IRSA, not the node role.
IMDS_HOP_LIMIT = 1


def _metadata() -> aws.ec2.LaunchTemplateMetadataOptionsArgs:
    """IMDSv2 only (session tokens), reachable from the host network only (IMDS_HOP_LIMIT)."""
    return aws.ec2.LaunchTemplateMetadataOptionsArgs(
        http_endpoint="enabled", http_tokens="required",
        http_put_response_hop_limit=IMDS_HOP_LIMIT)


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


# The EC2 guide's layout for EFA on instances with several network cards ("Maximize network
# bandwidth on Amazon EC2 instances with multiple network cards",
# https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-acc-inst-types.html): "For the
# primary network interface (network card index 0, device index 0), create an EFA (EFA with
# ENA) interface. You can't use an EFA-only network interface as the primary network
# interface." and "For each additional network interface, use the next unused network card
# index, device index 1, and either an EFA (EFA with ENA) or EFA-only network interface".
PRIMARY_DEVICE_INDEX = 0
ADDITIONAL_DEVICE_INDEX = 1


def efa_interfaces(machine: Machine, security_group_ids: list
                   ) -> list[aws.ec2.LaunchTemplateNetworkInterfaceArgs]:
    """One interface per network card, as the EC2 guide lays them out (above): card 0 the
    primary EFA-with-ENA interface (it carries the node's IP), every other card an EFA-only
    interface at device index 1. EFA-only interfaces take no IP address from the subnet (31 per
    p5 node otherwise) and add no Linux routes that could drop traffic
    (https://amazonaws.cn/en/new/2024/amazon-ec2-announces-efa-updates-for-scalability-with-aiml-applications).
    No public-IP setting on any of them: EC2 refuses associatePublicIPAddress on multi-interface
    launches, and the private subnets assign none. The groups go on each interface."""
    return [
        aws.ec2.LaunchTemplateNetworkInterfaceArgs(
            network_card_index=card,
            device_index=PRIMARY_DEVICE_INDEX if card == 0 else ADDITIONAL_DEVICE_INDEX,
            interface_type="efa" if card == 0 else "efa-only",
            security_groups=security_group_ids,
            delete_on_termination="true")
        for card in range(machine.efa_interfaces)
    ]


def gpu_launch_template(prefix: str, plan: NodeGroupPlan, security_group_ids: list,
                        placement_group_name: pulumi.Input[str] | None,
                        instance_tags: Mapping[str, str],
                        opts: pulumi.ResourceOptions) -> aws.ec2.LaunchTemplate:
    """IMDSv2, encrypted root, one EFA interface per network card, the placement group.

    `placement_group_name`: ours, or the capacity reservation's (an Output that may resolve to
    None: a reservation outside any placement group).

    Tags: the launch tags here are the ones at the group's creation, and later edits of them
    are ignored: each edit would be a new template version, and a group that follows its
    template's latest version replaces every node for it (EKS surges new nodes first, beyond
    the GPU quota; a Capacity Block group refuses the update unless at zero nodes). A tag edit
    reaches the GPU nodes launched after it through their Auto Scaling group instead
    (`tag_auto_scaling_group`), without replacing any."""
    machine = plan.pool.machine
    network_interfaces = None
    vpc_security_group_ids = security_group_ids
    if plan.efa:
        vpc_security_group_ids = None
        network_interfaces = efa_interfaces(machine, security_group_ids)
    placement = None
    if isinstance(placement_group_name, pulumi.Output):
        placement = placement_group_name.apply(
            lambda name: aws.ec2.LaunchTemplatePlacementArgs(group_name=name) if name else None)
    elif placement_group_name:
        placement = aws.ec2.LaunchTemplatePlacementArgs(group_name=placement_group_name)
    reservation, market, instance_type = _reservation(plan)
    return aws.ec2.LaunchTemplate(
        f"{prefix}-{plan.key}", metadata_options=_metadata(),
        block_device_mappings=_root_volume(GPU_ROOT_GIB),
        network_interfaces=network_interfaces, vpc_security_group_ids=vpc_security_group_ids,
        placement=placement, tag_specifications=_instance_tags(instance_tags),
        capacity_reservation_specification=reservation, instance_market_options=market,
        instance_type=instance_type,
        user_data=base64.b64encode(GPU_NODE_USER_DATA.encode()).decode() if plan.efa else None,
        update_default_version=True,
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(
            ignore_changes=[TAG_SPECIFICATIONS])))


TAG_SPECIFICATIONS = "tagSpecifications"  # the launch template's launch tags (wire name)


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


def _template_ref(template: aws.ec2.LaunchTemplate, held_version: str | None = None
                  ) -> aws.eks.NodeGroupLaunchTemplateArgs:
    return aws.eks.NodeGroupLaunchTemplateArgs(
        id=template.id, version=held_version or template.latest_version.apply(str))


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


def _tag_resource_name(key: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", key)


def tag_auto_scaling_group(prefix: str, cluster_name: str, plan: NodeGroupPlan,
                           group: eks.ManagedNodeGroup, instance_tags: Mapping[str, str],
                           resource_opts: pulumi.ResourceOptions) -> list[aws.autoscaling.Tag]:
    """Tag the Auto Scaling group EKS made for `group` (EKS copies no node group labels, taints
    or tags to it; terraform-aws-eks does the same with aws_autoscaling_group_tag):
    - the node-template tags, for the autoscaler only (not propagated to instances);
    - `instance_tags` (the stack's tags and the handler's), propagated to the instances the
      group launches from now on. Editing an Auto Scaling group's tags replaces no instance;
      for an instance tag that the launch template also sets, the group's value wins. EBS
      volumes take no tags from the group, so they keep the launch template's
      (https://docs.aws.amazon.com/autoscaling/ec2/userguide/ec2-auto-scaling-tagging.html)."""
    found = aws.eks.get_node_group_output(
        cluster_name=cluster_name, node_group_name=gpu_node_group_name(prefix, plan),
        opts=pulumi.InvokeOutputOptions(provider=resource_opts.provider, depends_on=[group]))
    asg_name = found.apply(lambda group: group.resources[0].autoscaling_groups[0].name)
    template_tags = [
        aws.autoscaling.Tag(
            f"{prefix}-{plan.pool.name}-{key.removeprefix(NODE_TEMPLATE + '/').replace('/', '-')}",
            autoscaling_group_name=asg_name,
            tag=aws.autoscaling.TagTagArgs(key=key, value=value, propagate_at_launch=False),
            opts=resource_opts)
        for key, value in scale_from_zero_tags(plan).items()
    ]
    launch_tags = [
        aws.autoscaling.Tag(
            f"{prefix}-{plan.pool.name}-tag-{_tag_resource_name(key)}",
            autoscaling_group_name=asg_name,
            tag=aws.autoscaling.TagTagArgs(key=key, value=value, propagate_at_launch=True),
            opts=resource_opts)
        for key, value in sorted(instance_tags.items())
    ]
    return [*template_tags, *launch_tags]


# --- how EKS replaces a GPU group's nodes (a version upgrade, EKS's own new AMI, a new
# launch template version) -------------------------------------------------------------------
# By default EKS surges: it raises the Auto Scaling group's maximum and desired size by up to
# twice the number of zones (or maxUnavailable) and launches the new nodes first
# (https://docs.aws.amazon.com/eks/latest/userguide/managed-node-update-behavior.html,
# "Scale up phase"): up to 2 more p4d beyond maxNodes and beyond the GPU quota the README asks
# for, so `pulumi up` failed mid-way with GPU nodes running. updateStrategy MINIMAL
# "terminates the old instances before launching the new instances ... useful in scenarios
# where you are constrained to resources or costs (for example, with hardware accelerators
# such as GPUs)" (https://docs.aws.amazon.com/eks/latest/APIReference/API_NodegroupUpdateConfig.html).
# maxUnavailable = the group's maximum: a gang loses its step when any one node goes, so all
# nodes are replaced at once and the job restarts once from its checkpoint, not once per node
# (EKS allows 1-100).
UPDATE_STRATEGY = "MINIMAL"
MAX_UNAVAILABLE_CAP = 100
# pulumi-eks' ManagedNodeGroup takes no updateConfig (pulumi-eks 4.4 ManagedNodeGroupArgs); it
# creates an aws.eks.NodeGroup child, whose inputs a `transforms` entry on the component sets
# (https://www.pulumi.com/docs/iac/concepts/options/transforms/).
NODE_GROUP_TYPE = "aws:eks/nodeGroup:NodeGroup"


def update_config(max_nodes: int) -> dict[str, object]:
    """The NodeGroup's updateConfig (wire names) for a GPU group of at most `max_nodes`."""
    return {"updateStrategy": UPDATE_STRATEGY,
            "maxUnavailable": min(max(max_nodes, 1), MAX_UNAVAILABLE_CAP)}


def replace_without_surge(max_nodes: int):
    """A transform giving the component's NodeGroup child `update_config(max_nodes)`."""
    def transform(args: pulumi.ResourceTransformArgs) -> pulumi.ResourceTransformResult | None:
        if args.type_ != NODE_GROUP_TYPE:
            return None
        return pulumi.ResourceTransformResult(
            props={**args.props, "updateConfig": update_config(max_nodes)}, opts=args.opts)
    return transform


@dataclass(frozen=True)
class LiveGroup:
    """A GPU node group as EKS describes it before this run changes anything."""

    version: str
    desired: int
    template_version: str | None = None  # the launch template version its nodes run


def live_group(cluster_name: str, name: str, opts: pulumi.InvokeOptions) -> LiveGroup | None:
    """DescribeNodegroup of an existing group; None when there is none (a first run) or EKS
    cannot be asked (the run then goes on as before)."""
    try:
        found = aws.eks.get_node_group(cluster_name=cluster_name, node_group_name=name, opts=opts)
    except Exception:  # noqa: BLE001 (no such group, or no answer: nothing to hold)
        return None
    sizes = found.scaling_configs or []
    templates = found.launch_templates or []
    return LiveGroup(version=found.version or "",
                     desired=int(sizes[0].desired_size) if sizes else 0,
                     template_version=str(templates[0].version) if templates and
                     templates[0].version else None)


def capacity_block_template_hold(plan: NodeGroupPlan, live: LiveGroup | None) -> str | None:
    """The launch template version a Capacity Block group with nodes keeps on this run: EKS
    updates such a group only at 0 nodes, and a new template version (a program upgrade, a
    changed setting) would fail `pulumi up` half way with GPU nodes running. The template itself
    still gets its new version; the group moves to it on the run after it is empty (the advice
    of capacity_block_version says how). None: the group follows the newest version."""
    if plan.capacity_type != "CAPACITY_BLOCK" or live is None or live.desired == 0:
        return None
    return live.template_version


def capacity_block_version(plan: NodeGroupPlan, target: str,
                           live: LiveGroup | None) -> tuple[str, str | None]:
    """(version for the group, advice or None). EKS updates a Capacity Block group only at
    desired size 0 ("When upgrading managed node groups with Capacity Blocks, make sure that
    the desired size of the node group is set to 0",
    https://docs.aws.amazon.com/eks/latest/userguide/capacity-blocks-mng.html). A group with
    nodes keeps the version it runs on this run (a kubelet may be up to three minors behind
    the control plane), and the advice says how to let it follow: suspend the job, let the
    autoscaler empty the group, `pulumi up` again, resume."""
    if (plan.capacity_type != "CAPACITY_BLOCK" or live is None or live.desired == 0
            or not live.version or live.version == target):
        return target, None
    return live.version, (
        f"GPU pool {plan.pool.name} (Capacity Block) keeps Kubernetes {live.version} on this run: "
        f"EKS moves a Capacity Block group to {target} only at 0 nodes, and it has "
        f"{live.desired}. Suspend the job (its pods leave, and Kueue does not restart a job "
        "suspended this way): `pulumi config set --path job.suspend true && pulumi up`; wait "
        "until the group has 0 nodes (idle nodes go after 10 minutes: `aws eks "
        "describe-nodegroup --cluster-name <cluster> --nodegroup-name <group> --query "
        "nodegroup.scalingConfig.desiredSize`); run `pulumi up` again; then resume: "
        "`pulumi config set --path job.suspend false && pulumi up`")


def gpu_node_group(prefix: str, cluster: eks.Cluster, plan: NodeGroupPlan,
                   node_role_arn: pulumi.Input[str], subnet_id: pulumi.Input[str], zone: str,
                   security_group_ids: list, instance_tags: Mapping[str, str],
                   kubernetes_version: str,
                   resource_opts: pulumi.ResourceOptions, opts: pulumi.ResourceOptions,
                   reservation_placement_group: pulumi.Input[str] | None = None,
                   held_template_version: str | None = None,
                   ) -> tuple[eks.ManagedNodeGroup, aws.ec2.PlacementGroup | None]:
    """One GPU group in the GPU zone's private subnet, in its own cluster placement group, or,
    on a capacity reservation, in the reservation's (`reservation_placement_group`, from
    infra/aws/reservations.py): a reservation made in a cluster placement group serves only
    launches that name that group, so a group of our own would never get a node
    (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/cr-cpg.html)."""
    placement_group = None
    placement_group_name: pulumi.Input[str] | None = reservation_placement_group
    if plan.placement:
        placement_group = aws.ec2.PlacementGroup(
            f"{prefix}-{plan.key}", strategy=aws.ec2.PlacementStrategy.CLUSTER,
            tags={"Name": f"{prefix}-{plan.key}", "zone": zone}, opts=resource_opts)
        placement_group_name = placement_group.name
    template = gpu_launch_template(prefix, plan, security_group_ids, placement_group_name,
                                   instance_tags, resource_opts)
    pool = plan.pool
    opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(
        transforms=[replace_without_surge(pool.max_nodes)]))
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
            launch_template=_template_ref(template, held_template_version)),
        opts=opts)
    return group, placement_group
