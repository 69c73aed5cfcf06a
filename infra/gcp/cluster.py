"""The GKE control plane: regional (three replicas, no downtime on its own upgrades), private
nodes in the GPU zone, locked down.

Regional, not zonal: a regional control plane is replicated across the region's zones and
stays up while GKE upgrades it, and costs the same cluster management fee
(https://cloud.google.com/kubernetes-engine/docs/concepts/regional-clusters,
https://cloud.google.com/kubernetes-engine/pricing), but GKE's free tier (USD 74.40 of credit a
month per billing account) applies "only to zonal and Autopilot clusters": this cluster pays
the full USD 0.10 an hour (docs/gcp.md, "Cost"). Its nodes still live where the pools say:
every pool names its zones (`node_locations`), so the GPU pools stay in the one GPU zone that
compact placement needs. The location is fixed at creation: a stack created zonal before this
change gets a new (regional) cluster on its next `pulumi up`; the bucket and the Filestore
share, and so the checkpoints and data, are kept.

The default node pool is removed at once: every pool is a separate NodePool resource, so a
pool change never replaces the cluster.
"""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp

from infra.gcp.identity import workload_pool
from infra.gcp.network import PODS_RANGE, SERVICES_RANGE, Network
from infra.gcp.versions import CHANNEL
from infra.kubernetes_release import Release
from infra.settings.model.stack_file import Settings

# DCGM needs managed Prometheus; GKE exposes GPU metrics from it on GKE 1.30.1+.
MONITORED_COMPONENTS = ["SYSTEM_COMPONENTS", "DCGM"]
# Dataplane V2 (Cilium): enforces NetworkPolicy without the Calico add-on ("Dataplane V2 ...
# always has network policy enforcement enabled",
# https://cloud.google.com/kubernetes-engine/docs/concepts/dataplane-v2) and is what GPUDirect's
# multi-networking needs. Fixed at creation.
DATAPATH_PROVIDER = "ADVANCED_DATAPATH"
# Automatic upgrades (control plane and nodes) only at weekends, 00:00-12:00 UTC on Saturday and
# on Sunday: 24 h a week, above GKE's floor of 48 h in any 32 days with windows of 4 h or more
# (https://cloud.google.com/kubernetes-engine/docs/concepts/maintenance-windows-and-exclusions;
# the weekend recurrence is the page's own example, FREQ=WEEKLY;BYDAY=SA,SU). Start and end give
# the time of day and the length only; the date is a past Saturday, in UTC ("Z") as GKE returns
# it, so the values never drift into a diff.
MAINTENANCE_START = "2025-01-04T00:00:00Z"  # a Saturday
MAINTENANCE_END = "2025-01-04T12:00:00Z"
MAINTENANCE_RECURRENCE = "FREQ=WEEKLY;BYDAY=SA,SU"


def gpu_zone(settings: Settings) -> str:
    """The one zone of the GPU pools (placement_needs_one_zone guarantees one with placement)."""
    return settings.gpu_zones[0]


def master_version(release: Release) -> str | None:
    """What `min_master_version` asks of GKE: nothing without kubernetes.version (GKE creates the
    cluster at its channel's default, the build infra/gcp/versions.py read as the default), else
    only the minor, a version alias GKE resolves itself ("1.X": "picks the highest valid
    patch+gke.N patch in the 1.X version", Cluster.initialClusterVersion and
    ClusterUpdate.desiredMasterVersion,
    https://cloud.google.com/kubernetes-engine/docs/reference/rest/v1/projects.locations.clusters).
    Never an exact build: this input is ignored after creation (below), and Pulumi then keeps
    the old stored value, also when the cluster must be replaced (pulumi/pulumi#2657), so an
    exact build would recreate the cluster at a build the channel dropped weeks ago. An upgrade
    the user set passes its new minor: the provider upgrades the control plane only while the
    current version is lower than this one (terraform-provider-google
    resource_container_cluster.go, "Only upgrade the master if the current version is lower
    than the desired version"), and "1.35" is above every 1.34 build."""
    if release.upgrade_from is not None or release.pinned:
        return release.minor
    return None


def ignored_after_creation(release: Release) -> list[str]:
    """Cluster inputs later runs leave alone: the default pool's (removed at once), the zones
    (the pools own them, below), and the version, except on the run that upgrades the control
    plane to the next minor the user set (infra/kubernetes_release.py): there the new build in
    `min_master_version` is what makes the provider upgrade it."""
    ignored = ["node_config", "initial_node_count", "node_locations"]
    return ignored if release.upgrade_from else [*ignored, "min_master_version"]


def private_cluster_config(network: Network) -> gcp.container.ClusterPrivateClusterConfigArgs:
    """Private nodes, and the control plane's private /28 in VPC Network Peering.

    Kept on purpose, although GKE now creates private clusters on Private Service Connect
    unless `master_ipv4_cidr_block` is given: this /28 is the one source range the admission
    webhook firewall rule (infra/gcp/network.py) can name, as GKE's firewall guide has users
    name it (the `gke-CLUSTER-HASH-master` rule's source, "master-ipv4-cidr"). A PSC control
    plane has no range GKE documents as the source of its webhook calls. The field itself is not
    deprecated (container v1 PrivateClusterConfig: only enable_private_nodes,
    enable_private_endpoint, master_global_access_config and private_endpoint_subnetwork are).
    Their replacements are not all in the installed pulumi-gcp 10.2: ip_endpoints_config takes
    only `enabled`, and there is no cluster-level default_enable_private_nodes, so
    enable_private_nodes and enable_private_endpoint stay here; Google's own cluster-toolkit
    gke-cluster module (2026-06) sets exactly these three.
    """
    return gcp.container.ClusterPrivateClusterConfigArgs(
        enable_private_nodes=True,  # no public IPs on nodes
        enable_private_endpoint=False,  # pulumi runs from outside; limited to the settings' CIDRs
        master_ipv4_cidr_block=network.ranges.control_plane,
    )


# GKE's cluster autoscaler and the catalog's node-ready budget (infra/catalog/machines.py
# node_ready_minutes, 30 on GCP, Kueue's PodsReady timeout). GKE lets a Standard cluster choose
# only the autoscaling profile (ClusterAutoscaling: autoscaling_profile, node auto-provisioning
# limits and locations; https://cloud.google.com/kubernetes-engine/docs/concepts/
# cluster-autoscaler, "Autoscaling profiles"); scale-down-unready-time, max-node-provision-time
# and the node-group backoff are GKE's own and not settable. What the stack relies on: a GPU
# node counts as unready until GKE's driver installer exposes nvidia.com/gpu (minutes, GKE
# installs the driver: node_pools.GPU_DRIVER_VERSION), well inside the upstream 20-minute
# scale-down-unready-time, so a node is not removed while it becomes useful; BALANCED (GKE's
# default, stated so a change is a reviewed one) keeps an unneeded node 10 minutes, longer than
# Kueue's 5-minute requeue cap (workloads/kueue.py BACKOFF_MAX_SECONDS), where
# OPTIMIZE_UTILIZATION removes nodes sooner and could take the first nodes of a gang still
# waiting for its last. Capacity that returns after failed scale-ups is retried behind the
# autoscaler's node-group backoff (upstream 5 minutes doubling to 30, kubernetes/autoscaler
# FAQ.md flags initial/max-node-group-backoff-duration), which GKE does not expose: a spot gang
# may resume up to about 30 minutes after spot capacity returns (docs/gcp.md).
AUTOSCALING_PROFILE = "BALANCED"


def secrets_encryption(key: str | None) -> gcp.container.ClusterDatabaseEncryptionArgs | None:
    """Application-layer encryption of Secrets with `key`; None leaves GKE's default (the
    field's DECRYPTED state)."""
    if key is None:
        return None
    return gcp.container.ClusterDatabaseEncryptionArgs(state="ENCRYPTED", key_name=key)


def create_cluster(prefix: str, settings: Settings, network: Network,
                   node_account_email: pulumi.Input[str], release: Release,
                   opts: pulumi.ResourceOptions,
                   multi_networking: bool = False) -> gcp.container.Cluster:
    """A regional GKE cluster at the release's version (infra/kubernetes_release.py,
    infra/gcp/versions.py), on Dataplane V2, reachable only from the configured CIDRs.

    The version is set at creation and on the run that upgrades the control plane (the user set
    the next minor); every other run leaves it alone (`min_master_version` ignored), as the
    channel upgrades the cluster by itself inside the maintenance window.

    `multi_networking` (GPUDirect on A3) turns on GKE multi-networking, which needs Dataplane
    V2: cluster-toolkit's gke-cluster sets `enable_multi_networking` and `datapath_provider =
    "ADVANCED_DATAPATH"` whenever additional networks are passed in (modules/scheduler/
    gke-cluster/main.tf); GKE: "Multi-network support for Pods requires GKE Dataplane V2"
    (https://cloud.google.com/kubernetes-engine/docs/how-to/setup-multinetwork-support-for-pods).
    Both are fixed at creation: turning the fabric on or off replaces the cluster. Dataplane V2
    is on for every cluster: it enforces the job's NetworkPolicy (workloads/network_policy.py).
    """
    assert settings.gcp is not None  # cloud_options_match + defaults guarantee it
    return gcp.container.Cluster(
        f"{prefix}-gke",
        location=settings.region,
        # The zones any pool uses (the GPU zone is one of them, rule zones_belong_to_the_region).
        # GKE: changing a cluster's locations "will update the NodePool.Locations of all node
        # pools" (https://cloud.google.com/kubernetes-engine/docs/reference/rest/v1/projects.
        # locations.clusters, `locations`), so the pools own their zones after creation and this
        # is ignored on later runs (below): a zone change moves the system pool, never the GPUs.
        node_locations=list(settings.zones),
        network=network.network.id,
        subnetwork=network.subnetwork.id,
        remove_default_node_pool=True,
        initial_node_count=1,
        deletion_protection=settings.gcp.deletion_protection,
        # The version at creation (the channel's default, or the pinned minor: master_version);
        # afterwards the release channel upgrades the cluster inside the maintenance window,
        # and this is ignored (below) except on an upgrade the user asked for: the new minor
        # here makes the provider upgrade the control plane at once, outside the window
        # (terraform-provider-google resource_container_cluster.go; cluster-toolkit
        # gke-cluster ignores min_master_version the same way).
        min_master_version=master_version(release),
        release_channel=gcp.container.ClusterReleaseChannelArgs(channel=CHANNEL),
        networking_mode="VPC_NATIVE",
        enable_multi_networking=True if multi_networking else None,
        datapath_provider=DATAPATH_PROVIDER,
        ip_allocation_policy=gcp.container.ClusterIpAllocationPolicyArgs(
            cluster_secondary_range_name=PODS_RANGE,
            services_secondary_range_name=SERVICES_RANGE,
        ),
        # The endpoints as GKE now models them (ControlPlaneEndpointsConfig): the IP endpoint,
        # which pulumi reaches from the settings' CIDRs (authorized networks, below), and the
        # DNS endpoint closed to traffic from outside Google, as cluster-toolkit's gke-cluster
        # sets it (`allow_external_traffic = var.enable_external_dns_endpoint`, default false).
        control_plane_endpoints_config=gcp.container.ClusterControlPlaneEndpointsConfigArgs(
            ip_endpoints_config=gcp.container.ClusterControlPlaneEndpointsConfigIpEndpointsConfigArgs(
                enabled=True),
            dns_endpoint_config=gcp.container.ClusterControlPlaneEndpointsConfigDnsEndpointConfigArgs(
                allow_external_traffic=False),
        ),
        private_cluster_config=private_cluster_config(network),
        master_authorized_networks_config=gcp.container.ClusterMasterAuthorizedNetworksConfigArgs(
            cidr_blocks=[
                gcp.container.ClusterMasterAuthorizedNetworksConfigCidrBlockArgs(
                    cidr_block=cidr, display_name=f"apiAccessCidrs {cidr}")
                for cidr in settings.kubernetes.api_access_cidrs
            ],
            gcp_public_cidrs_access_enabled=False,
        ),
        workload_identity_config=gcp.container.ClusterWorkloadIdentityConfigArgs(
            workload_pool=workload_pool(settings.gcp.project),
        ),
        addons_config=gcp.container.ClusterAddonsConfigArgs(
            gcp_filestore_csi_driver_config=(
                gcp.container.ClusterAddonsConfigGcpFilestoreCsiDriverConfigArgs(enabled=True)),
        ),
        monitoring_config=gcp.container.ClusterMonitoringConfigArgs(
            enable_components=MONITORED_COMPONENTS,
            managed_prometheus=gcp.container.ClusterMonitoringConfigManagedPrometheusArgs(
                enabled=True),
        ),
        maintenance_policy=gcp.container.ClusterMaintenancePolicyArgs(
            recurring_window=gcp.container.ClusterMaintenancePolicyRecurringWindowArgs(
                start_time=MAINTENANCE_START, end_time=MAINTENANCE_END,
                recurrence=MAINTENANCE_RECURRENCE),
        ),
        # Kubernetes Secrets encrypted with the user's Cloud KMS key (gcp.secretsKmsKey), at the
        # application layer, over Google's default encryption
        # (https://cloud.google.com/kubernetes-engine/docs/how-to/encrypting-secrets).
        database_encryption=secrets_encryption(settings.gcp.secrets_kms_key),
        cluster_autoscaling=gcp.container.ClusterClusterAutoscalingArgs(
            autoscaling_profile=AUTOSCALING_PROFILE),
        enable_shielded_nodes=True,
        # Without this the default pool would use the default compute account (Editor).
        node_config=gcp.container.ClusterNodeConfigArgs(
            service_account=node_account_email,
            shielded_instance_config=gcp.container.ClusterNodeConfigShieldedInstanceConfigArgs(
                enable_secure_boot=True, enable_integrity_monitoring=True),
            workload_metadata_config=gcp.container.ClusterNodeConfigWorkloadMetadataConfigArgs(
                mode="GKE_METADATA"),
        ),
        resource_labels=settings.tags,
        opts=pulumi.ResourceOptions.merge(
            opts, pulumi.ResourceOptions(ignore_changes=ignored_after_creation(release))),
    )
