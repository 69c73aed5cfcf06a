"""Azure: AKS with GPU pools on InfiniBand, NetApp Files, Blob checkpoints (issue 5).

A thin component: each concern lives in its own module (network, cluster, node_pools,
interconnect, addons, netapp, storage, identity, registry, acr_login); this file derives the
globally unique names, wires the modules in order and hands the workload layer one `GpuCluster`
contract.
"""

from __future__ import annotations

import os

import pulumi
import pulumi_azure_native as azure_native
import pulumi_kubernetes as k8s
from pulumi_azure_native import authorization

from infra.azure.addons import create_addons
from infra.azure.audit import create_audit, workspace_name
from infra.azure.subscription import deployer_principal_type
from infra.azure.features import INFINIBAND_FEATURE, require_registered
from infra.azure.cluster import (create_cluster, create_maintenance_windows,
                                 grant_subnet_to_cluster, user_kubeconfig)
from infra.azure.identity import AKS_RBAC_CLUSTER_ADMIN, assign_role
from infra.azure.kube_access import granted_kubeconfig
from infra.azure.kube_login import AZURE_CLI, KubeLogin, deployer_login
from infra.azure.interconnect import create_placement_group, interconnect_spec, uses_infiniband
from infra.azure.netapp import check_netapp_zones, create_netapp, shared_file_system
from infra.azure.network import create_network
from infra.azure.node_pools import contract_pool, create_gpu_pool, plan_pools
from infra.azure.registry import REGISTRY_MAX_LENGTH, create_trainer_image
from infra.azure.quotas import check_job_quota
from infra.azure.rdma_admission import restrict_rdma
from infra.azure.skus import check_pool_zones
from infra.azure.upgrade import check_changes
from infra.azure.storage import (STORAGE_ACCOUNT_MAX_LENGTH, KeptStore, checkpoint_store,
                                 create_checkpoints, find_kept_store)
from infra.azure.versions import CLUSTER_GROUP_OUTPUT, LiveCluster, live_cluster
from infra.catalog.machines import machine
from infra.contract import GpuCluster, GpuClusterArgs
from infra.naming import name_prefix, stack_unique_prefix, unique_compact
from infra.previous_run import PreviousRun
from infra.settings.model.shared_file_system import AzureNetAppFiles

TYPE_TOKEN = "torchrec-cloud:azure:GpuCluster"
# True when this stack's checkpoint store was found after a destroy and imported, not created.
CHECKPOINT_ADOPTED_OUTPUT = "checkpoint_store_adopted"
# The node's Instance Metadata Service: a pod that reaches it can ask for the kubelet
# identity's tokens. Nothing in the job needs it (docs/azure.md "IMDS"): closed to the job's
# pods by a Cilium deny rule (workloads/network_policy.py deny_egress).
IMDS_CIDR = "169.254.169.254/32"


def names_in(prefix: str, subscription: str) -> dict[str, str]:
    """Storage account and registry names are global across Azure: each carries a stable hash
    of subscription, project and stack, so another deployment anywhere never collides and the
    same stack keeps its names on every run (and finds its kept checkpoint account again)."""
    scope = f"{subscription}/{pulumi.get_project()}/{pulumi.get_stack()}"
    return {
        "storage_account": unique_compact(prefix, "ckpt", scope, STORAGE_ACCOUNT_MAX_LENGTH),
        "registry": unique_compact(prefix, "acr", scope, REGISTRY_MAX_LENGTH),
    }


def global_names(prefix: str, subscription_id: pulumi.Output[str]) -> dict[str, pulumi.Output[str]]:
    """`names_in` for the subscription the provider deploys to."""
    resolved = subscription_id.apply(lambda subscription: names_in(prefix, subscription))
    return {key: resolved.apply(lambda n, k=key: n[k]) for key in ("storage_account", "registry")}


def kept_store(prefix: str, previous: PreviousRun) -> KeptStore:
    """What a `pulumi destroy` left of the checkpoint store, looked up only when the stack has
    no previous outputs (first run, or after destroy); on a live stack the resources are in its
    state already, created or imported by an earlier run."""
    if previous.live:  # the group keeps its name: a new one would replace it
        return KeptStore(group_name=previous.text("checkpoint_resource_group"))
    subscription = authorization.get_client_config().subscription_id
    unique, former = stack_unique_prefix(), name_prefix()  # former: the cut name, no hash
    return find_kept_store(unique, names_in(prefix, subscription)["storage_account"],
                           workspace_name(prefix),
                           former_prefix=former if unique != former else None)


def pool_versions(args: GpuClusterArgs, live: LiveCluster | None) -> dict[str, str]:
    """The minor each agent pool's nodes run, read from AKS, when kubernetes.version is unset
    and the cluster keeps its version: a pool is then declared at what it runs, so no run
    upgrades a pool the user did not ask to upgrade. Empty (every pool declared at the run's
    minor, after the control plane) on a first run, on an upgrade, and when kubernetes.version
    names the control plane's minor: pools left behind by a half-applied upgrade are then
    brought up to it, which AKS allows for any pool it runs (a pool is at most two minors
    behind the control plane and never above it: the AgentPool orchestratorVersion reference,
    learn.microsoft.com/azure/aks/upgrade-node-pools)."""
    if not args.release.kept or args.release.pinned:
        return {}
    return dict(live.pools) if live else {}


class AzureGpuCluster(pulumi.ComponentResource):
    """Everything the training job needs on Azure; read `.contract`."""

    contract: GpuCluster

    def __init__(self, name: str, args: GpuClusterArgs,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        s = args.settings
        if any(uses_infiniband(s, machine(s.cloud, pool.machine_type))
               for pool in s.enabled_gpu_pools):
            # Before anything is registered: a subscription invoke with default credentials.
            require_registered(INFINIBAND_FEATURE, "interconnect.fabric", True)
        skus = check_pool_zones(s)  # each pool's VM size in its zones, for this subscription
        check_job_quota(s, skus)  # the job's nodes fit the subscription's vCPU quota
        if not args.previous.live:  # a live stack's volume exists: nothing to place
            check_netapp_zones(s)  # ANF can place the volume in the GPU zones
        prefix = args.name_prefix
        # How the Entra-only kubeconfig's kubelogin signs in: as the deployer, from the same
        # environment the azure-native provider reads; a login it cannot repeat is refused here.
        login = (deployer_login(os.environ) if s.azure and s.azure.disable_local_accounts
                 else KubeLogin(AZURE_CLI))
        # Both are read before anything is registered (synchronous invokes).
        found = kept_store(prefix, args.previous)
        # The stack's cluster as AKS runs it (None on a first run or when it is gone).
        live = live_cluster(args.previous) if args.previous.live else None
        check_changes(args, live)  # an upgrade Pulumi cannot send, a pool replaced under the job
        running = pool_versions(args, live)
        # Every pool declared at the node count it runs: a different count is a manual scale.
        nodes = dict(live.nodes) if live else {}
        # User or service principal: the type of every grant to the deployer (subscription.py).
        deployer_type = deployer_principal_type()
        super().__init__(TYPE_TOKEN, name, None, opts)
        fs = s.shared_file_system
        assert isinstance(fs, AzureNetAppFiles) and s.azure is not None  # settings rules
        tags = dict(s.tags)

        provider = azure_native.Provider(
            f"{prefix}-azure", location=s.region, opts=pulumi.ResourceOptions(parent=self))
        child = pulumi.ResourceOptions(parent=self, provider=provider)
        client = authorization.get_client_config_output(
            opts=pulumi.InvokeOutputOptions(provider=provider))

        names = global_names(prefix, client.subscription_id)
        net = create_network(prefix, s.azure.vnet_cidr, tags, child)
        group = net.resource_group.name
        cluster = create_cluster(prefix, s, group, net.nodes_subnet.id, tags, child,
                                 system_pool_version=running.get(s.system_pool.name),
                                 live_nodes=nodes)
        subnet_access = grant_subnet_to_cluster(prefix, cluster, net.nodes_subnet.id,
                                                client.subscription_id, child)
        maintenance = create_maintenance_windows(prefix, s, cluster, group, child)
        # Entra-only clusters: the deployer needs Kubernetes rights to install add-ons and the job.
        access: list[pulumi.Resource] = []
        if s.azure.disable_local_accounts:
            access.append(assign_role(
                f"{prefix}-deployer-aks-admin", role=AKS_RBAC_CLUSTER_ADMIN,
                principal_id=client.object_id, principal_type=deployer_type, scope=cluster.id,
                subscription_id=client.subscription_id, opts=child))

        placement = create_placement_group(prefix, s, group, tags, child)
        plans = plan_pools(s)
        # GPU nodes join the subnet once the cluster identity may manage it.
        pool_opts = pulumi.ResourceOptions.merge(
            child, pulumi.ResourceOptions(depends_on=[subnet_access, *maintenance]))
        pools = {
            plan.key: create_gpu_pool(
                prefix, plan, s, cluster, group, net.nodes_subnet.id,
                placement.id if placement is not None else None, tags, pool_opts,
                version=running.get(plan.pool.name), live_nodes=nodes)
            for plan in plans
        }
        gpu_pools = {plan.key: contract_pool(plan, s) for plan in plans}
        job_machine = machine(s.cloud, s.job_pool.machine_type)

        kubeconfig = user_kubeconfig(cluster, group, provider, login)
        for grant in access:  # no Kubernetes call before the deployer's grant is in force
            kubeconfig = granted_kubeconfig(kubeconfig, grant, client.object_id, provider)
        addons_provider = k8s.Provider(
            f"{prefix}-k8s-addons", kubeconfig=kubeconfig,
            delete_unreachable=True,  # destroy from anywhere: docs/security.md "Destroy"
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*pools.values(), *access]))
        rdma = any(uses_infiniband(s, pool.machine) for pool in gpu_pools.values())
        taints = [taint for pool in gpu_pools.values() for taint in pool.taints]
        addons_opts = pulumi.ResourceOptions(parent=self, provider=addons_provider)
        addons = create_addons(prefix, rdma, taints, s.kubernetes.version, addons_opts)
        if rdma:  # the HCAs only for the job's namespace
            addons += restrict_rdma(prefix, s.job.namespace, addons_opts)

        anf = create_netapp(prefix, fs, group, net.netapp_subnet.id, net.plan.nodes,
                            list(s.gpu_zones), tags, child)
        oidc_issuer = cluster.oidc_issuer_profile.apply(
            lambda profile: profile.issuer_url if profile else None)
        ckpt = create_checkpoints(prefix, s, names["storage_account"], group,
                                  net.nodes_subnet.id, oidc_issuer, client.subscription_id, tags,
                                  child, found, deployer_object_id=client.object_id,
                                  deployer_type=deployer_type)
        # Who changed what in the cluster: kept with the checkpoints, in their group.
        create_audit(prefix, cluster, ckpt.resource_group.name,
                     s.checkpoints.retain_on_destroy, tags, child, found.audit_workspace_id)
        # Sticky: a store imported after a destroy stays "adopted" for the stack's later runs.
        adopted = found.adopted or bool(args.previous.outputs.get(CHECKPOINT_ADOPTED_OUTPUT))

        # The job's first storage call must find its identity federated and its role granted:
        # a 403 there is a crash the JobSet counts.
        ready: list[pulumi.Resource] = [*pools.values(), *addons, *access, ckpt.credential,
                                        ckpt.role]
        if s.job.image:
            trainer_image: pulumi.Input[str] = s.job.image
        else:
            kubelet = cluster.identity_profile.apply(
                lambda profile: profile["kubeletidentity"].object_id if profile else None)
            image = create_trainer_image(prefix, names["registry"], group, kubelet,
                                         client.object_id, client.subscription_id,
                                         client.tenant_id, tags, provider, self, child,
                                         deployer_type=deployer_type)
            trainer_image = image.reference
            ready.append(image.pull)

        k8s_provider = k8s.Provider(
            f"{prefix}-k8s", kubeconfig=kubeconfig,
            delete_unreachable=True,  # destroy from anywhere: docs/security.md "Destroy"
            opts=pulumi.ResourceOptions(parent=self, depends_on=ready))

        self.contract = GpuCluster(
            cloud=s.cloud,
            name=cluster.name,
            kubeconfig=kubeconfig,
            provider=k8s_provider,
            gpu_pools=gpu_pools,
            shared_file_system=shared_file_system(anf, fs),
            checkpoints=checkpoint_store(ckpt, s),
            preparation=ckpt.preparation,
            pod_egress_denied=[IMDS_CIDR],  # docs/azure.md "IMDS"
            interconnect=interconnect_spec(s, job_machine),
            trainer_image=trainer_image,
            ready=ready,
            exports={
                "storage_account": ckpt.account.name,
                "checkpoint_resource_group": ckpt.resource_group.name,
                CHECKPOINT_ADOPTED_OUTPUT: adopted,
                # Where a later run reads the version the cluster runs (infra/azure/versions.py).
                CLUSTER_GROUP_OUTPUT: group,
                # For a dataset source account's virtual network rule (docs/data.md).
                "node_subnet_id": net.nodes_subnet.id,
                **({} if s.job.image else {"registry": names["registry"]}),
            },
        )
        self.register_outputs({
            "cluster_name": cluster.name,
            "kubeconfig": kubeconfig,
            "file_system_id": anf.volume.id,
            "checkpoint_container": ckpt.container.name,
            "storage_account": ckpt.account.name,
            "trainer_image": trainer_image,
        })


__all__ = ["AzureGpuCluster", "TYPE_TOKEN"]
