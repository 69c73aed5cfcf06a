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

from infra.catalog.cloud import Cloud
from infra.catalog.machines import Machine, machine
from infra.catalog.stop_notices import Capacity, stop_notice
from infra.contract import GpuPool, Taint
from infra.gcp.interconnect import gpudirect_for
from infra.gcp.network import GPU_NODE_TAG, NODE_TAG, GpuNetwork
from infra.gcp.versions import NodeVersions
from infra.settings.model.job import PoolChoice
from infra.settings.model.pools import NodePool
from infra.settings.model.stack_file import Settings

POOL_LABEL = "torchrec-cloud/pool"
GKE_POOL_LABEL = "cloud.google.com/gke-nodepool"
GKE_SPOT_LABEL = "cloud.google.com/gke-spot"
# GKE taints GPU nodes nvidia.com/gpu=present:NoSchedule itself when a pool has accelerators;
# the pools state it anyway, as cluster-toolkit's gke-node-pool does (local.gpu_taint,
# modules/compute/gke-node-pool/main.tf), so what keeps other pods off GPU nodes is written here
# and in the contract (the job tolerates it), not left to GKE's implicit behaviour.
GPU_TAINT = Taint(key="nvidia.com/gpu", value="present", effect="NoSchedule")
GKE_TAINT_EFFECTS = {"NoSchedule": "NO_SCHEDULE", "PreferNoSchedule": "PREFER_NO_SCHEDULE",
                     "NoExecute": "NO_EXECUTE"}  # NodeConfig taint effects (REST enum)
GPU_DRIVER_VERSION = "LATEST"  # GKE installs the newest driver for the node version
OAUTH_SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]  # IAM roles limit access
GPU_BOOT_DISK_GB = 200
# GPU pools upgrade without a surge node: a surge would need one more
# 8-GPU machine of the same zone (and compact placement) that on-demand capacity rarely has and
# a reservation does not hold; blue-green needs a whole second pool and is refused with compact
# placement. cluster-toolkit's gke-node-pool defaults to exactly this (max_surge 0,
# max_unavailable 1, SURGE only; modules/compute/gke-node-pool/main.tf), and GKE advises it for
# reserved or scarce capacity ("Ensure resources for node upgrades",
# https://cloud.google.com/kubernetes-engine/docs/concepts/node-pool-upgrade-strategies).
# Upgrades run only in the cluster's weekend maintenance window (infra/gcp/cluster.py); the node
# is drained like a preemption, and the gang resumes from its newest checkpoint. Unlike
# cluster-toolkit, every node of the pool may go at once (max_unavailable = maxNodes): one node
# at a time restarts an N-node gang N times (each drain stops the whole gang, which then waits
# for the next node), while all at once restarts it once and still needs no extra quota.
GPU_UPGRADE = {"strategy": "SURGE", "max_surge": 0}


def gpu_upgrade_settings(max_nodes: int) -> dict[str, object]:
    """The GPU pool's upgrade: no surge machine, the whole pool at once (one gang restart)."""
    return {**GPU_UPGRADE, "max_unavailable": max(1, max_nodes)}
RESERVATION_KEY = "compute.googleapis.com/reservation-name"  # NodeConfig reservationAffinity
RESERVATION_TYPES = {"any": "ANY_RESERVATION", "specific": "SPECIFIC_RESERVATION"}


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
    # Flex-start pools scale with location policy ANY, as xpk (--location-policy=ANY,
    # src/xpk/core/capacity.py) and cluster-toolkit's gke-node-pool (main.tf) create them.
    flex_start = bool(getattr(pool, "flex_start", False))
    return gcp.container.NodePoolAutoscalingArgs(
        min_node_count=pool.min_nodes, max_node_count=pool.max_nodes,
        location_policy="ANY" if flex_start else None)


def _management(flex_start: bool = False) -> gcp.container.NodePoolManagementArgs:
    # Flex-start pools take no auto-repair (GKE's flex-start guide: --no-enable-autorepair;
    # cluster-toolkit gke-node-pool: "enable_flex_start needs node auto_repair set to false").
    return gcp.container.NodePoolManagementArgs(auto_repair=not flex_start, auto_upgrade=True)


def spot_shutdown_grace(version: str) -> tuple[int, int]:
    """(total, critical-pods) seconds of graceful node shutdown a Spot node on `version` gives:
    ordinary pods, the training pod among them, get total - critical from the preemption notice
    on. The numbers, and from which GKE build the 120 s apply, are the catalog's
    (infra/catalog/stop_notices.py STOP_NOTICES, compared by infra/kubernetes_versions.py version_reaches):
    GKE's kubelet gives Spot nodes 30 s (15 s for ordinary pods); a Standard Spot pool may
    extend the total to 120 s from GKE 1.35.0-gke.1171000 (https://cloud.google.com/kubernetes-engine/docs/concepts/spot-vms,
    https://cloud.google.com/kubernetes-engine/docs/how-to/node-system-config). Critical pods
    keep GKE's 15 s: they are the node's networking and the metadata server the last checkpoint
    upload needs."""
    notice = stop_notice(Cloud.GCP, Capacity.SPOT, version)
    assert notice.notice_seconds is not None and notice.pod_seconds is not None
    return notice.notice_seconds, notice.notice_seconds - notice.pod_seconds


def spot_shutdown_extended(version: str) -> bool:
    """Whether a Spot pool on `version` takes the kubelet's longer shutdown (the catalog's
    version-dependent notice applies)."""
    return stop_notice(Cloud.GCP, Capacity.SPOT, version).min_kubernetes is not None


def spot_kubelet_config(version: str
                        ) -> gcp.container.NodePoolNodeConfigKubeletConfigArgs | None:
    """The kubelet fields that extend a Spot node's graceful shutdown, where GKE accepts them."""
    if not spot_shutdown_extended(version):
        return None
    total, critical = spot_shutdown_grace(version)
    return gcp.container.NodePoolNodeConfigKubeletConfigArgs(
        shutdown_grace_period_seconds=total,
        shutdown_grace_period_critical_pods_seconds=critical)


def reservation_affinity(pool: NodePool, spot: bool = False
                         ) -> gcp.container.NodePoolNodeConfigReservationAffinityArgs | None:
    """The pool's reservation: a specific one by name (the label key GKE documents for it), any
    matching one, or, for spot and flex-start pools, explicitly none: cluster-toolkit's
    gke-node-pool requires NO_RESERVATION with flex-start and sets it for spot
    (modules/compute/gke-node-pool/main.tf, "enable_flex_start" and "spot" preconditions), and
    xpk creates flex-start pools with --reservation-affinity=none (src/xpk/core/capacity.py).
    An on-demand pool without a reservation keeps GKE's default."""
    reservation = getattr(pool, "reservation", None)
    if reservation is None:
        if spot or getattr(pool, "flex_start", False):
            return gcp.container.NodePoolNodeConfigReservationAffinityArgs(
                consume_reservation_type="NO_RESERVATION")
        return None
    kind = RESERVATION_TYPES[reservation.affinity.value]
    specific = kind == "SPECIFIC_RESERVATION"
    return gcp.container.NodePoolNodeConfigReservationAffinityArgs(
        consume_reservation_type=kind,
        key=RESERVATION_KEY if specific else None,
        values=[reservation.name] if specific else None)


def gpu_node_config(pool: NodePool, gpu: Machine, spot: bool,
                    service_account: pulumi.Input[str], labels: dict[str, str],
                    kubernetes_version: str, fast_socket: bool
                    ) -> gcp.container.NodePoolNodeConfigArgs:
    """A GPU node: the catalog's accelerators, boot disk type and bundled local SSDs (ephemeral
    storage), gVNIC, image streaming, NCCL Fast Socket where NCCL runs over gVNIC, the explicit
    GPU taint, GKE metadata server, shielded, tagged.

    Image streaming (gcfs) starts a pod before its ~10 GB image is fully pulled, for images in
    Artifact Registry or public Docker Hub, on COS containerd nodes with Private Google Access
    (the subnetwork has it), the Container File System API on (docs/gcp.md) and the node account
    holding Service Usage Consumer (infra/gcp/identity.py)
    (https://cloud.google.com/kubernetes-engine/docs/how-to/image-streaming, "Requirements").
    NCCL Fast Socket is GKE's NCCL network plugin for NCCL over gVNIC (A2, and A3 High/Mega
    without GPUDirect; never A3 Ultra, catalog `gcp_fast_socket`); it needs gVNIC, a COS node image, GKE 1.25.2-gke.1700+ and an accelerator pool
    (https://cloud.google.com/kubernetes-engine/docs/how-to/nccl-fast-socket), and the pods load
    it from /usr/local/nvidia/lib64, first on the trainer image's LD_LIBRARY_PATH.
    """
    assert gpu.gcp_accelerator_type, f"{gpu.name} has no accelerator type in the catalog"
    own_labels = {k: v for k, v in labels.items() if not k.startswith("cloud.google.com/")}
    flex_start = bool(getattr(pool, "flex_start", False))
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
        flex_start=True if flex_start else None,
        reservation_affinity=reservation_affinity(pool, spot),
        kubelet_config=spot_kubelet_config(kubernetes_version) if spot else None,
        gvnic=gcp.container.NodePoolNodeConfigGvnicArgs(enabled=True),
        gcfs_config=gcp.container.NodePoolNodeConfigGcfsConfigArgs(enabled=True),
        fast_socket=(gcp.container.NodePoolNodeConfigFastSocketArgs(enabled=True)
                     if fast_socket else None),
        image_type="COS_CONTAINERD",
        disk_type=gpu.gcp_boot_disk_type,
        disk_size_gb=GPU_BOOT_DISK_GB,
        ephemeral_storage_local_ssd_config=(
            gcp.container.NodePoolNodeConfigEphemeralStorageLocalSsdConfigArgs(
                local_ssd_count=gpu.gcp_local_ssds) if gpu.gcp_local_ssds else None),
        taints=[gcp.container.NodePoolNodeConfigTaintArgs(
            key=GPU_TAINT.key, value=GPU_TAINT.value, effect=GKE_TAINT_EFFECTS[GPU_TAINT.effect])],
        service_account=service_account,
        oauth_scopes=OAUTH_SCOPES,
        workload_metadata_config=_metadata_server(),
        shielded_instance_config=_shielded(),
        labels=own_labels,  # GKE sets the cloud.google.com/ labels itself
        tags=[NODE_TAG, GPU_NODE_TAG],
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
                 service_account: pulumi.Input[str], versions: NodeVersions,
                 opts: pulumi.ResourceOptions,
                 gpu_networks: Sequence[GpuNetwork] = ()) -> Pools:
    """The system pool in the settings' zones and every enabled GPU pool in the GPU zone; with
    GPUDirect, each GPU pool whose machine has it gets the GPU VPCs as extra NICs. Pools live at
    the cluster's location (the region) and name their zones. No pool names a version: GKE
    creates it at the control plane's and upgrades it with the channel; what depends on the
    version (a Spot pool's kubelet shutdown) reads the version the pool's nodes run
    (`versions`, infra/gcp/versions.py node_versions), which can lag the control plane's."""
    sys_pool = settings.system_pool
    system = gcp.container.NodePool(
        f"{prefix}-{sys_pool.name}",
        name=sys_pool.name,
        cluster=cluster.id,
        location=settings.region,
        node_locations=list(settings.zones),
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
            tags=[NODE_TAG],
        ),
        opts=opts,
    )
    gpu_pools: dict[str, gcp.container.NodePool] = {}
    contract: dict[str, GpuPool] = {}
    for choice, pool in settings.gpu_pools_by_key.items():
        key, spot = choice.value, choice == PoolChoice.SPOT
        gpu = machine(Cloud.GCP, pool.machine_type)
        labels = gpu_pool_labels(pool, spot)
        gpudirect = gpudirect_for(gpu, settings.interconnect.fabric) is not None
        gpu_pools[key] = gcp.container.NodePool(
            f"{prefix}-{pool.name}",
            name=pool.name,
            cluster=cluster.id,
            location=settings.region,
            node_locations=[zone],
            initial_node_count=pool.desired_nodes,
            autoscaling=_autoscaling(pool),
            management=_management(bool(getattr(pool, "flex_start", False))),
            upgrade_settings=gcp.container.NodePoolUpgradeSettingsArgs(
                **gpu_upgrade_settings(pool.max_nodes)),
            placement_policy=(
                gcp.container.NodePoolPlacementPolicyArgs(type="COMPACT")
                if settings.interconnect.placement else None),
            node_config=gpu_node_config(pool, gpu, spot, service_account, labels,
                                        versions.of(pool.name),
                                        fast_socket=gpu.gcp_fast_socket and not gpudirect),
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
