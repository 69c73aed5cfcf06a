"""Node pools: a small system pool and the GPU pools (on-demand and spot), each its own resource.

Facts about the machine (accelerator type, GPU count) come from the catalog; sizes, spot and
placement come from the settings. Pools are keyed by what they are ("system", "onDemand",
"spot"), never by position.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from infra.catalog import Capacity, Cloud, Machine, machine, stop_notice
from infra.contract import GpuPool, Taint
from infra.gcp.interconnect import gpudirect_for
from infra.gcp.network import GPU_NODE_TAG, GpuNetwork
from infra.settings.model import NodePool, PoolChoice, Settings

POOL_LABEL = "torchrec-cloud/pool"
GKE_POOL_LABEL = "cloud.google.com/gke-nodepool"
GKE_SPOT_LABEL = "cloud.google.com/gke-spot"
# GKE taints every GPU pool with this itself; setting it again on the pool only makes a diff,
# so it is in the contract (the job tolerates it) and not in node_config.
GPU_TAINT = Taint(key="nvidia.com/gpu", value="present", effect="NoSchedule")
GPU_DRIVER_VERSION = "LATEST"  # GKE installs the newest driver for the node version
OAUTH_SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]  # IAM roles limit access

# Spot preemption: GKE's kubelet shuts the node down gracefully on the preemption notice (ACPI
# soft off), by default 30 s in all: 15 s for ordinary pods, then 15 s for system-critical pods
# (https://cloud.google.com/kubernetes-engine/docs/concepts/spot-vms, "Termination and graceful
# shutdown of Spot VMs"). A Standard Spot pool can extend the total to 120 s through the node
# system config's kubelet fields, on a control plane at GKE 1.35.0-gke.1171000 or later (same
# page; https://cloud.google.com/kubernetes-engine/docs/how-to/node-system-config). The API
# allows shutdownGracePeriodSeconds in {0, 30, 120} on Spot VMs only, and the critical-pods share
# <= it (https://cloud.google.com/kubernetes-engine/docs/reference/rest/v1/NodeConfig,
# NodeKubeletConfig). Critical pods keep GKE's default 15 s: they are the node's networking and
# the GKE metadata server, which the training pod needs to write its last checkpoint; they stop
# only after ordinary pods, so the training pod gets 120 - 15 = 105 s.
SPOT_SHUTDOWN_MIN_GKE_VERSION = (1, 35, 0, 1171000)  # 1.35.0-gke.1171000


@dataclass(frozen=True)
class Pools:
    system: gcp.container.NodePool
    gpu: dict[str, gcp.container.NodePool]  # "onDemand" / "spot"
    contract: dict[str, GpuPool]

    @property
    def all(self) -> list[gcp.container.NodePool]:
        return [self.system, *self.gpu.values()]


def gpu_pool_labels(pool: NodePool, spot: bool) -> dict[str, str]:
    """Labels every node of the pool carries; GKE adds the pool name and the spot label itself."""
    labels = {POOL_LABEL: pool.name, GKE_POOL_LABEL: pool.name}
    if spot:
        labels[GKE_SPOT_LABEL] = "true"
    return labels


def _shielded() -> gcp.container.NodePoolNodeConfigShieldedInstanceConfigArgs:
    return gcp.container.NodePoolNodeConfigShieldedInstanceConfigArgs(
        enable_secure_boot=True, enable_integrity_monitoring=True)


def _metadata_server() -> gcp.container.NodePoolNodeConfigWorkloadMetadataConfigArgs:
    # Pods see the GKE metadata server (workload identity), never the node's credentials.
    return gcp.container.NodePoolNodeConfigWorkloadMetadataConfigArgs(mode="GKE_METADATA")


def _autoscaling(pool: NodePool) -> gcp.container.NodePoolAutoscalingArgs:
    return gcp.container.NodePoolAutoscalingArgs(
        min_node_count=pool.min_nodes, max_node_count=pool.max_nodes)


def _management() -> gcp.container.NodePoolManagementArgs:
    return gcp.container.NodePoolManagementArgs(auto_repair=True, auto_upgrade=True)


def gke_version_key(version: str) -> tuple[int, ...]:
    """'1.35.0-gke.1171000' -> (1, 35, 0, 1171000); '1.35' -> (1, 35)."""
    release, _, build = version.partition("-gke.")
    parts = [int(part) for part in release.split(".") if part.isdigit()]
    return (*parts, int(build)) if build.isdigit() else tuple(parts)


def spot_shutdown_extended(version: str) -> bool:
    """Whether a control plane created at `version` accepts the 120 s Spot shutdown.

    A minor-only version ('1.35', what the settings take) makes GKE pick "the highest valid
    patch+gke.N patch in the 1.X version" (Cluster.initialClusterVersion,
    https://cloud.google.com/kubernetes-engine/docs/reference/rest/v1/projects.locations.clusters),
    never older than the first build that offers the setting.
    """
    key = gke_version_key(version)
    minimum = SPOT_SHUTDOWN_MIN_GKE_VERSION
    if key[:2] != minimum[:2]:
        return key[:2] > minimum[:2]
    return len(key) == 2 or key >= minimum


def spot_shutdown_grace(version: str) -> tuple[int, int]:
    """(total, critical-pods) seconds of graceful node shutdown a Spot node gives: ordinary pods,
    the training pod among them, get total - critical from the preemption notice on. The
    numbers are the catalog's (infra/catalog.py STOP_NOTICES), the one source of truth."""
    notice = stop_notice(Cloud.GCP, Capacity.SPOT, version if spot_shutdown_extended(version) else None)
    assert notice.notice_seconds is not None and notice.pod_seconds is not None
    return notice.notice_seconds, notice.notice_seconds - notice.pod_seconds


def spot_kubelet_config(version: str
                        ) -> gcp.container.NodePoolNodeConfigKubeletConfigArgs | None:
    """The kubelet fields that extend a Spot node's graceful shutdown, where GKE accepts them."""
    if not spot_shutdown_extended(version):
        return None
    total, critical = spot_shutdown_grace(version)
    return gcp.container.NodePoolNodeConfigKubeletConfigArgs(
        shutdown_grace_period_seconds=total,
        shutdown_grace_period_critical_pods_seconds=critical)


def gpu_node_config(pool: NodePool, gpu: Machine, spot: bool,
                    service_account: pulumi.Input[str], labels: dict[str, str],
                    kubernetes_version: str) -> gcp.container.NodePoolNodeConfigArgs:
    """A GPU node: the catalog's accelerators, gVNIC, GKE metadata server, shielded, tagged."""
    assert gpu.gcp_accelerator_type, f"{gpu.name} has no accelerator type in the catalog"
    own_labels = {k: v for k, v in labels.items() if not k.startswith("cloud.google.com/")}
    return gcp.container.NodePoolNodeConfigArgs(
        machine_type=pool.machine_type,
        guest_accelerators=[gcp.container.NodePoolNodeConfigGuestAcceleratorArgs(
            type=gpu.gcp_accelerator_type,
            count=gpu.gpu_count,
            gpu_driver_installation_config=(
                gcp.container.NodePoolNodeConfigGuestAcceleratorGpuDriverInstallationConfigArgs(
                    gpu_driver_version=GPU_DRIVER_VERSION)),
        )],
        spot=spot,
        kubelet_config=spot_kubelet_config(kubernetes_version) if spot else None,
        gvnic=gcp.container.NodePoolNodeConfigGvnicArgs(enabled=True),
        image_type="COS_CONTAINERD",
        disk_type="pd-ssd",
        disk_size_gb=200,
        service_account=service_account,
        oauth_scopes=OAUTH_SCOPES,
        workload_metadata_config=_metadata_server(),
        shielded_instance_config=_shielded(),
        labels=own_labels,  # GKE sets the cloud.google.com/ labels itself
        tags=[GPU_NODE_TAG],
    )


def gpu_network_config(gpu: Machine, fabric: bool, gpu_networks: Sequence[GpuNetwork]
                       ) -> gcp.container.NodePoolNetworkConfigArgs | None:
    """GPUDirect's NICs: one additional node network per GPU VPC (by name, as the API takes
    them), as cluster-toolkit's gke-node-pool sets `network_config.additional_node_network_configs`
    from the multivpc module (modules/compute/gke-node-pool/main.tf). Fixed at creation: GKE
    cannot add or remove a node pool's networks later."""
    direct = gpudirect_for(gpu, fabric)
    if direct is None:
        return None
    assert len(gpu_networks) >= direct.nics, f"{gpu.name} needs {direct.nics} GPU VPCs"
    return gcp.container.NodePoolNetworkConfigArgs(additional_node_network_configs=[
        gcp.container.NodePoolNetworkConfigAdditionalNodeNetworkConfigArgs(
            network=net.network.name, subnetwork=net.subnetwork.name)
        for net in gpu_networks[: direct.nics]])


def create_pools(prefix: str, settings: Settings, cluster: gcp.container.Cluster, zone: str,
                 service_account: pulumi.Input[str], opts: pulumi.ResourceOptions,
                 gpu_networks: Sequence[GpuNetwork] = ()) -> Pools:
    """The system pool and every enabled GPU pool, all in the GPU zone; with GPUDirect, each
    GPU pool whose machine has it gets the GPU VPCs as extra NICs."""
    sys_pool = settings.system_pool
    system = gcp.container.NodePool(
        f"{prefix}-{sys_pool.name}",
        name=sys_pool.name,
        cluster=cluster.id,
        location=zone,
        node_locations=[zone],
        initial_node_count=sys_pool.desired_nodes,
        autoscaling=_autoscaling(sys_pool),
        management=_management(),
        node_config=gcp.container.NodePoolNodeConfigArgs(
            machine_type=sys_pool.machine_type,
            image_type="COS_CONTAINERD",
            gvnic=gcp.container.NodePoolNodeConfigGvnicArgs(enabled=True),
            service_account=service_account,
            oauth_scopes=OAUTH_SCOPES,
            workload_metadata_config=_metadata_server(),
            shielded_instance_config=_shielded(),
            labels={POOL_LABEL: sys_pool.name},
        ),
        opts=opts,
    )
    gpu_pools: dict[str, gcp.container.NodePool] = {}
    contract: dict[str, GpuPool] = {}
    for choice, pool in settings.gpu_pools_by_key.items():
        key, spot = choice.value, choice == PoolChoice.SPOT
        gpu = machine(Cloud.GCP, pool.machine_type)
        labels = gpu_pool_labels(pool, spot)
        gpu_pools[key] = gcp.container.NodePool(
            f"{prefix}-{pool.name}",
            name=pool.name,
            cluster=cluster.id,
            location=zone,
            node_locations=[zone],
            initial_node_count=pool.desired_nodes,
            autoscaling=_autoscaling(pool),
            management=_management(),
            placement_policy=(
                gcp.container.NodePoolPlacementPolicyArgs(type="COMPACT")
                if settings.interconnect.placement else None),
            node_config=gpu_node_config(pool, gpu, spot, service_account, labels,
                                        settings.kubernetes.version),
            network_config=gpu_network_config(gpu, settings.interconnect.fabric, gpu_networks),
            # The autoscaler owns the size after creation.
            opts=pulumi.ResourceOptions.merge(
                opts, pulumi.ResourceOptions(ignore_changes=["initial_node_count"])),
        )
        contract[key] = GpuPool(
            name=pool.name, machine=gpu, min_nodes=pool.min_nodes,
            desired_nodes=pool.desired_nodes, max_nodes=pool.max_nodes, spot=spot,
            node_labels=labels, taints=[GPU_TAINT],
        )
    return Pools(system=system, gpu=gpu_pools, contract=contract)
