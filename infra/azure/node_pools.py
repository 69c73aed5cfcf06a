"""The GPU agent pools (on-demand and spot) and how the scheduler sees them.

Each GPU pool carries the cluster autoscaler's node-template tags on its scale set (AKS copies
an agent pool's tags to it), so a pool at zero nodes can grow for a pod that asks for GPUs and
InfiniBand: an empty scale set has no node to read `rdma/ib` from (kubernetes/autoscaler
@ 55c37cd5, cluster-autoscaler/cloudprovider/azure/README.md, "Scaling a VMSS node group to and
from 0"; parsing in azure_template.go and the tag prefixes in azure_util.go).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pulumi
from pulumi_azure_native import containerservice as aks

from infra.azure.interconnect import RDMA_HCA_MAX, RDMA_RESOURCE, uses_infiniband
from infra.catalog.machines import machine
from infra.contract import GpuPool, Taint
from infra.settings.model.job import PoolChoice
from infra.settings.model.pools import NodePool, SpotGpuPool
from infra.settings.model.stack_file import Settings

GPU_TAINT = Taint(key="sku", value="gpu", effect="NoSchedule")
# AKS taints and labels every spot node itself; the job must tolerate this to land there.
SPOT_TAINT = Taint(key="kubernetes.azure.com/scalesetpriority", value="spot", effect="NoSchedule")
SPOT_LABEL = ("kubernetes.azure.com/scalesetpriority", "spot")
# Spot eviction -> drain: AKS node auto-drain, on for every cluster with nothing to configure.
# Azure announces a Spot eviction as a Scheduled Event "Preempt" at least 30 s ahead
# (https://learn.microsoft.com/azure/virtual-machines/linux/scheduled-events); AKS answers a
# Preempt by cordoning and draining the node ("Redeploy and Preempt use the default behavior and
# don't require extra configuration", https://learn.microsoft.com/azure/aks/node-auto-drain), so
# the training pod is evicted with its own grace period. AKS calls it best effort and states no
# delay. The eviction policy stays Delete: deallocated Spot nodes count against compute quota and
# can break scaling and upgrades (https://learn.microsoft.com/azure/aks/spot-node-pool).
SPOT_EVICTION_POLICY = aks.ScaleSetEvictionPolicy.DELETE
# In-place upgrades of GPU pools: cordon and drain every node of the pool at once, never a surge
# node, which would be one more ND96 and its quota ("Using max unavailable for an in-place upgrade is
# recommended when obtaining additional quota or capacity is not possible for the upgrade
# surge"; maxUnavailable > 0 lets maxSurge be 0; AKS's default is a surge node:
# https://learn.microsoft.com/azure/aks/upgrade-aks-node-pools-rolling).
# Every node at once (maxUnavailable = maxNodes), as EKS (MINIMAL) and GKE do here: one node at a
# time restarts an N-node gang N times, each waiting for the next node's driver build.
GPU_MAX_SURGE = "0"


def gpu_max_unavailable(max_nodes: int) -> str:
    """The GPU pool's maxUnavailable: the whole pool (one gang restart an upgrade)."""
    return str(max(1, max_nodes))
POOL_LABEL = "torchrec-cloud/pool"
GPU_RESOURCE = "nvidia.com/gpu"
# Tag name prefixes the Azure cluster autoscaler reads (azure_util.go).
TEMPLATE_RESOURCES = "k8s.io_cluster-autoscaler_node-template_resources_"
TEMPLATE_LABEL = "k8s.io_cluster-autoscaler_node-template_label_"
TEMPLATE_TAINT = "k8s.io_cluster-autoscaler_node-template_taint_"


@dataclass(frozen=True)
class PoolPlan:
    """One GPU pool: its settings key ("onDemand"/"spot"), settings, and scheduling facts."""

    key: str
    pool: NodePool
    spot: bool
    # Every label and taint the nodes carry, set on the pool. A spot pool's include the ones AKS
    # adds to it anyway: AKS reports them in the pool's nodeLabels and nodeTaints
    # (https://learn.microsoft.com/azure/aks/spot-node-pool), so leaving them out is drift on
    # every refresh (kubernetes-sigs/cluster-api-provider-azure#3976), and a label update that
    # omits the spot label removes it from the nodes (Azure/AKS#3152).
    node_labels: dict[str, str]
    node_taints: tuple[Taint, ...]


def plan_pools(settings: Settings) -> list[PoolPlan]:
    """The enabled GPU pools, keyed as in the settings (never by position)."""
    plans = []
    for key, pool in settings.gpu_pools_by_key.items():
        spot = key == PoolChoice.SPOT
        plans.append(PoolPlan(
            key=key.value, pool=pool, spot=spot,
            node_labels={GPU_TAINT.key: GPU_TAINT.value, POOL_LABEL: pool.name,
                         **(dict([SPOT_LABEL]) if spot else {})},
            node_taints=(GPU_TAINT, *((SPOT_TAINT,) if spot else ()))))
    return plans


def resource_tag(resource: str) -> str:
    """`nvidia.com/gpu` -> `..._resources_nvidia.com_gpu`. The autoscaler turns both `_` and `~2`
    back into `/`, so a resource name with `_` has no tag and is refused here."""
    if "_" in resource:
        raise ValueError(f"{resource!r} cannot be declared to the cluster autoscaler: it reads "
                         "'_' in a node-template resource tag as '/'; rename the resource")
    return TEMPLATE_RESOURCES + resource.replace("/", "_")


def label_tag(prefix: str, key: str) -> str:
    """Label and taint keys: `/` is written `_` and `_` is written `~2` (Azure tag names may not
    contain `/`)."""
    return prefix + key.replace("_", "~2").replace("/", "_")


def scale_from_zero_tags(plan: PoolPlan, settings: Settings) -> dict[str, str]:
    """What a node of this pool offers (GPUs; the RDMA plugin's rdma/ib when InfiniBand is used),
    carries (labels) and repels (taints), for an autoscaler looking at an empty scale set."""
    gpu = machine(settings.cloud, plan.pool.machine_type)
    tags = {resource_tag(GPU_RESOURCE): str(gpu.gpu_count)}
    if uses_infiniband(settings, gpu):
        tags[resource_tag(RDMA_RESOURCE)] = str(RDMA_HCA_MAX)
    for key, value in sorted(plan.node_labels.items()):
        tags[label_tag(TEMPLATE_LABEL, key)] = value
    for taint in plan.node_taints:
        tags[label_tag(TEMPLATE_TAINT, taint.key)] = f"{taint.value}:{taint.effect}"
    return tags


def declared_count(pool: NodePool, live_nodes: Mapping[str, int]) -> int:
    """The node count to declare for an autoscaled pool: what AKS runs now on a live cluster,
    `desiredNodes` only when the pool does not exist yet.

    azure-native sends the whole pool on any change to it (a version, a tag, a label), count
    included; a count other than the live one is a manual scale, which AKS refuses for a pool
    with the autoscaler on ("Cannot manually scale AgentPool ... with cluster autoscaler
    enabled": hashicorp/terraform-provider-azurerm#4543, Azure/AKS#1627) or carries out, scaling
    a pool that runs the job back to `desiredNodes` (0 for GPU pools). `ignore_changes` cannot
    help: Pulumi would then send the count recorded in its state, the first run's. Kept within
    [minNodes, maxNodes], which AKS requires of an autoscaled pool's count."""
    nodes = live_nodes.get(pool.name)
    if nodes is None:
        return pool.desired_nodes
    return min(max(nodes, pool.min_nodes), pool.max_nodes)


def _taint_string(taint: Taint) -> str:
    return f"{taint.key}={taint.value}:{taint.effect}"


def create_gpu_pool(prefix: str, plan: PoolPlan, settings: Settings, cluster: aks.ManagedCluster,
                    resource_group_name: pulumi.Input[str], subnet_id: pulumi.Input[str],
                    placement_group_id: pulumi.Input[str] | None, tags: dict[str, str],
                    opts: pulumi.ResourceOptions, version: str | None = None,
                    live_nodes: Mapping[str, int] | None = None) -> aks.AgentPool:
    """A VMSS user pool in the GPU zone, without public IPs, tainted for GPU work only. The GPU
    driver is left to the GPU Operator (driver None), as Azure's InfiniBand guidance requires:
    the operator builds it against the OFED stack for GPUDirect RDMA.

    Version: `version`, the minor the pool's nodes run, when the cluster keeps its version (a
    pool is never upgraded unasked); else the run's minor, reached after the control plane (the
    pool names the cluster, so Pulumi updates the cluster first; AKS refuses a pool newer than
    its control plane).

    Count: the nodes the pool runs now (`live_nodes`, read from AKS), see declared_count."""
    pool = plan.pool
    spot: dict[str, object] = {}
    if plan.spot:
        assert isinstance(pool, SpotGpuPool)
        spot = dict(
            scale_set_priority=aks.ScaleSetPriority.SPOT,
            scale_set_eviction_policy=SPOT_EVICTION_POLICY,
            spot_max_price=float(pool.max_price),
        )
    return aks.AgentPool(
        f"{prefix}-pool-{pool.name}",
        resource_group_name=resource_group_name,
        resource_name_=cluster.name,
        agent_pool_name=pool.name,
        mode=aks.AgentPoolMode.USER,
        type=aks.AgentPoolType.VIRTUAL_MACHINE_SCALE_SETS,
        vm_size=pool.machine_type,
        count=declared_count(pool, live_nodes or {}),
        min_count=pool.min_nodes,
        max_count=pool.max_nodes,
        enable_auto_scaling=True,
        availability_zones=list(settings.gpu_zones),
        proximity_placement_group_id=placement_group_id,
        vnet_subnet_id=subnet_id,
        enable_node_public_ip=False,
        os_type=aks.OSType.LINUX,
        os_sku=aks.OSSKU.UBUNTU,  # the GPU and Network Operators support Ubuntu nodes
        orchestrator_version=version or settings.kubernetes.version,
        gpu_profile=aks.GPUProfileArgs(driver=aks.GPUDriver.NONE),
        node_labels=plan.node_labels,
        node_taints=[_taint_string(t) for t in plan.node_taints],
        # Spot pools take neither setting: AKS answers 400 "Spot pools can't set max surge" /
        # "... maxUnavailable" (hashicorp/terraform-provider-azurerm#31129) and upgrades them
        # without surge nodes anyway (https://learn.microsoft.com/azure/aks/spot-node-pool).
        upgrade_settings=None if plan.spot else aks.AgentPoolUpgradeSettingsArgs(
            max_surge=GPU_MAX_SURGE, max_unavailable=gpu_max_unavailable(pool.max_nodes)),
        tags={**tags, **scale_from_zero_tags(plan, settings)},
        **spot,  # type: ignore[arg-type]
        opts=opts,
    )


def contract_pool(plan: PoolPlan, settings: Settings) -> GpuPool:
    """The pool as the workload layer sees it."""
    pool = plan.pool
    return GpuPool(
        name=pool.name,
        machine=machine(settings.cloud, pool.machine_type),
        min_nodes=pool.min_nodes,
        desired_nodes=pool.desired_nodes,
        max_nodes=pool.max_nodes,
        spot=plan.spot,
        node_labels=plan.node_labels,
        taints=plan.node_taints,
    )
