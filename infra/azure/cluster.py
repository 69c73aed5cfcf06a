"""The AKS control plane with its system pool, its upgrade policy, and the kubeconfig to reach it.

Tier: Standard (the uptime SLA) for a control plane in front of tens of dollars an hour of GPUs;
Premium when Long-Term Support is asked for, which requires it
(https://learn.microsoft.com/azure/aks/free-standard-pricing-tiers,
https://learn.microsoft.com/azure/aks/long-term-support).

Network policy: Azure CNI Overlay powered by Cilium (`networkPolicy: cilium` requires
`networkDataplane: cilium`), so the job's NetworkPolicy is enforced. Azure NPM for Linux is
retired on 2028-09-30 and Microsoft recommends Cilium for new clusters
(https://learn.microsoft.com/azure/aks/azure-cni-powered-by-cilium,
https://learn.microsoft.com/azure/aks/use-network-policies). Cilium handles the pods' Ethernet
interface only; the InfiniBand HCAs reach the pod through the RDMA device plugin, outside it.

Upgrades: cluster patch upgrades and node OS security patches (`SecurityPatch`: live patches,
a reimage only when a kernel fix needs one) run only inside one weekly 4-hour window, the
minimum AKS asks for with auto-upgrade (https://learn.microsoft.com/azure/aks/planned-maintenance,
https://learn.microsoft.com/azure/aks/auto-upgrade-node-os-image). Without a channel the API
default since 2023-06-01 is NodeImage: a weekly reimage of every node, with no window.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping

import pulumi
from pulumi_azure_native import authorization
from pulumi_azure_native import containerservice as aks

from infra.azure.identity import NETWORK_CONTRIBUTOR, assign_role
from infra.azure.kube_login import KubeLogin, use_login
from infra.azure.node_pools import declared_count
from infra.catalog.machines import machine
from infra.settings.model.stack_file import Settings

# Overlay CNI: pods get addresses outside the VNet, so these ranges must not overlap it.
POD_CIDR = "192.168.0.0/16"
SERVICE_CIDR = "172.16.0.0/16"
DNS_SERVICE_IP = "172.16.0.10"
MAINTENANCE_HOURS = 4  # "a maintenance window with a duration of four hours or more"
MAINTENANCE_UTC_OFFSET = "+00:00"
# The two schedules AKS recommends, one per auto-upgrade channel (planned-maintenance).
MAINTENANCE_CONFIGS = ("aksManagedAutoUpgradeSchedule", "aksManagedNodeOSUpgradeSchedule")
UPGRADE_CHANNEL = aks.UpgradeChannel.PATCH  # patches of the chosen minor; minors stay manual
NODE_OS_UPGRADE_CHANNEL = aks.NodeOSUpgradeChannel.SECURITY_PATCH
# Past the catalog's node-ready estimate, before the autoscaler gives up on a node (minutes).
NODE_READY_MARGIN_MINUTES = 15
# AKS's own default, said here because it is a choice: an idle GPU node after the job ends is
# released 10 minutes later (https://learn.microsoft.com/azure/aks/cluster-autoscaler).
SCALE_DOWN_UNNEEDED_TIME = "10m"
# Also AKS's default, stated so a change is a reviewed one: the pause of all scale-down, cluster
# wide, after any scale-up. Longer, one pool's scale-up would keep every idle node of every pool
# (GPUs included) that much longer; a node still building its drivers needs no such pause, it is
# unready and kept by scaleDownUnreadyTime (autoscaler_profile).
SCALE_DOWN_DELAY_AFTER_ADD = "10m"
# How long a scale-up may wait for its VM to register before the autoscaler calls it failed and
# backs off. Registration only: a registered ND node whose drivers are still building counts as
# unready (its GPUs are not allocatable: processors/customresources/gpu_processor.go) and is
# kept by scaleDownUnreadyTime. Longer would only delay seeing a VM that never registers (a spot
# allocation failure: the Azure provider reports a failed provisioning as a running instance
# unless fast delete is on, cloudprovider/azure/azure_scale_set.go), so a returning spot pool
# would resume that much later. ND boots and joins in about 10 minutes; AKS's default is 15m.
MAX_NODE_PROVISION_TIME = "25m"


def node_ready_budget_minutes(settings: Settings) -> int:
    """The longest a new GPU node of this stack may take to become useful (the catalog's
    node_ready_minutes: 45 for an ND with InfiniBand, whose DOCA-OFED and GPU drivers are
    compiled on the node), plus a margin."""
    longest = max((machine(settings.cloud, pool.machine_type).node_ready_minutes
                   for pool in settings.enabled_gpu_pools), default=0)
    return longest + NODE_READY_MARGIN_MINUTES


def autoscaler_profile(settings: Settings) -> aks.ManagedClusterPropertiesAutoScalerProfileArgs:
    """Cluster autoscaler settings that let a new ND node live until its drivers are built.

    A new ND node offers no `nvidia.com/gpu` (nor `rdma/ib`) until the GPU Operator and the
    Network Operator have compiled their drivers on it; the autoscaler treats a GPU node
    without allocatable GPUs as unready (kubernetes/autoscaler cluster-autoscaler/utils/gpu,
    processors/customresources/gpu_processor.go) and removes an unready node after
    scale-down-unready-time (AKS default 20m), a scale-up whose nodes are not ready after
    max-node-provision-time (AKS default 15m) is counted as failed and backed off, and more
    than ok-total-unready-count (AKS default 3) unready nodes above max-total-unready-percentage
    (45%) halt the autoscaler for the whole cluster (defaults and units: the AKS autoscaler
    profile reference, https://learn.microsoft.com/azure/aks/cluster-autoscaler, "Cluster
    autoscaler profile settings"; ManagedClusterPropertiesAutoScalerProfile in the 2025-09-01
    API: values are minutes written "<n>m"). Each is set from the node-ready budget:
    - scaleDownUnreadyTime: the budget, so a node whose drivers are still building is not
      removed;
    - maxNodeProvisionTime: 25m, registration only (MAX_NODE_PROVISION_TIME), so a VM that
      never registers (a spot allocation failure) holds the pool no longer than needed;
    - scaleDownDelayAfterAdd: 10m, AKS's default: it pauses scale-down for the whole cluster
      after any scale-up, so a longer one would keep idle GPU nodes that much longer;
    - okTotalUnreadyCount: every GPU node the pools may reach, so a whole gang building its
      drivers at once never halts the autoscaler;
    - scaleDownUnneededTime: 10m, AKS's default, so idle GPU nodes go about 10 minutes after
      the job ends (later only when a scale-up came in the 10 minutes before).
    Not settable on AKS (the profile has no such fields): the node-group backoff after a failed
    scale-up (Cluster Autoscaler defaults: 5 minutes, doubling to 30), and `--status-taint` /
    `--ignore-taint` (docs/azure.md says what holds instead)."""
    budget = f"{node_ready_budget_minutes(settings)}m"
    gpu_nodes = sum(pool.max_nodes for pool in settings.enabled_gpu_pools)
    return aks.ManagedClusterPropertiesAutoScalerProfileArgs(
        scale_down_unready_time=budget,
        max_node_provision_time=MAX_NODE_PROVISION_TIME,
        scale_down_delay_after_add=SCALE_DOWN_DELAY_AFTER_ADD,
        scale_down_unneeded_time=SCALE_DOWN_UNNEEDED_TIME,
        ok_total_unready_count=str(max(gpu_nodes, 3)),
    )


def system_pool_profile(settings: Settings, subnet_id: pulumi.Input[str],
                        version: str | None = None, live_nodes: Mapping[str, int] | None = None
                        ) -> aks.ManagedClusterAgentPoolProfileArgs:
    """The CPU pool for add-ons; untainted, so operators' controllers can run there. `version`:
    the minor its nodes run when the cluster keeps its version (None: the run's minor).
    `live_nodes`: each pool's node count in AKS now; the pool is declared at its own, as the GPU
    pools are (node_pools.declared_count), since every cluster update sends it."""
    pool = settings.system_pool
    return aks.ManagedClusterAgentPoolProfileArgs(
        name=pool.name,
        mode=aks.AgentPoolMode.SYSTEM,
        type=aks.AgentPoolType.VIRTUAL_MACHINE_SCALE_SETS,
        vm_size=pool.machine_type,
        count=declared_count(pool, live_nodes or {}),
        min_count=pool.min_nodes,
        max_count=pool.max_nodes,
        enable_auto_scaling=True,
        availability_zones=list(settings.zones),
        vnet_subnet_id=subnet_id,
        enable_node_public_ip=False,
        os_type=aks.OSType.LINUX,
        os_sku=aks.OSSKU.UBUNTU,
        orchestrator_version=version or settings.kubernetes.version,
    )


def create_cluster(prefix: str, settings: Settings, resource_group_name: pulumi.Input[str],
                   subnet_id: pulumi.Input[str], tags: dict[str, str],
                   opts: pulumi.ResourceOptions, system_pool_version: str | None = None,
                   live_nodes: Mapping[str, int] | None = None) -> aks.ManagedCluster:
    """OIDC issuer and workload identity on (the job's only way to storage), Entra-only when
    local accounts are disabled, API server reachable from the configured CIDRs only.

    Version: the run's minor (infra/kubernetes_release.py; settings.kubernetes.version holds
    it), never a patch: AKS takes "<major>.<minor>" and picks the latest patch, and the patch
    channel below keeps it current, so a kept cluster's input never changes between runs."""
    azure = settings.azure
    assert azure is not None  # the azure defaults always add this section
    entra_only = azure.disable_local_accounts
    return aks.ManagedCluster(
        f"{prefix}-aks",
        resource_group_name=resource_group_name,
        resource_name_=f"{prefix}-aks",
        dns_prefix=prefix,
        kubernetes_version=settings.kubernetes.version,
        node_resource_group=f"{prefix}-aks-nodes",
        identity=aks.ManagedClusterIdentityArgs(type=aks.ResourceIdentityType.SYSTEM_ASSIGNED),
        sku=aks.ManagedClusterSKUArgs(name=aks.ManagedClusterSKUName.BASE,
                                      tier=control_plane_tier(settings)),
        support_plan=(aks.KubernetesSupportPlan.AKS_LONG_TERM_SUPPORT if azure.long_term_support
                      else aks.KubernetesSupportPlan.KUBERNETES_OFFICIAL),
        auto_upgrade_profile=aks.ManagedClusterAutoUpgradeProfileArgs(
            upgrade_channel=UPGRADE_CHANNEL, node_os_upgrade_channel=NODE_OS_UPGRADE_CHANNEL),
        agent_pool_profiles=[system_pool_profile(settings, subnet_id, system_pool_version,
                                                 live_nodes)],
        auto_scaler_profile=autoscaler_profile(settings),
        network_profile=aks.ContainerServiceNetworkProfileArgs(
            network_plugin=aks.NetworkPlugin.AZURE,
            network_plugin_mode=aks.NetworkPluginMode.OVERLAY,
            network_dataplane=aks.NetworkDataplane.CILIUM,
            network_policy=aks.NetworkPolicy.CILIUM,
            pod_cidr=POD_CIDR,
            service_cidr=SERVICE_CIDR,
            dns_service_ip=DNS_SERVICE_IP,
        ),
        api_server_access_profile=aks.ManagedClusterAPIServerAccessProfileArgs(
            authorized_ip_ranges=list(settings.kubernetes.api_access_cidrs),
        ),
        oidc_issuer_profile=aks.ManagedClusterOIDCIssuerProfileArgs(enabled=True),
        security_profile=aks.ManagedClusterSecurityProfileArgs(
            workload_identity=aks.ManagedClusterSecurityProfileWorkloadIdentityArgs(enabled=True),
        ),
        enable_rbac=True,
        disable_local_accounts=entra_only,
        aad_profile=aks.ManagedClusterAADProfileArgs(managed=True, enable_azure_rbac=True)
        if entra_only else None,
        tags=tags,
        opts=opts,
    )


def control_plane_tier(settings: Settings) -> aks.ManagedClusterSKUTier:
    """Standard (financially backed uptime SLA); Premium when LTS needs it."""
    assert settings.azure is not None
    return (aks.ManagedClusterSKUTier.PREMIUM if settings.azure.long_term_support
            else aks.ManagedClusterSKUTier.STANDARD)


def create_maintenance_windows(prefix: str, settings: Settings, cluster: aks.ManagedCluster,
                               resource_group_name: pulumi.Input[str],
                               opts: pulumi.ResourceOptions) -> list[aks.MaintenanceConfiguration]:
    """The same weekly window for cluster patch upgrades and node OS patches, so training is
    interrupted at most once a week, at a time the settings choose."""
    azure = settings.azure
    assert azure is not None
    window = aks.MaintenanceWindowArgs(
        schedule=aks.ScheduleArgs(weekly=aks.WeeklyScheduleArgs(
            day_of_week=aks.WeekDay(azure.maintenance_day.value), interval_weeks=1)),
        duration_hours=MAINTENANCE_HOURS,
        start_time=azure.maintenance_start,
        utc_offset=MAINTENANCE_UTC_OFFSET,
    )
    return [aks.MaintenanceConfiguration(
        f"{prefix}-{name}",
        resource_group_name=resource_group_name,
        resource_name_=cluster.name,
        config_name=name,
        maintenance_window=window,
        opts=opts,
    ) for name in MAINTENANCE_CONFIGS]


def grant_subnet_to_cluster(prefix: str, cluster: aks.ManagedCluster,
                            subnet_id: pulumi.Input[str], subscription_id: pulumi.Input[str],
                            opts: pulumi.ResourceOptions) -> authorization.RoleAssignment:
    """With a subnet of our own, the cluster identity needs Network Contributor on it
    (https://learn.microsoft.com/azure/aks/concepts-network-cni-overview, prerequisites); `az aks
    create` grants it to a system-assigned identity after creation, so this program does too."""
    principal = cluster.identity.apply(lambda identity: identity.principal_id if identity else None)
    return assign_role(
        f"{prefix}-aks-subnet-network-contributor", role=NETWORK_CONTRIBUTOR,
        principal_id=principal, principal_type=authorization.PrincipalType.SERVICE_PRINCIPAL,
        scope=subnet_id, subscription_id=subscription_id, opts=opts)


def decode_kubeconfig(encoded: str, login: KubeLogin) -> str:
    """The credentials API returns the kubeconfig base64-encoded; its kubelogin signs in as the
    deployer does (infra/azure/kube_login.py), never by devicecode."""
    return use_login(base64.b64decode(encoded).decode(), login)


def user_kubeconfig(cluster: aks.ManagedCluster, resource_group_name: pulumi.Input[str],
                    provider: pulumi.ProviderResource, login: KubeLogin) -> pulumi.Output[str]:
    """The cluster-user kubeconfig (never the admin one), as a secret. With local accounts off
    it is an `exec` kubeconfig that needs `kubelogin` on the PATH."""
    credentials = aks.list_managed_cluster_user_credentials_output(
        resource_group_name=resource_group_name,
        resource_name=cluster.name,
        format="exec",
        opts=pulumi.InvokeOutputOptions(provider=provider, depends_on=[cluster]),
    )
    return pulumi.Output.secret(
        credentials.kubeconfigs.apply(lambda configs: decode_kubeconfig(configs[0].value, login)))
