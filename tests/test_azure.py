"""Azure stack policies, read off the resources `pulumi up --stack azure` would register (mocks).

One program run per configuration (module-scoped fixtures); every test only reads it.
"""

from __future__ import annotations

import base64
import ipaddress
import json
import os
import re
import time
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import unittest.mock

import pytest
import time_machine
import yaml

from infra.azure.cluster import decode_kubeconfig
from infra.azure.interconnect import RDMA_HCA_MAX, interconnect_spec, topology_file
from infra.azure.node_pools import label_tag, resource_tag
from infra.azure.identity import (ACR_PULL, ACR_PUSH, AKS_RBAC_CLUSTER_ADMIN,
                                  STORAGE_BLOB_DATA_CONTRIBUTOR, STORAGE_BLOB_DATA_READER)
from infra.azure.network import plan_subnets
from infra.catalog.cloud import Cloud
from infra.catalog.machines import Interconnect, MACHINES, machine
from infra.settings.errors import SettingsError
from tests.fakes import azure as fake
from tests.harness import (JOBSET, USER_API_CIDRS, Captured, Run, run_stack,
                           training_pod_template)


CLUSTER = "azure-native:containerservice:ManagedCluster"
POOL = "azure-native:containerservice:AgentPool"
PPG = "azure-native:compute:ProximityPlacementGroup"
SUBNET = "azure-native:network:Subnet"
VNET = "azure-native:network:VirtualNetwork"
VOLUME = "azure-native:netapp:CapacityPoolVolume"
CAPACITY_POOL = "azure-native:netapp:CapacityPool"
ACCOUNT = "azure-native:storage:StorageAccount"
CONTAINER = "azure-native:storage:BlobContainer"
IDENTITY = "azure-native:managedidentity:UserAssignedIdentity"
FEDERATION = "azure-native:managedidentity:FederatedIdentityCredential"
ROLE = "azure-native:authorization:RoleAssignment"
REGISTRY = "azure-native:containerregistry:Registry"
RELEASE = "kubernetes:helm.sh/v3:Release"
NIC_POLICY = "kubernetes:mellanox.com/v1alpha1:NicClusterPolicy"
K8S_PROVIDER = "pulumi:providers:kubernetes"
AZURE_PROVIDER = "pulumi:providers:azure-native"
JOB = JOBSET
COMPONENT = "torchrec-cloud:azure:GpuCluster"
TIB = 1024**4
TEMPLATE = "k8s.io_cluster-autoscaler_node-template_"
RDMA_TAG = "k8s.io_cluster-autoscaler_node-template_resources_rdma_ib"
GIB = 1024**3


@pytest.fixture(scope="module")
def run() -> Run:
    return run_stack("azure")


@pytest.fixture(scope="module")
def no_placement_local_accounts_image() -> Run:
    return run_stack("azure", overrides={
        "interconnect": {"placement": False},
        "azure": {"disableLocalAccounts": False},
        "job": {"image": "example.azurecr.io/trainer:1"},
        "checkpoints": {"retainOnDestroy": False},
    })


def _pools(run: Run) -> dict[str, Any]:
    return {r.inputs["agentPoolName"]: r for r in run.of_type(POOL)}


def _role(run: Run, role_id: str, principal: str | None = None) -> Any:
    """The one assignment of `role_id` (to `principal`, when given)."""
    found = [r for r in run.of_type(ROLE) if r.inputs["roleDefinitionId"].endswith(role_id)
             and principal in (None, r.inputs["principalId"])]
    assert len(found) == 1, [r.name for r in run.of_type(ROLE)]
    return found[0]


# --- component and provider ----------------------------------------------------------------
def test_every_azure_resource_uses_the_explicit_regional_provider(run: Run) -> None:
    provider = run.one(AZURE_PROVIDER)
    assert provider.inputs["location"] == "eastus"
    azure = [r for r in run.resources if r.type.startswith("azure-native:")]
    assert azure and all(r.provider_urn == provider.urn for r in azure)


def cluster_add_ons(run: Run) -> list[Captured]:
    """The cluster's Helm add-ons (GPU and network operators); Kueue belongs to the job's
    layer (workloads/kueue.py), installed with the TrainingJob component."""
    return [r for r in run.of_type(RELEASE) if not r.inputs["chart"].endswith("/kueue")]


def test_everything_sits_under_the_component(run: Run) -> None:
    component = run.one(COMPONENT)
    def under(urn: str) -> bool:
        node = run.by_urn.get(urn)
        return node is not None and (node.parent == component.urn or under(node.parent))
    for resource in run.resources:
        if resource.type.startswith(("azure-native:", "pulumi:providers:azure")) or resource.type in (
                NIC_POLICY, "docker-build:index:Image"):
            assert under(resource.urn), resource.name
    for add_on in cluster_add_ons(run):
        assert under(add_on.urn), add_on.name


def test_resources_carry_the_stack_tags(run: Run) -> None:
    for type_ in (CLUSTER, POOL, VNET, ACCOUNT, REGISTRY, PPG):
        for resource in run.of_type(type_):
            tags = resource.inputs["tags"]
            if type_ == POOL:  # plus the autoscaler's node-template tags
                tags = {k: v for k, v in tags.items() if not k.startswith(TEMPLATE)}
            assert tags == {"project": "torchrec-cloud"}, resource.name


# --- network ---------------------------------------------------------------------------------
def test_the_vnet_has_a_node_subnet_and_a_subnet_delegated_to_netapp(run: Run) -> None:
    assert run.one(VNET).inputs["addressSpace"]["addressPrefixes"] == ["10.1.0.0/16"]
    nodes = run.one(SUBNET, "nodes")
    netapp = run.one(SUBNET, "netapp")
    assert not nodes.inputs.get("delegations")
    assert [d["serviceName"] for d in netapp.inputs["delegations"]] == ["Microsoft.NetApp/volumes"]
    vnet = ipaddress.ip_network("10.1.0.0/16")
    a, b = (ipaddress.ip_network(s.inputs["addressPrefix"]) for s in (nodes, netapp))
    assert a.subnet_of(vnet) and b.subnet_of(vnet) and not a.overlaps(b)
    assert run.waits_for(netapp, nodes)  # Azure refuses parallel subnet writes in one VNet


def test_subnet_plan_fits_small_vnets() -> None:
    plan = plan_subnets("10.8.0.0/22")
    assert plan.nodes == "10.8.0.0/23" and plan.netapp == "10.8.2.0/24"


# --- AKS -------------------------------------------------------------------------------------
def test_cluster_has_workload_identity_and_an_oidc_issuer(run: Run) -> None:
    cluster = run.one(CLUSTER).inputs
    assert cluster["oidcIssuerProfile"] == {"enabled": True}
    assert cluster["securityProfile"]["workloadIdentity"] == {"enabled": True}
    assert cluster["identity"]["type"] == "SystemAssigned"


def test_api_server_is_reachable_only_from_the_configured_cidrs(run: Run) -> None:
    profile = run.one(CLUSTER).inputs["apiServerAccessProfile"]
    assert profile["authorizedIPRanges"] == USER_API_CIDRS


def test_local_accounts_off_means_entra_rbac_on(run: Run) -> None:
    cluster = run.one(CLUSTER).inputs
    assert cluster["disableLocalAccounts"] is True
    assert cluster["aadProfile"] == {"managed": True, "enableAzureRBAC": True}
    admin = _role(run, AKS_RBAC_CLUSTER_ADMIN)
    assert admin.inputs["principalId"] == fake.DEPLOYER_OBJECT_ID
    assert admin.inputs["scope"].endswith("/managedClusters/torchrec-cloud-azure-aks")


def test_local_accounts_on_needs_no_entra_profile(no_placement_local_accounts_image: Run) -> None:
    run = no_placement_local_accounts_image
    cluster = run.one(CLUSTER).inputs
    assert cluster["disableLocalAccounts"] is False and "aadProfile" not in cluster
    assert not [r for r in run.of_type(ROLE) if r.inputs["roleDefinitionId"].endswith(
        AKS_RBAC_CLUSTER_ADMIN)]


def test_cluster_uses_azure_cni_overlay_and_the_settings_version(run: Run) -> None:
    cluster = run.one(CLUSTER).inputs
    assert cluster["networkProfile"]["networkPlugin"] == "azure"
    assert cluster["networkProfile"]["networkPluginMode"] == "overlay"
    assert cluster["kubernetesVersion"] == "1.35"  # AKS's default in the fake listing
    assert cluster["nodeResourceGroup"] == "torchrec-cloud-azure-aks-nodes"
    pod = ipaddress.ip_network(cluster["networkProfile"]["podCidr"])
    assert not pod.overlaps(ipaddress.ip_network("10.1.0.0/16"))


def test_system_pool_is_system_mode_in_the_node_subnet(run: Run) -> None:
    (system,) = run.one(CLUSTER).inputs["agentPoolProfiles"]
    assert system["mode"] == "System" and system["name"] == "system"
    assert system["vmSize"] == "Standard_D4s_v5"
    assert (system["minCount"], system["count"], system["maxCount"]) == (1, 2, 3)
    assert system["vnetSubnetID"].endswith("/subnets/nodes")
    assert system["enableNodePublicIP"] is False


# --- the autoscaler waits for ND drivers (issue 32, Azure B) --------------------------------
def test_the_autoscaler_keeps_a_new_nd_node_until_its_drivers_are_built(run: Run) -> None:
    """A new ND96asr_v4 offers no GPUs or rdma/ib until the DOCA-OFED and GPU drivers are
    compiled on it (the catalog budgets 45 minutes): AKS's defaults (unready nodes removed
    after 20m, a scale-up failed after 15m, the autoscaler halted past 3 unready nodes) would
    remove it or stop scaling before then; idle nodes still go 10 minutes after the job ends."""
    from infra.catalog.cloud import Cloud
    from infra.catalog.machines import machine as catalog_machine

    budget = catalog_machine(Cloud.AZURE, "Standard_ND96asr_v4").node_ready_minutes
    assert budget == 45
    profile = run.one(CLUSTER).inputs["autoScalerProfile"]
    # The SDK's names; the provider writes ARM's scale-down-unready-time etc.
    unready = int(profile["scaleDownUnreadyTime"].removesuffix("m"))
    assert profile["scaleDownUnreadyTime"] == f"{unready}m" and unready > budget > 20
    # Registration only (a building node is unready, kept above): past AKS's 15m for ND's boot,
    # but short, so a spot VM that never registers does not hold the pool for the whole budget.
    provision = int(profile["maxNodeProvisionTime"].removesuffix("m"))
    assert 15 < provision < budget
    assert profile["scaleDownUnneededTime"] == "10m"
    # Cluster-wide: any scale-up pauses all scale-down this long. AKS's 10m, so idle GPU nodes
    # go about 10 minutes after the job ends, not an hour after some pool's last scale-up.
    assert profile["scaleDownDelayAfterAdd"] == "10m"
    assert int(profile["okTotalUnreadyCount"]) >= 4  # both pools' 2 + 2 nodes at once


def test_a_larger_gpu_pool_raises_the_unready_count_the_autoscaler_tolerates() -> None:
    run = run_stack("azure", overrides={"gpuPools": {"onDemand": {"maxNodes": 8}}})
    assert run.one(CLUSTER).inputs["autoScalerProfile"]["okTotalUnreadyCount"] == "10"


# --- GPU pools -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def placement() -> Run:
    return run_stack("azure", overrides={"interconnect": {"placement": True}})


def test_by_default_no_proximity_placement_group_narrows_where_nd_capacity_is_found(run: Run
                                                                                   ) -> None:
    """AKSInfinibandSupport already keeps each pool on one InfiniBand network; a PPG only adds
    allocation failures for a pool that scales (docs/azure.md, "Placement")."""
    assert not run.of_type(PPG)
    assert all("proximityPlacementGroupID" not in p.inputs for p in run.of_type(POOL))


def test_both_gpu_pools_name_the_proximity_placement_group(placement: Run) -> None:
    run = placement
    ppg = run.one(PPG)
    assert ppg.inputs["zones"] == ["1"]
    assert ppg.inputs["intent"]["vmSizes"] == ["Standard_ND96asr_v4"]
    pools = _pools(run)
    assert set(pools) == {"gpu", "gpuspot"}
    for pool in pools.values():
        assert pool.inputs["proximityPlacementGroupID"].endswith(
            "/proximityPlacementGroups/torchrec-cloud-azure-gpu-ppg")
        assert run.waits_for(pool, ppg)


def test_without_placement_there_is_no_placement_group(no_placement_local_accounts_image: Run
                                                       ) -> None:
    run = no_placement_local_accounts_image
    assert not run.of_type(PPG)
    assert all("proximityPlacementGroupID" not in p.inputs for p in run.of_type(POOL))


def test_spot_pool_is_spot_evicted_by_delete_at_the_configured_price(run: Run) -> None:
    spot = _pools(run)["gpuspot"].inputs
    assert spot["scaleSetPriority"] == "Spot"
    assert spot["scaleSetEvictionPolicy"] == "Delete"
    assert spot["spotMaxPrice"] == -1
    on_demand = _pools(run)["gpu"].inputs
    assert "scaleSetPriority" not in on_demand and "spotMaxPrice" not in on_demand


def test_spot_price_cap_comes_from_the_settings() -> None:
    run = run_stack("azure", overrides={"gpuPools": {"spot": {"maxPrice": 12.5}}})
    assert _pools(run)["gpuspot"].inputs["spotMaxPrice"] == 12.5


def test_gpu_pools_are_in_one_zone_without_public_ips(run: Run) -> None:
    for pool in _pools(run).values():
        inputs = pool.inputs
        assert inputs["availabilityZones"] == ["1"]
        assert inputs["enableNodePublicIP"] is False
        assert inputs["mode"] == "User" and inputs["type"] == "VirtualMachineScaleSets"
        assert inputs["vnetSubnetID"].endswith("/subnets/nodes")


def test_gpu_pools_follow_the_settings_sizes_and_machine(run: Run) -> None:
    pools = _pools(run)
    gpu, spot = pools["gpu"].inputs, pools["gpuspot"].inputs
    assert (gpu["minCount"], gpu["count"], gpu["maxCount"]) == (0, 0, 2)  # grown by the job
    assert (spot["minCount"], spot["count"], spot["maxCount"]) == (0, 0, 2)
    assert gpu["vmSize"] == spot["vmSize"] == "Standard_ND96asr_v4"
    assert gpu["enableAutoScaling"] is True and spot["enableAutoScaling"] is True


def test_gpu_pools_are_tainted_and_labelled_for_gpu_work(run: Run) -> None:
    pools = _pools(run)
    assert pools["gpu"].inputs["nodeTaints"] == ["sku=gpu:NoSchedule"]
    assert pools["gpu"].inputs["nodeLabels"] == {"sku": "gpu", "torchrec-cloud/pool": "gpu"}
    # The spot pool states the label and taint AKS adds to it anyway, so a refresh shows no drift.
    assert pools["gpuspot"].inputs["nodeTaints"] == [
        "sku=gpu:NoSchedule", "kubernetes.azure.com/scalesetpriority=spot:NoSchedule"]
    assert pools["gpuspot"].inputs["nodeLabels"] == {
        "sku": "gpu", "torchrec-cloud/pool": "gpuspot",
        "kubernetes.azure.com/scalesetpriority": "spot"}


def test_gpu_driver_is_left_to_the_gpu_operator(run: Run) -> None:
    for pool in _pools(run).values():
        assert pool.inputs["gpuProfile"] == {"driver": "None"}
    release = run.one(RELEASE, "gpu-operator")
    assert release.inputs["chart"] == "gpu-operator" and release.inputs["version"] == "v26.3.3"
    assert release.inputs["repositoryOpts"]["repo"] == "https://helm.ngc.nvidia.com/nvidia"
    assert release.inputs["values"]["driver"]["rdma"]["enabled"] is True


def test_operators_tolerate_the_gpu_and_spot_taints(run: Run) -> None:
    expected = {("sku", "gpu"), ("kubernetes.azure.com/scalesetpriority", "spot")}
    gpu_values = run.one(RELEASE, "gpu-operator").inputs["values"]
    policy = run.one(NIC_POLICY).inputs["spec"]
    for tolerations in (gpu_values["daemonsets"]["tolerations"], policy["tolerations"]):
        assert expected <= {(t.get("key"), t.get("value")) for t in tolerations}


def test_gpu_metrics_come_from_the_gpu_operators_dcgm_exporter_where_status_reads_them(
        run: Run) -> None:
    """As GKE has DCGM managed: the operator that installs the driver and device plugin also runs
    NVIDIA's dcgm-exporter on every GPU node it tolerates (above), in its own namespace, which
    `status` proxies to (infra/dcgm.py); no ServiceMonitor, whose CRD this cluster lacks."""
    from infra.dcgm import EXPORTERS

    release = run.one(RELEASE, "gpu-operator").inputs
    assert release["values"]["dcgmExporter"] == {"enabled": True,
                                                 "serviceMonitor": {"enabled": False}}
    namespace = run.one("kubernetes:core/v1:Namespace", "gpu-operator").inputs["metadata"]
    assert namespace["name"] == release["namespace"] == EXPORTERS["azure"].namespace
    # The exporter's DaemonSet runs privileged (the operator's own asset): the namespace allows it.
    assert namespace["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    assert not [r for r in run.of_type(RELEASE) if r.inputs["chart"] == "dcgm-exporter"]


def test_infiniband_is_exposed_by_the_rdma_shared_device_plugin(run: Run) -> None:
    release = run.one(RELEASE, "network-operator")
    assert release.inputs["chart"] == "network-operator"
    assert release.inputs["version"] == "26.4.0"
    policy = run.one(NIC_POLICY)
    assert run.waits_for(policy, release)
    plugin = policy.inputs["spec"]["rdmaSharedDevicePlugin"]
    (config,) = json.loads(plugin["config"])["configList"]
    assert (config["resourcePrefix"], config["resourceName"]) == ("rdma", "ib")
    assert config["selectors"]["linkTypes"] == ["infiniband"]  # the Ethernet VF is not handed out
    assert run.waits_for(run.one(RELEASE, "gpu-operator"), release)  # peermem needs OFED
    # Azure's policy for this driver tag: `openibd restart` must not fail on NDm A100 v4.
    driver_env = {e["name"]: e["value"] for e in policy.inputs["spec"]["ofedDriver"]["env"]}
    assert driver_env["OFED_BLACKLIST_MODULES_FILE"].endswith("blacklist-ofed-modules.conf")


@pytest.mark.parametrize(("minor", "gpu", "network", "doca"), [
    ("1.31", "v25.10.0", "25.10.0", "doca3.2.0-25.10-1.2.8.0-2"),
    ("1.35", "v26.3.3", "26.4.0", "doca3.4.0-26.04-0.8.6.0-0"),
    ("1.36", "v26.3.3", "26.4.0", "doca3.4.0-26.04-0.8.6.0-0"),
])
def test_each_kubernetes_minor_gets_operators_that_support_it_through_1_36(
        minor: str, gpu: str, network: str, doca: str) -> None:
    """GPU Operator v26.3.3 (Kubernetes 1.32-1.36) and Network Operator 26.4.0, the versions
    Azure's AKS InfiniBand guide installs, with the NicClusterPolicy images of that release;
    25.10.0 below 1.32. No minor through 1.36 is past the table (issue 32, Azure C/D)."""
    from infra.addon_versions import choose
    from infra.azure.addons import NIC_POLICY_IMAGES, nic_cluster_policy_spec

    chosen_gpu, chosen_network = choose("gpu-operator", minor), choose("network-operator", minor)
    assert (chosen_gpu.row.version, chosen_network.row.version) == (gpu, network)
    assert not chosen_gpu.beyond_table and not chosen_network.beyond_table
    spec = nic_cluster_policy_spec([], NIC_POLICY_IMAGES[network])
    assert spec["ofedDriver"]["version"] == doca
    assert spec["rdmaSharedDevicePlugin"]["version"] == f"network-operator-v{network}"


def test_the_training_pod_asks_for_infiniband_and_may_lock_memory(run: Run) -> None:
    pod = training_pod_template(run)["spec"]
    (trainer,) = [c for c in pod["containers"] if c["resources"]["limits"].get("rdma/ib")]
    assert trainer["resources"]["limits"]["rdma/ib"] in (1, "1")
    # AKS gives containers 64 KiB of locked memory and IPC_LOCK does nothing for uid 1000: the
    # container starts as root with only what raising the limit and dropping to uid 1000 take.
    context = trainer["securityContext"]
    assert context["capabilities"] == {"drop": ["ALL"],
                                       "add": ["SETGID", "SETUID", "SYS_RESOURCE"]}
    assert context["runAsUser"] == 0 and context["runAsNonRoot"] is False
    assert context["allowPrivilegeEscalation"] is False and context["readOnlyRootFilesystem"]
    env = {e["name"]: e.get("value") for e in trainer["env"]}
    assert env["TORCHREC_CLOUD_DROP_TO"] == "1000:1000"  # trainer/privileges.py
    assert env["NCCL_NET"] == "IB"  # forced: no fall-back to sockets
    assert env["NCCL_IB_HCA"] == "=" + ",".join(f"mlx5_{i}:1" for i in range(8))
    assert env["NCCL_TOPO_FILE"] == "/opt/microsoft/ndv4-topo.xml"
    assert env["UCX_TLS"] == "rc" and env["NCCL_SOCKET_IFNAME"] == "eth0"
    tolerated = {(t["key"], t.get("value")) for t in pod["tolerations"]}
    assert ("sku", "gpu") in tolerated


def test_without_fabric_no_network_operator_and_no_rdma() -> None:
    run = run_stack("azure", overrides={"interconnect": {"fabric": False}})
    assert not run.of_type(NIC_POLICY)
    assert [r.inputs["chart"] for r in cluster_add_ons(run)] == ["gpu-operator"]
    pod = training_pod_template(run)["spec"]
    assert all("rdma/ib" not in c["resources"].get("limits", {}) for c in pod["containers"])
    for pool in run.of_type(POOL):  # nothing declares InfiniBand that no plugin will offer
        assert RDMA_TAG not in pool.inputs["tags"]
    # The operator's own node feature discovery must reach the tainted GPU nodes (spot too), or
    # no node is labelled as having a GPU and no driver is ever deployed.
    (operator,) = cluster_add_ons(run)
    workers = operator.inputs["values"]["node-feature-discovery"]["worker"]["tolerations"]
    tolerated = {(t["key"], t.get("value")) for t in workers}
    assert {("sku", "gpu"), ("kubernetes.azure.com/scalesetpriority", "spot")} <= tolerated


# --- Kubernetes providers ------------------------------------------------------------------------
def test_the_kubernetes_provider_waits_for_the_pools_and_add_ons(run: Run) -> None:
    provider = run.named("torchrec-cloud-azure-k8s")
    assert provider.type == K8S_PROVIDER
    assert run.one(JOB).provider_urn == provider.urn
    for pool in run.of_type(POOL):
        assert run.waits_for(provider, pool)
    for addon in [*cluster_add_ons(run), *run.of_type(NIC_POLICY)]:
        assert run.waits_for(provider, addon)
    assert run.waits_for(run.one(JOB), run.one(RELEASE, "gpu-operator"))


def test_the_kubeconfig_is_the_decoded_user_credential_and_secret(run: Run) -> None:
    assert "kubeconfig" in run.secret_outputs
    assert yaml.safe_load(run.outputs["kubeconfig"])["current-context"] == "fake"


def _kubelogin_args(run_or_config: Any) -> list[str]:
    config = yaml.safe_load(run_or_config)
    (user,) = config["users"]
    exec_ = user["user"]["exec"]
    assert exec_["command"] == "kubelogin"
    return exec_["args"]


def _flag(args: list[str], name: str) -> str | None:
    return args[args.index(name) + 1] if name in args else None


# The deployer's environment -> kubelogin's --login and the flags it needs (kube_login.py).
LOGINS = {
    "azure CLI": ({}, "azurecli", {}),
    "service principal secret": (
        {"ARM_CLIENT_ID": "sp", "ARM_CLIENT_SECRET": "s3cret", "ARM_TENANT_ID": fake.TENANT,
         "ARM_SUBSCRIPTION_ID": fake.SUBSCRIPTION}, "spn", {"--use-azurerm-env-vars": None}),
    "service principal certificate": (
        {"ARM_CLIENT_ID": "sp", "ARM_CLIENT_CERTIFICATE_PATH": "/ci/sp.pfx",
         "ARM_TENANT_ID": fake.TENANT}, "spn", {"--use-azurerm-env-vars": None}),
    "GitHub Actions OIDC": (
        {"ARM_USE_OIDC": "true", "ARM_CLIENT_ID": "gh-app", "ARM_TENANT_ID": fake.TENANT,
         "ACTIONS_ID_TOKEN_REQUEST_URL": "https://token.actions.example/x",
         "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "t"},
        "workloadidentity", {"--client-id": "gh-app", "--tenant-id": fake.TENANT}),
    "OIDC token file": (
        {"ARM_USE_OIDC": "true", "ARM_CLIENT_ID": "app", "ARM_TENANT_ID": fake.TENANT,
         "ARM_OIDC_TOKEN_FILE_PATH": "/var/run/token"},
        "workloadidentity", {"--client-id": "app", "--federated-token-file": "/var/run/token"}),
    "managed identity": ({"ARM_USE_MSI": "true", "ARM_CLIENT_ID": "uami"}, "msi",
                         {"--client-id": "uami"}),
}


@pytest.mark.parametrize("case", sorted(LOGINS))
def test_the_kubeconfig_signs_in_as_the_deployer_does(case: str,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The rendered kubeconfig's kubelogin follows the azure-native provider's login: never
    devicecode, never AKS's Azure CLI client id for another identity, no secret written in."""
    environ, method, flags = LOGINS[case]
    for name in [n for n in os.environ if n.startswith(("ARM_", "ACTIONS_ID_TOKEN"))]:
        monkeypatch.delenv(name)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    run = run_stack("azure")
    rendered = run.outputs["kubeconfig"]
    args = _kubelogin_args(rendered)
    assert args.count("--login") == 1 and _flag(args, "--login") == method
    assert _flag(args, "--server-id") == fake.AKS_SERVER_APP_ID  # AKS's audience kept
    for name, value in flags.items():
        assert name in args and (value is None or _flag(args, name) == value), args
    if method != "azurecli":
        assert fake.AZURE_CLI_CLIENT_ID not in args
    assert "s3cret" not in rendered and "ARM_CLIENT_SECRET" not in rendered
    assert args.count("--tenant-id") <= 1


@pytest.mark.parametrize(("environ", "match"), [
    ({"ARM_USE_DEFAULT_AZURE_CREDENTIAL": "true"}, "ARM_USE_DEFAULT_AZURE_CREDENTIAL"),
    ({"ARM_USE_OIDC": "true", "ARM_CLIENT_ID": "a", "ARM_TENANT_ID": "t",
      "ARM_OIDC_TOKEN": "literal"}, "ARM_OIDC_TOKEN_FILE_PATH"),
    ({"ARM_USE_OIDC": "true"}, "ARM_CLIENT_ID and ARM_TENANT_ID"),
])
def test_a_login_kubelogin_cannot_repeat_is_refused_before_any_resource(
        environ: dict[str, str], match: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in os.environ if n.startswith(("ARM_", "ACTIONS_ID_TOKEN"))]:
        monkeypatch.delenv(name)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    run = run_stack("azure", expect_error=True)
    assert match in str(run.error) and "Nothing was created" in str(run.error)
    assert not [r for r in run.resources if r.custom and r.type.startswith("azure-native:")]


def test_a_local_accounts_kubeconfig_is_left_as_aks_gives_it() -> None:
    from infra.azure.kube_login import KubeLogin, use_login
    from tests.fakes.common import FAKE_KUBECONFIG

    assert yaml.safe_load(use_login(FAKE_KUBECONFIG, KubeLogin("spn"))) == \
        yaml.safe_load(FAKE_KUBECONFIG)


# --- the deployer's Kubernetes rights are in force before the first Kubernetes call ----------
def test_no_kubernetes_provider_gets_the_kubeconfig_before_the_grant_is_in_force() -> None:
    """AKS RBAC Cluster Admin takes up to five minutes to propagate: the program asks the API
    server (SelfSubjectAccessReview, the AKS-audience token) until it may create namespaces and
    CRDs, and only then hands the kubeconfig on; both providers wait for the grant."""
    fake.REVIEWS.clear()
    fake.GRANT["denied_reviews"] = 3
    slept = unittest.mock.Mock()
    # The wait's own sleeps only: patching time.sleep would count every thread's in the worker.
    with unittest.mock.patch("infra.azure.kube_access.time",
                             SimpleNamespace(sleep=slept, monotonic=time.monotonic)):
        run = run_stack("azure")
    assert fake.GRANT["denied_reviews"] == 0 and slept.call_count == 3
    urls = {url for url, *_ in fake.REVIEWS}
    assert urls == {f"{fake.API_SERVER}/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"}
    asked = {(b["spec"]["resourceAttributes"]["group"], b["spec"]["resourceAttributes"]["resource"])
             for _, b, _, _ in fake.REVIEWS}
    assert asked == {("", "namespaces"), ("apiextensions.k8s.io", "customresourcedefinitions")}
    assert {token for _, _, token, _ in fake.REVIEWS} == {fake.AKS_AUDIENCE_TOKEN}
    assert {ca for *_, ca in fake.REVIEWS} == {"fake-cluster-ca"}  # the cluster's CA only
    grant = _role(run, AKS_RBAC_CLUSTER_ADMIN)
    for provider in run.of_type(K8S_PROVIDER):
        assert run.waits_for(provider, grant)
        assert SECRET_SIG in json.dumps(provider.inputs.get("kubeconfig"))


def test_a_grant_never_in_force_stops_the_run_naming_the_identity() -> None:
    from infra.azure import kube_access

    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(kube_access, "post_json",
                      lambda url, body, token, ca: {**body, "status": {"allowed": False}})
        with pytest.raises(RuntimeError, match=f"{fake.DEPLOYER_OBJECT_ID}.*15 minutes"):
            kube_access.wait_until_granted(fake.aks_exec_kubeconfig(), "t",
                                           fake.DEPLOYER_OBJECT_ID, sleep, lambda: now[0])
    assert now[0] >= kube_access.WAIT_SECONDS


def test_the_grant_wait_runs_off_the_programs_event_loop() -> None:
    """Up to 15 minutes of polling must not stall the program: while it waits, the event loop
    keeps registering everything that does not need Kubernetes (issue 32, Azure C/D)."""
    import asyncio
    import threading

    from infra.azure import kube_access

    seen: list[tuple[str, bool]] = []
    real = kube_access.wait_until_granted

    def recording(config: str, token: str, principal: str, *rest: Any) -> str:
        try:
            asyncio.get_running_loop()
            on_loop = True
        except RuntimeError:
            on_loop = False
        seen.append((threading.current_thread().name, on_loop))
        return real(config, token, principal, *rest)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(kube_access, "wait_until_granted", recording)
        run_stack("azure")
    assert seen and all(not on_loop for _, on_loop in seen), seen
    assert all(name != threading.main_thread().name for name, _ in seen), seen


def test_a_cluster_with_local_accounts_grants_nothing_and_asks_nothing() -> None:
    fake.REVIEWS.clear()
    run = run_stack("azure", overrides={"azure": {"disableLocalAccounts": False}})
    assert not fake.REVIEWS
    assert not [r for r in run.of_type(ROLE)
                if r.inputs["roleDefinitionId"].endswith(AKS_RBAC_CLUSTER_ADMIN)]


# --- the deployer's grants name the kind of principal it is ---------------------------------
DEPLOYER_ROLES = (AKS_RBAC_CLUSTER_ADMIN, ACR_PUSH, STORAGE_BLOB_DATA_READER)


def _deployer_grant_types(run: Run) -> dict[str, str]:
    """Role -> principalType of each grant to whoever runs `pulumi up`."""
    return {role: _role(run, role, fake.DEPLOYER_OBJECT_ID).inputs["principalType"]
            for role in DEPLOYER_ROLES}


def test_a_user_deployer_is_granted_as_a_user(run: Run) -> None:
    """`az login` as a user: AKS RBAC Cluster Admin, AcrPush and Storage Blob Data Reader are
    assigned with principalType User, as ARM requires for a user's object id."""
    assert _deployer_grant_types(run) == dict.fromkeys(DEPLOYER_ROLES, "User")


@pytest.mark.parametrize(("login", "claims"), [
    ("service principal secret", fake.SERVICE_PRINCIPAL_CLAIMS),
    ("managed identity", fake.MANAGED_IDENTITY_CLAIMS),
])
def test_a_ci_deployer_is_granted_as_a_service_principal(
        login: str, claims: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """CI signs in as an application (a secret, or a managed identity): its ARM token is
    app-only (idtyp app), and ARM refuses a grant to it typed User (UnmatchedPrincipalType),
    which is what pulumi_azure_native sends for an unset principal_type. Every grant to the
    deployer is typed ServicePrincipal; the job's and the kubelet's grants are unchanged."""
    for name in [n for n in os.environ if n.startswith(("ARM_", "ACTIONS_ID_TOKEN"))]:
        monkeypatch.delenv(name)
    for name, value in LOGINS[login][0].items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(fake, "ENTRA_ACCESS_TOKEN", fake.entra_jwt(claims))
    run = run_stack("azure")
    assert _deployer_grant_types(run) == dict.fromkeys(DEPLOYER_ROLES, "ServicePrincipal")
    assert _role(run, ACR_PULL).inputs["principalType"] == "ServicePrincipal"
    assert _role(run, STORAGE_BLOB_DATA_CONTRIBUTOR).inputs["principalType"] == "ServicePrincipal"


@pytest.mark.parametrize(("claims", "expected"), [
    (fake.USER_CLAIMS, "User"),
    # An older v1.0 user token without idtyp: scp is only in user tokens.
    ({k: v for k, v in fake.USER_CLAIMS.items() if k != "idtyp"}, "User"),
    (fake.SERVICE_PRINCIPAL_CLAIMS, "ServicePrincipal"),
    (fake.MANAGED_IDENTITY_CLAIMS, "ServicePrincipal"),
    # An app token without idtyp: no scp, application permissions (roles) at most.
    ({**{k: v for k, v in fake.SERVICE_PRINCIPAL_CLAIMS.items() if k != "idtyp"},
      "roles": ["Reader"]}, "ServicePrincipal"),
    # base64url's "-" and "_", unpadded, and a non-ASCII name.
    ({**fake.USER_CLAIMS, "name": "Zoë ??>>~~", "upn": "zoë@example.com"}, "User"),
])
def test_the_principal_type_is_read_off_a_real_shaped_arm_token(claims: dict[str, Any],
                                                                 expected: str) -> None:
    from infra.azure.subscription import principal_type_from_token, token_claims

    token = fake.entra_jwt(claims)
    assert token.count(".") == 2 and "=" not in token
    assert token_claims(token) == claims
    assert principal_type_from_token(token) == expected


def test_the_padding_and_url_alphabet_of_the_payload_are_decoded() -> None:
    from infra.azure.subscription import token_claims

    claims = {**fake.SERVICE_PRINCIPAL_CLAIMS, "xms_tcdt": "??>>~~"}
    token = fake.entra_jwt(claims)
    assert {"-", "_"} & set(token.split(".")[1]), token  # the URL-safe alphabet is in play
    assert token_claims(token) == claims


@pytest.mark.parametrize("token", [
    "opaque-access-token", "a.b", "header..signature", "h.!!not-base64!!.s",
    "h." + base64.urlsafe_b64encode(b"not json").decode().rstrip("=") + ".s",
    "h." + base64.urlsafe_b64encode(b'["a list"]').decode().rstrip("=") + ".s",
])
def test_an_unreadable_token_falls_back_to_user_with_a_warning(
        token: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Not expected from Entra; the run goes on as every run did before the type was read
    (User, right for `az login`), and the warning names the ARM error a service principal
    would then meet."""
    from infra.azure import subscription

    warned: list[str] = []
    monkeypatch.setattr(subscription.pulumi.log, "warn",
                        lambda message, *args, **kwargs: warned.append(message))
    with pytest.raises(ValueError):
        subscription.token_claims(token)
    assert subscription.principal_type_from_token(token) == "User"
    (message,) = warned
    assert "UnmatchedPrincipalType" in message and "az login" in message


# --- NetApp Files ------------------------------------------------------------------------------
def test_netapp_volume_sits_in_the_delegated_subnet(run: Run) -> None:
    volume = run.one(VOLUME).inputs
    assert volume["subnetId"].endswith("/subnets/netapp")
    assert volume["protocolTypes"] == ["NFSv4.1"]
    assert volume["usageThreshold"] == 4096 * GIB
    (rule,) = volume["exportPolicy"]["rules"]
    assert rule["allowedClients"] == plan_subnets("10.1.0.0/16").nodes
    assert rule["nfsv41"] is True and rule["nfsv3"] is False


def test_capacity_pool_follows_the_settings(run: Run) -> None:
    pool = run.one(CAPACITY_POOL).inputs
    assert pool["serviceLevel"] == "Premium"
    assert pool["size"] == 4 * TIB


def test_the_job_mounts_the_netapp_volume_over_nfs(run: Run) -> None:
    pv = run.one("kubernetes:core/v1:PersistentVolume").inputs["spec"]
    assert pv["nfs"] == {"server": fake.ANF_MOUNT_IP, "path": "/torchrec-cloud-azure-shared"}
    assert "vers=4.1" in pv["mountOptions"]
    assert run.outputs["file_system_id"].endswith("/volumes/shared")


# --- checkpoints -------------------------------------------------------------------------------
def test_storage_account_forbids_public_blobs_and_requires_tls_1_2(run: Run) -> None:
    account = run.one(ACCOUNT).inputs
    assert account["allowBlobPublicAccess"] is False
    assert account["minimumTlsVersion"] == "TLS1_2"
    assert account["enableHttpsTrafficOnly"] is True
    assert account["allowSharedKeyAccess"] is False
    assert account["kind"] == "StorageV2"
    assert account["encryption"]["services"]["blob"]["enabled"] is True
    assert run.one(CONTAINER).inputs["publicAccess"] == "None"


def test_checkpoint_storage_survives_destroy_unless_told(run: Run,
                                                        no_placement_local_accounts_image: Run
                                                        ) -> None:
    for resource in (run.one(ACCOUNT), run.one(CONTAINER)):
        assert resource.retain_on_delete is True
    for resource in (no_placement_local_accounts_image.one(ACCOUNT),
                     no_placement_local_accounts_image.one(CONTAINER)):
        assert resource.retain_on_delete is False


def test_blob_role_is_scoped_to_the_checkpoint_container_only(run: Run) -> None:
    role = _role(run, STORAGE_BLOB_DATA_CONTRIBUTOR)
    assert role.inputs["scope"].endswith("/blobServices/default/containers/checkpoints")
    assert role.inputs["principalId"] == fake.TRAINER_PRINCIPAL_ID
    assert role.inputs["principalType"] == "ServicePrincipal"
    assert role.inputs["roleDefinitionId"] == (
        f"/subscriptions/{fake.SUBSCRIPTION}/providers/Microsoft.Authorization/roleDefinitions/"
        f"{STORAGE_BLOB_DATA_CONTRIBUTOR}")


def test_a_preparation_source_in_the_account_is_read_by_the_preparation_s_own_identity() -> None:
    """dataset.prepare reads az://<container>/<prefix> of the checkpoint account with its own
    identity, federated with `torchrec/trainer-prepare` only: Storage Blob Data Reader on the
    account (the container comes later), and no write anywhere; the trainer gets no read."""
    run = run_stack("azure", overrides={"dataset": {"path": "criteo/prepared", "prepare": {
        "enabled": True, "source": "az://raw/criteo-1tb"}}})
    role = _role(run, STORAGE_BLOB_DATA_READER, fake.PREPARE_PRINCIPAL_ID)
    assert role.inputs["principalType"] == "ServicePrincipal"
    assert "/providers/Microsoft.Storage/storageAccounts/" in role.inputs["scope"]
    assert "/containers/" not in role.inputs["scope"]
    assert [r for r in run.of_type(ROLE)
            if r.inputs["principalId"] == fake.PREPARE_PRINCIPAL_ID] == [role]
    assert not [r for r in run.of_type(ROLE)
                if r.inputs["roleDefinitionId"].endswith(STORAGE_BLOB_DATA_READER)
                and r.inputs["principalId"] == fake.TRAINER_PRINCIPAL_ID]
    subjects = {r.inputs["subject"] for r in run.of_type(
        "azure-native:managedidentity:FederatedIdentityCredential")}
    assert subjects == {"system:serviceaccount:torchrec:trainer",
                        "system:serviceaccount:torchrec:trainer-prepare"}


def test_a_preparation_source_in_an_existing_account_is_readable_on_its_container() -> None:
    """The user's own account (az://<container>@<account>.blob.core.windows.net/...): Reader on
    that container, by its ARM id, and the job waits for the grant."""
    run = run_stack("azure", overrides={"dataset": {"path": "criteo/prepared", "prepare": {
        "enabled": True, "source": "az://raw@criteodata.blob.core.windows.net/criteo-1tb",
        "sourceResourceGroup": "data-rg"}}})
    role = _role(run, STORAGE_BLOB_DATA_READER, fake.PREPARE_PRINCIPAL_ID)
    assert role.inputs["scope"] == (
        f"/subscriptions/{fake.SUBSCRIPTION}/resourceGroups/data-rg/providers/"
        "Microsoft.Storage/storageAccounts/criteodata/blobServices/default/containers/raw")
    job = run.one("kubernetes:batch/v1:Job")
    assert run.waits_for(job, role)
    # The subnet a virtual network rule on that account must admit (README): a stack output.
    nodes = [s for s in run.of_type(SUBNET) if "nodes" in s.name]
    assert len(nodes) == 1 and run.outputs["node_subnet_id"] == nodes[0].outputs["id"]


def test_no_bucket_source_no_read_grant(run: Run) -> None:
    assert not [r for r in run.of_type(ROLE)
                if r.inputs["roleDefinitionId"].endswith(STORAGE_BLOB_DATA_READER)
                and r.inputs["principalId"] == fake.TRAINER_PRINCIPAL_ID]


def test_the_deployer_may_read_the_checkpoint_container_from_a_laptop(
        run: Run, no_placement_local_accounts_image: Run) -> None:
    """`python -m torchrec_cloud status|tensorboard --stack azure` read <checkpoint_uri>/
    telemetry/ with the user's own `az login`. The account takes Entra tokens only (no shared
    keys), and a token reads blobs only with a data-plane role: Storage Blob Data Reader on the
    checkpoint container, for whoever ran `pulumi up` (local accounts or not), nothing wider."""
    for stack in (run, no_placement_local_accounts_image):
        assert stack.one(ACCOUNT).inputs["allowSharedKeyAccess"] is False
        role = _role(stack, STORAGE_BLOB_DATA_READER, fake.DEPLOYER_OBJECT_ID)
        assert role.inputs["scope"] == stack.one(CONTAINER).outputs["id"]
        assert role.inputs["scope"].endswith("/blobServices/default/containers/checkpoints")
        assert role.inputs["roleDefinitionId"] == (
            f"/subscriptions/{fake.SUBSCRIPTION}/providers/Microsoft.Authorization/"
            f"roleDefinitions/{STORAGE_BLOB_DATA_READER}")
        deployer = [r for r in stack.of_type(ROLE)
                    if r.inputs["principalId"] == fake.DEPLOYER_OBJECT_ID
                    and r.inputs["roleDefinitionId"].endswith((STORAGE_BLOB_DATA_READER,
                                                               STORAGE_BLOB_DATA_CONTRIBUTOR))]
        assert deployer == [role]  # reads only: writing stays the job's


def test_federated_credential_names_exactly_the_jobs_service_account(run: Run) -> None:
    federation = run.one(FEDERATION).inputs
    assert federation["subject"] == "system:serviceaccount:torchrec:trainer"
    assert federation["issuer"] == fake.OIDC_ISSUER
    assert federation["audiences"] == ["api://AzureADTokenExchange"]
    assert federation["resourceName"] == run.one(IDENTITY).inputs["resourceName"]


def test_the_jobs_service_account_carries_the_identity(run: Run) -> None:
    account = run.one("kubernetes:core/v1:ServiceAccount").inputs["metadata"]
    assert account["name"] == "trainer" and account["namespace"] == "torchrec"
    assert account["annotations"]["azure.workload.identity/client-id"] == fake.TRAINER_CLIENT_ID
    labels = training_pod_template(run)["metadata"]["labels"]
    assert labels["azure.workload.identity/use"] == "true"
    assert run.outputs["checkpoint_uri"] == "az://checkpoints/dlrm"


# --- registry and image -------------------------------------------------------------------------
def test_registry_has_no_admin_user_and_the_kubelet_may_pull(run: Run) -> None:
    registry = run.one(REGISTRY).inputs
    assert registry["adminUserEnabled"] is False
    assert registry["sku"]["name"] in ("Basic", "Standard")
    pull = _role(run, ACR_PULL)
    assert pull.inputs["principalId"] == fake.KUBELET_OBJECT_ID
    assert pull.inputs["scope"].endswith(f"/registries/{run.outputs['registry']}")
    assert run.waits_for(run.one(JOB), pull)


def test_trainer_image_is_built_into_the_stacks_registry(run: Run) -> None:
    image = run.one("docker-build:index:Image").inputs
    server = f"{run.outputs['registry']}.azurecr.io"
    assert image["push"] is True
    # `pulumi preview` never builds the CUDA image (buildOnPreview defaults to true); the tag is
    # a content hash, so the preview still shows a changed trainer. Shared infra/image.py: every
    # cloud's image is built this way.
    assert image["buildOnPreview"] is False
    assert image["tags"][0].startswith(f"{server}/torchrec-trainer:")
    assert run.outputs["trainer_image"].startswith(f"{server}/")


def test_the_image_is_pushed_in_the_same_run_with_an_acr_token_for_the_deployer(run: Run) -> None:
    """One `pulumi up`: no `az acr login` before the registry exists. The push logs in with the
    null-GUID user and the ACR refresh token exchanged for the deployer's Entra token."""
    image = run.one("docker-build:index:Image")
    assert SECRET_SIG in image.inputs["registries"]  # the token never lands in plain state
    (login,) = _unsecret(image.inputs["registries"])
    server = f"{run.outputs['registry']}.azurecr.io"
    assert login["address"] == server
    assert login["username"] == "00000000-0000-0000-0000-000000000000"
    assert login["password"] == fake.ACR_REFRESH_TOKEN
    exchanges = [fields for url, fields in fake.EXCHANGES if url == f"https://{server}/oauth2/exchange"]
    # The registry-audience token, which a registry with ARM-audience tokens disabled (built-in
    # Azure Policy) still accepts; the fake registry refuses the ARM one.
    assert exchanges and exchanges[-1] == {"grant_type": "access_token", "service": server,
                                           "tenant": fake.TENANT,
                                           "access_token": fake.ACR_AUDIENCE_TOKEN}
    assert run.waits_for(image, run.one(REGISTRY))


def test_a_failed_token_exchange_stops_the_run_with_the_registry_named() -> None:
    from infra.azure import acr_login

    with pytest.raises(RuntimeError, match="example.azurecr.io.*refresh_token"):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(acr_login, "post_form", lambda url, fields: {"errors": []})
            acr_login.exchange_for_refresh_token("example.azurecr.io", fake.TENANT, "t")


def test_the_token_exchange_retries_network_errors_and_5xx_but_not_4xx() -> None:
    import urllib.error

    from infra.azure import acr_login, https

    answers = [urllib.error.URLError("dns"), urllib.error.HTTPError("u", 503, "busy", {}, None),
               {"refresh_token": "r"}]

    def post(url, fields):
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(acr_login, "post_form", post)
        patch.setattr(https, "time", SimpleNamespace(sleep=lambda seconds: None))
        assert acr_login.exchange_for_refresh_token("example.azurecr.io", fake.TENANT, "t") == "r"
        answers[:] = [urllib.error.HTTPError("u", 401, "unauthorized", {}, None)]
        with pytest.raises(urllib.error.HTTPError):
            acr_login.exchange_for_refresh_token("example.azurecr.io", fake.TENANT, "t")
        assert not answers  # one try only


SECRET_SIG = "4dabf18193072939515e22adb298388d"  # Pulumi's marker of a secret value on the wire


def _unsecret(value: Any) -> Any:
    """A secret input arrives wrapped ({SECRET_SIG: ..., "value": x})."""
    return value["value"] if isinstance(value, dict) and SECRET_SIG in value else value


def test_a_given_image_skips_the_registry(no_placement_local_accounts_image: Run) -> None:
    run = no_placement_local_accounts_image
    assert not run.of_type(REGISTRY) and not run.of_type("docker-build:index:Image")
    assert run.outputs["trainer_image"] == "example.azurecr.io/trainer:1"


# --- settings refused before anything exists ----------------------------------------------------
@pytest.mark.parametrize(("overrides", "path"), [
    ({"gpuPools": {"onDemand": {"name": "GPU-Pool"}}}, "gpuPools.onDemand.name"),
    ({"gpuPools": {"spot": {"name": "averyveryverylongname"}}}, "gpuPools.spot.name"),
    ({"sharedFileSystem": {"poolSizeTib": 0}}, "sharedFileSystem.poolSizeTib"),
    ({"sharedFileSystem": {"volumeSizeGib": 8192}}, "sharedFileSystem.volumeSizeGib"),
    ({"sharedFileSystem": {"volumeSizeGib": 10}}, "sharedFileSystem.volumeSizeGib"),
    ({"sharedFileSystem": {"serviceLevel": "Gold"}}, "sharedFileSystem.serviceLevel"),
    ({"systemPool": {"maxPrice": 1}}, "systemPool.maxPrice"),
    # a machine without InfiniBand under the default fabric: named on interconnect.fabric, whose
    # message names this machine and the ones that have it (either is the fix)
    ({"gpuPools": {"onDemand": {"machineType": "Standard_NC24ads_A100_v4"}},
      "job": {"processesPerNode": 1}}, "interconnect.fabric"),
    ({"gpuPools": {"spot": {"maxPrice": -5}}}, "gpuPools.spot.maxPrice"),
    ({"gpuZones": ["4"]}, "gpuZones"),
])
def test_bad_azure_settings_are_refused_before_any_resource(overrides: dict, path: str) -> None:
    run = run_stack("azure", overrides=overrides, expect_error=True)
    assert isinstance(run.error, SettingsError), run.error
    assert path in {problem.path for problem in run.error.problems}, run.error
    assert not run.resources


# --- spot eviction -> drain -----------------------------------------------------------------
def test_a_spot_eviction_is_drained_by_aks_node_auto_drain_alone(run: Run) -> None:
    """AKS cordons and drains on a Preempt scheduled event by itself (infra/azure/node_pools.py);
    the evicted VM is deleted so the autoscaler can replace it, and no second handler races AKS."""
    from infra.azure.node_pools import SPOT_EVICTION_POLICY

    spot = _pools(run)["gpuspot"].inputs
    assert spot["scaleSetPriority"] == "Spot"
    assert spot["scaleSetEvictionPolicy"] == SPOT_EVICTION_POLICY.value == "Delete"
    charts = {r.inputs["chart"] for r in run.of_type(RELEASE)}
    assert not any("termination" in chart for chart in charts), charts


# --- InfiniBand environment per ND machine ------------------------------------------------------
ND_MACHINES = sorted(m.name for m in MACHINES
                     if m.cloud == Cloud.AZURE and m.interconnect == Interconnect.INFINIBAND)
HCAS = "=mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1"


def _env(name: str, fabric: bool = True) -> dict[str, str]:
    """The pod environment for `name`; interconnect_spec reads only interconnect.fabric."""
    settings = SimpleNamespace(interconnect=SimpleNamespace(fabric=fabric))
    return dict(interconnect_spec(settings, machine(Cloud.AZURE, name)).env)  # type: ignore[arg-type]




@pytest.mark.parametrize(("name", "topology"), [
    ("Standard_ND96asr_v4", "/opt/microsoft/ndv4-topo.xml"),
    ("Standard_ND96amsr_A100_v4", "/opt/microsoft/ndv4-topo.xml"),
    ("Standard_ND96isr_H100_v5", "/opt/microsoft/ndv5-topo.xml"),
    ("Standard_ND96isr_H200_v5", "/opt/microsoft/ndv5-topo.xml"),
])
def test_each_nd_generation_gets_its_topology_file_and_forced_ib(name: str, topology: str) -> None:
    env = _env(name)
    assert env["NCCL_TOPO_FILE"] == topology
    assert env["NCCL_NET"] == "IB" and env["NCCL_IB_DISABLE"] == "0"
    assert env["NCCL_IB_HCA"] == HCAS
    assert env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"  # GPU numbering as in the topology file
    assert env["NCCL_IB_PCI_RELAXED_ORDERING"] == "1" and env["NCCL_IGNORE_CPU_AFFINITY"] == "1"
    assert env["UCX_TLS"] == "rc" and env["UCX_NET_DEVICES"] == "mlx5_0:1"


@pytest.mark.parametrize("name", ND_MACHINES)
def test_the_fabric_gate_expects_every_hca_the_env_names(name: str) -> None:
    settings = SimpleNamespace(interconnect=SimpleNamespace(fabric=True))
    spec = interconnect_spec(settings, machine(Cloud.AZURE, name))  # type: ignore[arg-type]
    assert spec.fabric_rails == len(spec.env["NCCL_IB_HCA"].removeprefix("=").split(",")) == 8


def test_the_topology_files_the_env_names_are_the_ones_the_image_installs() -> None:
    dockerfile = (Path(__file__).parents[1] / "trainer" / "Dockerfile").read_text()
    for name in ND_MACHINES:
        path = topology_file(machine(Cloud.AZURE, name))  # from the catalog's azure_topology
        assert f" {path}\n" in dockerfile, f"{name}: trainer/Dockerfile installs no {path}"


@pytest.mark.parametrize("name", ND_MACHINES)
def test_the_ethernet_virtual_function_is_left_out_of_nccl(name: str) -> None:
    """The accelerated-networking VF is an mlx5 device too, numbered after the eight HCAs on AKS
    (mlx5_8): NCCL gets an exact list of the InfiniBand HCAs, so no prefix can reach it."""
    hcas = _env(name)["NCCL_IB_HCA"]
    assert hcas.startswith("=") and not hcas.startswith("^")
    devices = [entry.split(":")[0] for entry in hcas[1:].split(",")]
    assert devices == [f"mlx5_{i}" for i in range(machine(Cloud.AZURE, name).gpu_count)]
    assert "mlx5_8" not in devices and not any("an" in d for d in devices)


def test_only_nd_v5_gets_the_hopper_tuning() -> None:
    v4, v5 = _env("Standard_ND96asr_v4"), _env("Standard_ND96isr_H200_v5")
    tuning = {"NCCL_IB_QPS_PER_CONNECTION": "4", "NCCL_P2P_NET_CHUNKSIZE": "524288",
              "NCCL_PXN_DISABLE": "1", "NCCL_MIN_NCHANNELS": "32"}
    assert tuning.items() <= v5.items()
    assert not tuning.keys() & v4.keys()


def test_the_forced_network_is_the_one_the_fabric_gate_expects() -> None:
    from trainer.gate.nccl_log import transport_of_network  # torch-free (fabric_gate: torch)

    for name in ND_MACHINES:
        assert transport_of_network(_env(name)["NCCL_NET"]) == machine(
            Cloud.AZURE, name).fabric_transport


def test_without_the_fabric_nccl_is_not_forced_onto_ib() -> None:
    env = _env("Standard_ND96isr_H100_v5", fabric=False)
    assert env["NCCL_IB_DISABLE"] == "1" and "NCCL_NET" not in env


# --- scale from zero: node-template tags on the GPU scale sets ---------------------------------
def test_gpu_pools_declare_gpus_and_infiniband_for_scale_from_zero(run: Run) -> None:
    for name, pool in _pools(run).items():
        tags = pool.inputs["tags"]
        assert tags[TEMPLATE + "resources_nvidia.com_gpu"] == "8"
        assert tags[RDMA_TAG] == str(RDMA_HCA_MAX)
        assert tags[TEMPLATE + "label_torchrec-cloud_pool"] == name
        assert tags[TEMPLATE + "taint_sku"] == "gpu:NoSchedule"
    spot = _pools(run)["gpuspot"].inputs["tags"]
    assert spot[TEMPLATE + "taint_kubernetes.azure.com_scalesetpriority"] == "spot:NoSchedule"
    assert spot[TEMPLATE + "label_kubernetes.azure.com_scalesetpriority"] == "spot"


def _autoscaler_resource(tag: str) -> str:
    """How the Azure cluster autoscaler reads a resource tag back (azure_template.go)."""
    return tag.removeprefix(TEMPLATE + "resources_").replace("_", "/").replace("~2", "/")


def test_the_pods_rdma_resource_is_the_one_the_plugin_offers_and_the_pools_declare(run: Run
                                                                                  ) -> None:
    pod = training_pod_template(run)["spec"]
    requested = {name for c in pod["containers"] for name in c["resources"]["limits"]
                 if name.startswith("rdma/")}
    (config,) = json.loads(run.one(NIC_POLICY).inputs["spec"]["rdmaSharedDevicePlugin"][
        "config"])["configList"]
    offered = f"{config['resourcePrefix']}/{config['resourceName']}"
    assert requested == {offered}
    for pool in run.of_type(POOL):
        declared = {_autoscaler_resource(k) for k in pool.inputs["tags"]
                    if k.startswith(TEMPLATE + "resources_")}
        assert offered in declared and "nvidia.com/gpu" in declared


def test_a_resource_name_with_an_underscore_cannot_be_declared() -> None:
    assert _autoscaler_resource(resource_tag("rdma/ib")) == "rdma/ib"
    with pytest.raises(ValueError, match="rename the resource"):
        resource_tag("rdma/shared_ib")  # the autoscaler would read rdma/shared/ib
    assert label_tag(TEMPLATE + "label_", "cpu_arch/x") == TEMPLATE + "label_cpu~2arch_x"


# --- Kubernetes version: what AKS lists when the program runs, kept once live ---------------------
UTC = timezone.utc
# What ARM's kubernetesVersions would answer in the stack's region on each day the suite pins
# (community minors, LTS-only minors, preview), from the AKS calendar in
# infra/kubernetes_versions.py; 2028 as the issue states it (only 1.36-1.38).
LISTINGS = {
    "2026-11-26": fake.AKS_LISTING,
    "2027-06-01": fake.aks_listing(official=["1.36", "1.37", "1.38"], default="1.37",
                                   lts_only=["1.33", "1.34", "1.35"], preview=["1.39"]),
    "2028-06-01": fake.aks_listing(official=["1.36", "1.37", "1.38"], default="1.37"),
}


@pytest.fixture
def cloud(monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    """The fake subscription, reset per test: AKS's listing, live clusters, kept resources."""
    monkeypatch.setattr(fake, "LIVE_CLUSTERS", {})
    monkeypatch.setattr(fake, "EXISTING", set())
    monkeypatch.setattr(fake, "AKS_REQUESTS", [])

    def on(day: str) -> Any:
        monkeypatch.setattr(fake, "AKS_LISTING", LISTINGS[day])
        return time_machine.travel(datetime.fromisoformat(day).replace(hour=12, tzinfo=UTC),
                                   tick=True)
    return SimpleNamespace(on=on)


def _offered(day: str) -> set[str]:
    return {v["version"] for v in LISTINGS[day]["values"]
            if "KubernetesOfficial" in v["capabilities"]["supportPlan"] and not v.get("isPreview")}


def _default(day: str) -> str:
    return next(v["version"] for v in LISTINGS[day]["values"] if v.get("isDefault"))


def _versions(run: Run) -> dict[str, str]:
    """The control plane's and every pool's requested version."""
    cluster = run.one(CLUSTER).inputs
    found = {"cluster": cluster["kubernetesVersion"]}
    found.update({p["name"]: p["orchestratorVersion"] for p in cluster["agentPoolProfiles"]})
    found.update({name: pool.inputs["orchestratorVersion"] for name, pool in _pools(run).items()})
    return found


@pytest.mark.parametrize("day", sorted(LISTINGS))
def test_the_shipped_stack_creates_the_cluster_at_the_version_aks_lists_that_day(
        cloud: SimpleNamespace, day: str) -> None:
    with cloud.on(day):
        run = run_stack("azure")
    versions = _versions(run)
    assert set(versions.values()) == {_default(day)} and _default(day) in _offered(day)
    cluster = run.one(CLUSTER).inputs
    assert cluster["supportPlan"] == "KubernetesOfficial"
    assert cluster["sku"] == {"name": "Base", "tier": "Standard"}  # SLA, not Free; no LTS bill
    assert run.outputs["kubernetes_version"] == _default(day)
    # Asked of ARM with the deployer's own token, for the stack's region.
    ((url, token),) = fake.AKS_REQUESTS
    assert token == fake.ENTRA_ACCESS_TOKEN
    assert url == (f"https://management.azure.com/subscriptions/{fake.SUBSCRIPTION}/providers/"
                   "Microsoft.ContainerService/locations/eastus/kubernetesVersions"
                   "?api-version=2025-09-01")


def test_a_pinned_minor_aks_does_not_list_is_refused_before_any_resource(cloud: SimpleNamespace
                                                                         ) -> None:
    with cloud.on("2028-06-01"):
        run = run_stack("azure", overrides={"kubernetes": {"version": "1.35"}}, expect_error=True)
    assert isinstance(run.error, SettingsError) and not run.resources
    (problem,) = [p for p in run.error.problems if p.path == "kubernetes.version"]
    assert "1.36, 1.37, 1.38" in problem.allowed and "az aks get-versions" in problem.allowed


def test_a_pinned_minor_aks_lists_is_created(cloud: SimpleNamespace) -> None:
    with cloud.on("2027-06-01"):
        run = run_stack("azure", overrides={"kubernetes": {"version": "1.38"}})
    assert set(_versions(run).values()) == {"1.38"}


def test_a_preview_minor_is_never_offered(cloud: SimpleNamespace) -> None:
    with cloud.on("2027-06-01"):
        run = run_stack("azure", overrides={"kubernetes": {"version": "1.39"}}, expect_error=True)
    assert isinstance(run.error, SettingsError) and not run.resources


def test_a_minor_aks_creates_only_with_lts_is_refused_without_long_term_support(
        cloud: SimpleNamespace) -> None:
    with cloud.on("2026-11-26"):
        run = run_stack("azure", overrides={"kubernetes": {"version": "1.33"}}, expect_error=True)
    assert isinstance(run.error, SettingsError) and not run.resources
    (problem,) = [p for p in run.error.problems if p.path == "kubernetes.version"]
    assert "azure.longTermSupport: true" in problem.allowed and "Premium" in problem.allowed
    assert "1.34, 1.35, 1.36, 1.37" in problem.allowed


def test_long_term_support_is_an_explicit_choice_with_the_premium_tier(cloud: SimpleNamespace
                                                                       ) -> None:
    with cloud.on("2026-11-26"):
        run = run_stack("azure", overrides={"kubernetes": {"version": "1.33"},
                                            "azure": {"longTermSupport": True}})
    cluster = run.one(CLUSTER).inputs
    assert set(_versions(run).values()) == {"1.33"}
    assert cluster["supportPlan"] == "AKSLongTermSupport"
    assert cluster["sku"]["tier"] == "Premium"


def _live(run: Run, control_plane: str, pools: dict[str, str] | None = None,
          nodes: dict[str, int] | None = None,
          vm_sizes: dict[str, str] | None = None) -> dict[str, Any]:
    """AKS runs the stack's cluster at `control_plane`, every pool at it unless `pools` says,
    with `nodes` nodes per pool (default none); returns the stack outputs the run left (what
    the next run reads)."""
    names = [name for name in _versions(run) if name != "cluster"]
    fake.live_cluster(run.outputs["cluster_name"], control_plane,
                      {name: (pools or {}).get(name, control_plane) for name in names},
                      nodes=nodes, vm_sizes=vm_sizes)
    return dict(run.outputs)


def test_a_live_cluster_on_an_older_minor_keeps_it(run: Run, cloud: SimpleNamespace) -> None:
    previous = _live(run, "1.34.7")
    with cloud.on("2028-06-01"):  # AKS no longer creates 1.34
        later = run_stack("azure", previous_outputs=previous)
    assert set(_versions(later).values()) == {"1.34"}  # the minor: the input it was created with
    assert later.outputs["kubernetes_version"] == "1.34.7"
    assert fake.AKS_REQUESTS == []  # nothing asked of the listing for a cluster that exists


def test_a_pool_behind_the_control_plane_is_not_upgraded_unasked(run: Run, cloud: SimpleNamespace
                                                                 ) -> None:
    gpu_pool = next(iter(_pools(run)))
    previous = _live(run, "1.35.2", pools={gpu_pool: "1.34.9"})
    with cloud.on("2026-11-26"):
        later = run_stack("azure", previous_outputs=previous)
    versions = _versions(later)
    assert versions.pop(gpu_pool) == "1.34"
    assert set(versions.values()) == {"1.35"}


UPGRADE_137 = ("az aks upgrade --resource-group torchrec-cloud-azure-rg --name "
               "torchrec-cloud-azure-aks --kubernetes-version 1.37 --yes")


def test_setting_the_next_minor_names_the_upgrade_aks_takes_only_in_one_piece(
        run: Run, cloud: SimpleNamespace) -> None:
    """A pinned upgrade. AKS refuses a cluster update that moves the control plane and the
    inline system pool while the GPU AgentPools stay behind, and, with the patch auto-upgrade
    channel, a control-plane-only one (Azure/AKS#4765): the whole-cluster upgrade is one
    request, which `az aks upgrade` sends and Pulumi cannot. So `pulumi up` stops before any
    change with that command; after it, the same setting updates the cluster and its pools in
    place to the minor they already run (issue 32, Azure A), each pool at the nodes it runs."""
    previous = _live(run, "1.35.2")
    with cloud.on("2027-06-01"):
        refused = run_stack("azure", overrides={"kubernetes": {"version": "1.37"}},
                            previous_outputs=previous, expect_error=True)  # two minors at once
    assert isinstance(refused.error, SettingsError) and not refused.resources
    previous = _live(run, "1.36.2")
    with cloud.on("2027-06-01"):
        refused = run_stack("azure", overrides={"kubernetes": {"version": "1.37"}},
                            previous_outputs=previous, expect_error=True)
    assert isinstance(refused.error, SettingsError) and not refused.resources
    (problem,) = refused.error.problems
    assert problem.path == "kubernetes.version" and problem.value == "1.37"
    assert UPGRADE_137 in problem.allowed and "runs 1.36.2" in problem.allowed
    assert "no surge node" in problem.allowed
    assert "job.suspend" not in problem.allowed  # no GPU node runs: nothing to stop
    # What the next run does, said as it is: Pulumi's state still holds 1.36, so that run is
    # an in-place update to what AKS already runs, not "nothing".
    assert "changes nothing" not in problem.allowed
    assert ("then `pulumi up --stack azure` again with this setting: it records 1.37 in the "
            "stack's state by updating the cluster and its pools in place to the version they "
            "already run, so no node rolls and every pool keeps the node count it runs"
            ) in problem.allowed
    # What the user runs: AKS upgrades the control plane and every pool together; then the
    # same setting is a run that declares every pool at what it runs, counts included.
    gpu_pool = next(iter(_pools(run)))
    previous = _live(run, "1.37.1", nodes={"system": 2, gpu_pool: 2})
    with cloud.on("2027-06-01"):
        later = run_stack("azure", overrides={"kubernetes": {"version": "1.37"}},
                          previous_outputs=previous)
    assert set(_versions(later).values()) == {"1.37"}
    assert later.outputs["kubernetes_version"] == "1.37.1"
    assert _pools(later)[gpu_pool].inputs["count"] == 2


def test_an_upgrade_with_gpu_nodes_running_says_how_to_suspend_and_resume_the_job(
        run: Run, cloud: SimpleNamespace) -> None:
    gpu_pool = next(iter(_pools(run)))
    previous = _live(run, "1.36.2", nodes={"system": 2, gpu_pool: 2})
    with cloud.on("2027-06-01"):
        refused = run_stack("azure", overrides={"kubernetes": {"version": "1.37"}},
                            previous_outputs=previous, expect_error=True)
    assert isinstance(refused.error, SettingsError) and not refused.resources
    (problem,) = refused.error.problems
    text = problem.allowed
    assert "2 node(s)" in text and UPGRADE_137 in text
    # The suspending run keeps the version the cluster runs (else it is refused again).
    # Every pulumi command names the stack (the shell may have another cloud's selected).
    suspend = text.index("pulumi config set --stack azure --path kubernetes.version 1.36 && "
                         "pulumi config set --stack azure --path job.suspend true")
    assert suspend < text.rindex(UPGRADE_137) < text.index(
        "pulumi config set --stack azure --path kubernetes.version 1.37 && "
        "pulumi config set --stack azure --path job.suspend false")
    assert "`pulumi up --stack azure`" in text and "`pulumi up`" not in text
    # Followed as written: the suspending run goes ahead.
    with cloud.on("2027-06-01"):
        suspending = run_stack("azure", overrides={"kubernetes": {"version": "1.36"},
                                                   "job": {"suspend": True}},
                               previous_outputs=previous)
    assert suspending.one(JOB).inputs["spec"]["suspend"] is True


def test_a_cluster_aks_upgraded_itself_is_declared_as_it_runs_so_nothing_rolls(
        run: Run, cloud: SimpleNamespace) -> None:
    """A cloud-side auto-upgrade: AKS's lookup shows the cluster and every pool already on a
    newer minor than kubernetes.version. Every pool is declared at what it runs, so this run
    neither downgrades nor rolls any node, and nothing is refused."""
    previous = _live(run, "1.36.4", nodes={"system": 2, next(iter(_pools(run))): 2})
    with cloud.on("2027-06-01"):
        later = run_stack("azure", overrides={"kubernetes": {"version": "1.35"}},
                          previous_outputs=previous)
    assert set(_versions(later).values()) == {"1.36"}
    assert later.outputs["kubernetes_version"] == "1.36.4"
    assert fake.AKS_REQUESTS == []


def test_a_live_pool_is_declared_at_the_nodes_it_runs_so_no_update_scales_it(
        run: Run, cloud: SimpleNamespace) -> None:
    """After an auto-upgrade with 2 GPU nodes up under the job, the run that records it sends
    every pool whole (azure-native's PUT): each pool's count is the one AKS runs, never the
    settings' desiredNodes (0 for GPU pools), which AKS refuses as a manual scale of an
    autoscaled pool or carries out under the job (Azure/AKS#1627)."""
    gpu, other = list(_pools(run))[:2]
    assert _pools(run)[gpu].inputs["count"] == 0  # a first run: desiredNodes
    previous = _live(run, "1.36.4", nodes={"system": 3, gpu: 2, other: 0})
    with cloud.on("2027-06-01"):
        later = run_stack("azure", overrides={"kubernetes": {"version": "1.35"}},
                          previous_outputs=previous)
    assert _pools(later)[gpu].inputs["count"] == 2
    assert _pools(later)[other].inputs["count"] == 0
    (system,) = later.one(CLUSTER).inputs["agentPoolProfiles"]
    assert system["count"] == 3  # the inline system pool too, not its desiredNodes 2
    assert (system["minCount"], system["maxCount"]) == (1, 3)


def test_a_new_gpu_vm_size_under_a_running_job_is_refused_with_suspend_and_resume(
        run: Run, cloud: SimpleNamespace) -> None:
    """A template change that replaces the pool (AKS cannot change vmSize in place): refused
    while the pool has nodes, with the commands that stop the job first and resume it; once
    the pool is empty the same change goes ahead."""
    new_size = {"gpuPools": {"onDemand": {"machineType": "Standard_ND96amsr_A100_v4"}}}
    sizes = {"gpu": "Standard_ND96asr_v4", "gpuspot": "Standard_ND96asr_v4"}
    previous = _live(run, "1.35.2", nodes={"gpu": 2}, vm_sizes=sizes)
    with cloud.on("2026-11-26"):
        refused = run_stack("azure", overrides=new_size, previous_outputs=previous,
                            expect_error=True)
    assert isinstance(refused.error, SettingsError) and not refused.resources
    (problem,) = refused.error.problems
    assert problem.path == "gpuPools.onDemand.machineType"
    assert "runs Standard_ND96asr_v4 on 2 node(s)" in problem.allowed
    assert ("pulumi config set --stack azure --path gpuPools.onDemand.machineType "
            "Standard_ND96asr_v4 && pulumi config set --stack azure --path job.suspend true"
            ) in problem.allowed
    assert ("pulumi config set --stack azure --path gpuPools.onDemand.machineType "
            "Standard_ND96amsr_A100_v4 && pulumi config set --stack azure --path job.suspend "
            "false") in problem.allowed
    previous = _live(run, "1.35.2", nodes={"gpu": 0}, vm_sizes=sizes)
    with cloud.on("2026-11-26"):
        later = run_stack("azure", overrides=new_size, previous_outputs=previous)
    assert _pools(later)["gpu"].inputs["vmSize"] == "Standard_ND96amsr_A100_v4"


def test_a_cluster_deleted_outside_pulumi_is_made_again_at_a_minor_aks_offers(
        run: Run, cloud: SimpleNamespace) -> None:
    previous = {**run.outputs, "kubernetes_version": "1.34.7"}  # no live cluster in the fake
    with cloud.on("2028-06-01"):  # AKS no longer creates 1.34
        later = run_stack("azure", previous_outputs=previous)
    assert set(_versions(later).values()) == {_default("2028-06-01")}
    assert len(fake.AKS_REQUESTS) == 1  # the listing decided, not the last run's record


def test_a_stack_from_before_the_cluster_group_output_keeps_the_version_it_recorded(
        run: Run, cloud: SimpleNamespace) -> None:
    previous = {k: v for k, v in run.outputs.items() if k != "cluster_resource_group"}
    previous["kubernetes_version"] = "1.34.7"  # AKS cannot be asked: the group is not named
    with cloud.on("2028-06-01"):
        later = run_stack("azure", previous_outputs=previous)
    assert set(_versions(later).values()) == {"1.34"}
    assert fake.AKS_REQUESTS == []


def test_a_setting_equal_to_the_control_planes_minor_finishes_a_half_applied_upgrade(
        run: Run, cloud: SimpleNamespace) -> None:
    gpu_pool = next(iter(_pools(run)))
    previous = _live(run, "1.36.2", pools={gpu_pool: "1.35.9", "system": "1.34.8"})
    with cloud.on("2027-06-01"):
        later = run_stack("azure", overrides={"kubernetes": {"version": "1.36"}},
                          previous_outputs=previous)
    assert set(_versions(later).values()) == {"1.36"}  # every pool brought up to the cluster
    assert later.outputs["kubernetes_version"] == "1.36.2"  # the control plane is kept
    assert fake.AKS_REQUESTS == []


def test_a_cluster_whose_next_minor_left_aks_upgrades_to_the_lowest_offered_one(
        run: Run, cloud: SimpleNamespace) -> None:
    previous = _live(run, "1.34.7")
    with cloud.on("2028-06-01"):  # AKS offers 1.36-1.38 only, none with LTS
        refused = run_stack("azure", overrides={"kubernetes": {"version": "1.37"}},
                            previous_outputs=previous, expect_error=True)
    assert isinstance(refused.error, SettingsError) and not refused.resources
    (problem,) = [p for p in refused.error.problems if p.path == "kubernetes.version"]
    assert "the next upgrade is to 1.36" in problem.allowed
    with cloud.on("2028-06-01"):
        refused = run_stack("azure", overrides={"kubernetes": {"version": "1.36"}},
                            previous_outputs=previous, expect_error=True)
    (problem,) = refused.error.problems
    assert "--kubernetes-version 1.36 --yes" in problem.allowed and not refused.resources


@pytest.mark.parametrize("key", ["subscriptionId", "clientSecret", "environment"])
def test_stack_config_for_the_default_azure_provider_is_refused_before_any_lookup(
        cloud: SimpleNamespace, monkeypatch: pytest.MonkeyPatch, key: str) -> None:
    from tests import harness

    shipped = harness.stack_config
    monkeypatch.setattr(harness, "stack_config",
                        lambda stack: {**shipped(stack), f"azure-native:{key}": "x"})
    with cloud.on("2026-11-26"):
        run = run_stack("azure", expect_error=True)
    # Only the lookups would have followed it; the resources' provider reads the login.
    assert f"azure-native:{key}" in str(run.error) and "az account set" in str(run.error)
    assert f"`pulumi config rm --stack azure azure-native:{key}`" in str(run.error)
    assert not run.resources and fake.AKS_REQUESTS == []


def test_only_public_azure_is_deployed_to(cloud: SimpleNamespace,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARM_ENVIRONMENT", "usgovernment")
    with cloud.on("2026-11-26"):
        run = run_stack("azure", expect_error=True)
    assert "public Azure only" in str(run.error) and not run.resources
    monkeypatch.setenv("ARM_ENVIRONMENT", "public")
    with cloud.on("2026-11-26"):
        assert run_stack("azure").outputs["kubernetes_version"] == _default("2026-11-26")


def test_the_version_listing_retries_5xx_throttling_and_network_errors_but_not_other_4xx() -> None:
    import urllib.error
    from unittest import mock

    from infra.azure import versions

    def failing(*codes: int):  # noqa: ANN202
        answers = [urllib.error.HTTPError("u", c, "x", None, None) if c else  # type: ignore[arg-type]
                   urllib.error.URLError("dns") for c in codes]
        answers.append({"values": []})  # type: ignore[arg-type]
        return mock.Mock(side_effect=answers)

    sleeps: list[float] = []
    with mock.patch.object(versions, "get_json", failing(503, 0, 429)):
        assert versions.get_with_retries("u", "t", sleeps.append) == {"values": []}
    assert sleeps == [2.0, 4.0, 8.0]
    with mock.patch.object(versions, "get_json", failing(403)), \
            pytest.raises(urllib.error.HTTPError):
        versions.get_with_retries("u", "t", sleeps.append)


def test_the_calendar_gives_advice_and_never_refuses() -> None:
    from datetime import date

    from infra.kubernetes_versions import aks_advice

    (soon,) = aks_advice("1.34", date(2026, 11, 26), False)
    assert "leaves AKS community support on 2026-11-30" in soon
    (ended,) = aks_advice("1.34", date(2027, 1, 5), False)
    assert "left AKS community support on 2026-11-30" in ended
    billed, lts = aks_advice("1.33", date(2026, 11, 26), True)
    assert "Premium tier" in billed and "Long-Term Support ends on 2027-07-31" in lts
    assert aks_advice("1.37", date(2026, 11, 26), False) == []
    assert aks_advice("1.99", date(2030, 1, 1), False) == []  # not in the table: no word


def test_the_versions_module_reads_the_listing_shape_of_the_rest_spec() -> None:
    from infra.azure.versions import parse_listing

    rows = {r.minor: r for r in parse_listing(LISTINGS["2027-06-01"])}
    assert rows["1.35"].lts_only and not rows["1.36"].lts_only
    assert rows["1.39"].preview and rows["1.37"].default


# --- globally unique names -----------------------------------------------------------------------
def test_global_names_are_unique_per_subscription_and_stack_and_fit_azure_rules(run: Run) -> None:
    import re

    from infra.naming import stable_hash

    account, registry = run.outputs["storage_account"], run.outputs["registry"]
    assert re.fullmatch(r"[a-z0-9]{3,24}", account), account
    assert re.fullmatch(r"[a-zA-Z0-9]{5,50}", registry), registry
    suffix = stable_hash(f"{fake.SUBSCRIPTION}/torchrec-cloud/azure")
    assert account.endswith("ckpt" + suffix) and registry.endswith("acr" + suffix)
    assert run.one(ACCOUNT).inputs["accountName"] == account
    assert run.one(REGISTRY).inputs["registryName"] == registry


def test_global_names_do_not_change_between_runs_and_differ_between_scopes(run: Run) -> None:
    from infra.naming import unique_compact

    again = run_stack("azure")
    assert again.outputs["storage_account"] == run.outputs["storage_account"]
    assert again.outputs["registry"] == run.outputs["registry"]
    same = unique_compact("torchrec-cloud-azure", "ckpt", f"{fake.SUBSCRIPTION}/p/s", 24)
    other_sub = unique_compact("torchrec-cloud-azure", "ckpt", f"{fake.TENANT}/p/s", 24)
    other_stack = unique_compact("torchrec-cloud-azure", "ckpt", f"{fake.SUBSCRIPTION}/p/t", 24)
    assert len({same, other_sub, other_stack}) == 3
    long = unique_compact("a-very-long-project-name-and-stack", "ckpt", "x", 24)
    assert len(long) == 24 and long.islower()


# --- retention: destroy cannot reach the checkpoints --------------------------------------------
GROUP = "azure-native:resources:ResourceGroup"


def _destroy_deletes(run: Run) -> set[str]:
    """What `pulumi destroy` deletes: every resource not retained, and (Azure's rule) everything
    inside a resource group that is deleted."""
    deleted_groups = {g.inputs["resourceGroupName"] for g in run.of_type(GROUP)
                      if not g.retain_on_delete}
    return {r.urn for r in run.resources
            if not r.retain_on_delete or r.inputs.get("resourceGroupName") in deleted_groups}


def test_destroy_leaves_the_checkpoint_group_account_and_container(run: Run) -> None:
    kept_group = run.one(GROUP, "ckpt")
    account, container = run.one(ACCOUNT), run.one(CONTAINER)
    assert kept_group.retain_on_delete
    for resource in (account, container):
        assert resource.inputs["resourceGroupName"] == kept_group.inputs["resourceGroupName"]
    deleted = _destroy_deletes(run)
    assert not {kept_group.urn, account.urn, container.urn} & deleted
    # ...while the stack's own group (cluster, file system, registry) goes.
    stack_group = run.named("torchrec-cloud-azure-rg")
    assert stack_group.urn in deleted and run.one(CLUSTER).urn in deleted
    assert run.outputs["checkpoint_resource_group"] == "torchrec-cloud-azure-ckpt-rg"


def test_without_retention_destroy_deletes_the_checkpoints_too(no_placement_local_accounts_image: Run
                                                              ) -> None:
    run = no_placement_local_accounts_image
    deleted = _destroy_deletes(run)
    for resource in (run.one(GROUP, "ckpt"), run.one(ACCOUNT), run.one(CONTAINER)):
        assert resource.urn in deleted


BLOB_SERVICE = "azure-native:storage:BlobServiceProperties"
LIFECYCLE = "azure-native:storage:ManagementPolicy"


def test_deleted_or_overwritten_checkpoints_stay_recoverable_for_a_week(run: Run) -> None:
    """Blob versioning (an overwrite keeps the old version), blob and container soft delete,
    7 days each, on the checkpoint account, kept with it on destroy; permanent delete stays
    off, and the job's role (Storage Blob Data Contributor) has no version delete. Previous
    versions expire after the same 7 days (issue 33)."""
    account = run.one(ACCOUNT)
    recovery = run.one(BLOB_SERVICE).inputs
    assert recovery["accountName"] == account.inputs["accountName"]
    assert recovery["resourceGroupName"] == account.inputs["resourceGroupName"]
    assert recovery["blobServicesName"] == "default"
    assert recovery["isVersioningEnabled"] is True
    for policy in ("deleteRetentionPolicy", "containerDeleteRetentionPolicy"):
        assert recovery[policy] == {"enabled": True, "days": 7}, policy
    assert run.one(BLOB_SERVICE).retain_on_delete and run.one(LIFECYCLE).retain_on_delete
    assert not {run.one(BLOB_SERVICE).urn, run.one(LIFECYCLE).urn} & _destroy_deletes(run)
    (rule,) = run.one(LIFECYCLE).inputs["policy"]["rules"]
    assert rule["enabled"] is True and rule["type"] == "Lifecycle"
    assert rule["definition"]["actions"] == {
        "version": {"delete": {"daysAfterCreationGreaterThan": 7}}}
    assert run.waits_for(run.one(LIFECYCLE), run.one(BLOB_SERVICE))
    # The job writes with Storage Blob Data Contributor, which has no deleteBlobVersion.
    job_role = _role(run, STORAGE_BLOB_DATA_CONTRIBUTOR)
    assert job_role.inputs["principalId"] == fake.TRAINER_PRINCIPAL_ID


WORKSPACE = "azure-native:operationalinsights:Workspace"
DIAGNOSTIC = "azure-native:monitor:DiagnosticSetting"


def test_the_clusters_audit_log_goes_to_a_workspace_kept_with_the_checkpoints(run: Run) -> None:
    """AKS keeps no audit log unless a diagnostic setting sends it: kube-audit-admin (every
    write to the API server) goes to a Log Analytics workspace in the kept checkpoint group,
    which `pulumi destroy` leaves (issue 33)."""
    setting = run.one(DIAGNOSTIC).inputs
    workspace = run.one(WORKSPACE)
    assert setting["resourceUri"].endswith(
        "/providers/Microsoft.ContainerService/managedClusters/torchrec-cloud-azure-aks")
    assert setting["logs"] == [{"category": "kube-audit-admin", "enabled": True}]
    assert setting["workspaceId"].endswith(
        "/providers/Microsoft.OperationalInsights/workspaces/torchrec-cloud-azure-audit")
    assert setting["logAnalyticsDestinationType"] == "Dedicated"
    assert workspace.inputs["resourceGroupName"] == run.one(GROUP, "ckpt").inputs[
        "resourceGroupName"]
    assert workspace.inputs["retentionInDays"] == 30
    assert workspace.retain_on_delete and workspace.urn not in _destroy_deletes(run)


def test_without_retention_the_audit_workspace_goes_with_the_stack(
        no_placement_local_accounts_image: Run) -> None:
    run = no_placement_local_accounts_image
    assert run.one(WORKSPACE).urn in _destroy_deletes(run)


def test_checkpoints_kept_on_destroy_cannot_live_on_the_netapp_volume() -> None:
    """Destroy deletes the ANF volume with its snapshots: checkpoints there with
    retainOnDestroy (the default) are refused before anything exists, naming both fixes; with
    retainOnDestroy false the user has accepted it (issue 33)."""
    shared = {"checkpoints": {"location": "sharedFileSystem"}}
    refused = run_stack("azure", overrides=shared, expect_error=True)
    assert isinstance(refused.error, SettingsError) and not refused.resources
    (problem,) = [p for p in refused.error.problems if p.path == "checkpoints.location"]
    assert "pulumi config set --path checkpoints.location objectStore" in problem.allowed
    assert "pulumi config set --path checkpoints.retainOnDestroy false" in problem.allowed
    accepted = run_stack("azure", overrides={
        "checkpoints": {"location": "sharedFileSystem", "retainOnDestroy": False}})
    assert accepted.outputs["checkpoint_location"] == "sharedFileSystem"


# --- found again: destroy, then up, with the kept checkpoint store --------------------------------
def _kept_after_destroy(run: Run) -> None:
    """The fake subscription after `pulumi destroy` of `run`: what destroy cannot reach remains."""
    deleted = _destroy_deletes(run)
    group, account, container = run.one(GROUP, "ckpt"), run.one(ACCOUNT), run.one(CONTAINER)
    assert not {group.urn, account.urn, container.urn} & deleted
    fake.keep_store(group.inputs["resourceGroupName"], account.inputs["accountName"],
                    container.inputs["containerName"])
    workspace = run.one(WORKSPACE)
    assert workspace.urn not in deleted
    fake.EXISTING.add(fake.workspace_id(workspace.inputs["resourceGroupName"],
                                        workspace.inputs["workspaceName"]).lower())


def test_destroy_then_up_imports_the_kept_store_and_keeps_the_checkpoint_location(
        run: Run, cloud: SimpleNamespace) -> None:
    assert run.outputs["checkpoint_store_adopted"] is False
    assert not [r for r in run.resources if r.import_id]  # a first run creates everything
    _kept_after_destroy(run)
    with cloud.on("2026-11-26"):
        again = run_stack("azure")  # after destroy: no previous outputs
    group, account, container = again.one(GROUP, "ckpt"), again.one(ACCOUNT), again.one(CONTAINER)
    kept_group = run.one(GROUP, "ckpt").inputs["resourceGroupName"]
    name = run.outputs["storage_account"]
    # Imported (adopted), never created: no "already exists" from azure-native.
    assert group.import_id == fake.group_id(kept_group)
    assert account.import_id == fake.account_id(kept_group, name)
    assert container.import_id == fake.container_id(kept_group, name, "checkpoints")
    recovery, lifecycle = again.one(BLOB_SERVICE), again.one(LIFECYCLE)
    assert recovery.import_id == fake.account_id(kept_group, name) + "/blobServices/default"
    assert lifecycle.import_id == (fake.account_id(kept_group, name)
                                   + "/managementPolicies/default")
    workspace = again.one(WORKSPACE)
    assert workspace.import_id == fake.workspace_id(kept_group, "torchrec-cloud-azure-audit")
    assert {r.name for r in again.resources if r.import_id} == {
        group.name, account.name, container.name, recovery.name, lifecycle.name, workspace.name}
    # The same place for the job, still kept by the next destroy.
    for key in ("checkpoint_uri", "storage_account", "checkpoint_resource_group"):
        assert again.outputs[key] == run.outputs[key], key
    assert again.outputs["checkpoint_store_adopted"] is True
    assert all(r.retain_on_delete for r in (group, account, container))
    # What belongs to the stack is made again: the identity's role on the container, and the
    # account's rule for the new node subnet (Azure dropped it with the old subnet).
    role = _role(again, STORAGE_BLOB_DATA_CONTRIBUTOR)
    assert not role.import_id and role.inputs["scope"] == fake.container_id(
        kept_group, name, "checkpoints")
    (rule,) = account.inputs["networkRuleSet"]["virtualNetworkRules"]
    assert rule["virtualNetworkResourceId"] == again.outputs["node_subnet_id"]


def test_the_imported_store_is_declared_as_the_first_run_created_it(
        run: Run, cloud: SimpleNamespace) -> None:
    """Import, then update (Pulumi CLI 3.174+): the update writes back only what the stack
    owns, i.e. the rule for the node subnet (recreated under the same id; Azure dropped its
    authorization with the old subnet) and the operator's addresses. Every other property,
    the create-only ones included (kind, SKU, infrastructure encryption), is what the first
    run created, so the update changes nothing else."""
    _kept_after_destroy(run)
    with cloud.on("2026-11-26"):
        again = run_stack("azure")
    for kind in (GROUP, ACCOUNT, CONTAINER):
        first = run.one(kind, "ckpt") if kind == GROUP else run.one(kind)
        adopted = again.one(kind, "ckpt") if kind == GROUP else again.one(kind)
        assert adopted.import_id and adopted.inputs == first.inputs, kind
    rules = again.one(ACCOUNT).inputs["networkRuleSet"]
    assert rules["defaultAction"] == "Deny" and "state" not in rules["virtualNetworkRules"][0]


def test_a_kept_rule_marked_network_source_deleted_makes_the_import_renew_the_rules(
        run: Run, cloud: SimpleNamespace, monkeypatch: pytest.MonkeyPatch) -> None:
    """Azure may keep the account's rule for the destroyed subnet, marked NetworkSourceDeleted,
    under the id the new subnet gets again: the import would see no diff in the rules, send no
    update, and the pods would get 403. The run reads the rule's state and tags the account,
    so the import's update goes out with the rule set for the new subnet."""
    monkeypatch.setattr(fake, "ACCOUNT_VNET_RULES", {})
    _kept_after_destroy(run)
    group = run.one(GROUP, "ckpt").inputs["resourceGroupName"]
    name = run.outputs["storage_account"]
    fake.keep_vnet_rule(group, name, run.outputs["node_subnet_id"], "NetworkSourceDeleted")
    with cloud.on("2026-11-26"):
        again = run_stack("azure")
    account = again.one(ACCOUNT)
    assert account.import_id == fake.account_id(group, name)
    assert account.inputs["tags"]["torchrec-cloud-network-rules-renewed"].startswith(
        "2026-11-26T")  # the time of the run that renewed them
    assert "/" not in "torchrec-cloud-network-rules-renewed"  # Azure refuses '/' in tag names
    (rule,) = account.inputs["networkRuleSet"]["virtualNetworkRules"]
    assert rule["virtualNetworkResourceId"] == again.outputs["node_subnet_id"]
    # A kept rule still in force needs nothing: the import's inputs are the first run's.
    fake.keep_vnet_rule(group, name, run.outputs["node_subnet_id"], "Succeeded")
    with cloud.on("2026-11-26"):
        calm = run_stack("azure")
    assert calm.one(ACCOUNT).inputs == run.one(ACCOUNT).inputs


def test_a_partly_kept_store_imports_what_is_there_and_creates_the_rest(
        run: Run, cloud: SimpleNamespace) -> None:
    group = run.one(GROUP, "ckpt").inputs["resourceGroupName"]
    fake.EXISTING.add(fake.group_id(group).lower())  # the account was deleted by hand
    with cloud.on("2026-11-26"):
        again = run_stack("azure")
    assert again.one(GROUP, "ckpt").import_id == fake.group_id(group)
    assert not again.one(ACCOUNT).import_id and not again.one(CONTAINER).import_id


def test_a_live_stack_neither_looks_up_nor_imports_its_store(run: Run, cloud: SimpleNamespace
                                                             ) -> None:
    _kept_after_destroy(run)  # the store exists, and is in the stack's state
    previous = {**_live(run, "1.35.2"), "checkpoint_store_adopted": True}
    with cloud.on("2026-11-26"):
        later = run_stack("azure", previous_outputs=previous)
    assert not [r.name for r in later.resources if r.import_id]
    assert later.outputs["checkpoint_store_adopted"] is True  # what the earlier run did


def _trainer_env(run: Run, emulator_env: dict[str, str]) -> dict[str, str]:
    """The trainer container's environment from the stack's JobSet, plus the emulator's
    endpoint, and nothing of the developer's shell credentials."""
    from tests.trainer.helpers import env

    (trainer,) = [c for c in training_pod_template(run)["spec"]["containers"]
                  if c["name"] == "trainer"]
    pod = {e["name"]: str(e["value"]) for e in trainer.get("env") or [] if "value" in e}
    shell = {k: v for k, v in env().items()
             if not k.startswith(("AWS_", "AZURE_", "GOOGLE_", "STORAGE_EMULATOR_HOST"))}
    return {**shell, **pod, **emulator_env}


def test_the_trainer_resumes_after_destroy_and_up_from_the_kept_checkpoints(
        run: Run, cloud: SimpleNamespace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import subprocess

    from tests import emulators
    from tests.trainer.helpers import TINY, REPO, summary, trainer_cmd

    _kept_after_destroy(run)
    with cloud.on("2026-11-26"):
        again = run_stack("azure")
    assert again.outputs["checkpoint_store_adopted"] is True
    for server in emulators.running(emulators.azurite()):
        from azure.storage.blob import BlobServiceClient

        before, after = run.outputs["checkpoint_uri"], again.outputs["checkpoint_uri"]
        service = BlobServiceClient.from_connection_string(
            server.env["AZURE_STORAGE_CONNECTION_STRING"])
        service.create_container(before.split("://", 1)[1].split("/", 1)[0])  # the first up

        def train(uri: str, env: dict[str, str], *flags: str) -> None:
            # No subprocess timeout: this module's pinned clock (time-machine) makes
            # monotonic deadlines meaningless here; pytest-timeout bounds the test instead.
            proc = subprocess.run(trainer_cmd([*TINY, "--checkpoint_dir", uri, *flags]),
                                  cwd=REPO, env=env, capture_output=True, text=True)
            assert proc.returncode == 0, proc.stderr[-4000:]

        # Before the destroy: the job saves at steps 3 and 6.
        train(before, _trainer_env(run, server.env), "--max_steps", "6", "--checkpoint_every", "3")
        # After destroy + up: the new job, with the adopting run's URI and environment.
        metrics = tmp_path / "metrics.jsonl"
        train(after, _trainer_env(again, server.env), "--max_steps", "8",
              "--metrics_file", str(metrics))
        assert summary(metrics)["resumed_from"] == 6


# --- the shared volume is usable by the uid-1000 trainer -----------------------------------------
def _may(mode: int, who: str, bits: int) -> bool:
    shift = {"owner": 6, "group": 3, "other": 0}[who]
    return (mode >> shift) & bits == bits


def test_the_trainer_can_reach_and_write_its_folders_on_the_netapp_volume(run: Run) -> None:
    """ANF's default root is 0770 root:root: the trainer (uid 1000) could not pass the mount
    point. The volume sets 0755; the init container, as root (owner of the root), creates the
    job's folders and chowns them to the uid the trainer drops to."""
    mode = int(run.one(VOLUME).inputs["unixPermissions"], 8)
    assert _may(mode, "other", 0o5)  # uid 1000 is "other" on the root: read + traverse
    assert _may(mode, "owner", 0o3)  # root (no DAC_OVERRIDE in the init container) may mkdir
    pod = training_pod_template(run)["spec"]
    (init,) = [c for c in pod["initContainers"] if c["name"] == "prepare-shared-fs"]
    assert init["securityContext"]["runAsUser"] == 0
    assert init["securityContext"]["capabilities"]["add"] == ["CHOWN"]
    (trainer,) = pod["containers"]
    uid = {e["name"]: e.get("value") for e in trainer["env"]}["TORCHREC_CLOUD_DROP_TO"].split(":")[0]
    script = init["command"][-1]
    assert f"chown {uid}:{uid} " in script
    mount = "/mnt/shared"  # sharedFileSystem.mountPath
    assert all(mount in m["mountPath"] for m in init["volumeMounts"])
    for folder in (f"{mount}/runs/dlrm", f"{mount}/checkpoints/dlrm"):
        assert folder in script


# --- scale from zero: the tags describe the nodes the job's pods select --------------------------
def _template_labels_and_taints(pool: Any) -> tuple[dict[str, str], set[tuple[str, str]]]:
    tags = pool.inputs["tags"]
    labels = {k.removeprefix(TEMPLATE + "label_").replace("_", "/").replace("~2", "_"): v
              for k, v in tags.items() if k.startswith(TEMPLATE + "label_")}
    taints = {(k.removeprefix(TEMPLATE + "taint_").replace("_", "/").replace("~2", "_"), v)
              for k, v in tags.items() if k.startswith(TEMPLATE + "taint_")}
    return labels, taints


@pytest.mark.parametrize("pool_choice", ["onDemand", "spot"])
def test_an_empty_pool_is_declared_exactly_as_the_jobs_pods_need_it(pool_choice: str) -> None:
    """The autoscaler can grow a pool at zero only if its template node matches every required
    label of the pod's affinity and carries only taints the pod tolerates."""
    run = run_stack("azure", overrides={"job": {"pool": pool_choice}})
    pod = training_pod_template(run)["spec"]
    (term,) = pod["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    required = {e["key"]: e["values"][0] for e in term["matchExpressions"]}
    pool = _pools(run)["gpuspot" if pool_choice == "spot" else "gpu"]
    labels, taints = _template_labels_and_taints(pool)
    assert required.items() <= labels.items()
    tolerated = {(t["key"], f"{t.get('value')}:{t['effect']}") for t in pod["tolerations"]}
    assert taints <= tolerated
    assert pool.inputs["minCount"] == 0  # scales to zero when idle, grows back for the job


# --- network policy is enforced ---------------------------------------------------------------
def test_network_policies_are_enforced_by_cilium_on_the_overlay(run: Run) -> None:
    network = run.one(CLUSTER).inputs["networkProfile"]
    assert (network["networkPlugin"], network["networkPluginMode"]) == ("azure", "overlay")
    assert network["networkPolicy"] == "cilium" and network["networkDataplane"] == "cilium"
    (policy,) = run.of_type("kubernetes:networking.k8s.io/v1:NetworkPolicy")
    # Azure's Cilium cannot match node or pod IPs with ipBlock: the policy selects pods only.
    rules = [*policy.inputs["spec"].get("ingress", []), *policy.inputs["spec"].get("egress", [])]
    assert "ipBlock" not in json.dumps(rules)
    assert policy.inputs["spec"]["policyTypes"] == ["Ingress", "Egress"]


def test_the_job_s_pods_cannot_reach_imds_and_keep_the_rest_of_their_egress(run: Run) -> None:
    """IMDS (169.254.169.254) hands out the kubelet identity's tokens to any pod that asks;
    nothing in the job needs it (workload identity uses its projected token). A Cilium deny
    rule closes it to every pod of the job's namespace, before any of them starts; the
    Kubernetes NetworkPolicy's egress stays open (its API-server and pod traffic untouched)."""
    (deny,) = run.of_type("kubernetes:cilium.io/v2:CiliumNetworkPolicy")
    assert deny.inputs["metadata"]["namespace"] == "torchrec"
    assert deny.inputs["spec"] == {"endpointSelector": {},
                                   "egressDeny": [{"toCIDR": ["169.254.169.254/32"]}]}
    (jobset,) = run.of_type("kubernetes:jobset.x-k8s.io/v1alpha2:JobSet")
    assert run.waits_for(jobset, deny)
    (policy,) = run.of_type("kubernetes:networking.k8s.io/v1:NetworkPolicy")
    assert policy.inputs["spec"]["egress"] == [{}]


# --- upgrades that do not break training ----------------------------------------------------------
MAINTENANCE = "azure-native:containerservice:MaintenanceConfiguration"


def test_upgrades_run_in_one_weekly_window_with_security_patches_only(run: Run) -> None:
    profile = run.one(CLUSTER).inputs["autoUpgradeProfile"]
    assert profile == {"upgradeChannel": "patch", "nodeOSUpgradeChannel": "SecurityPatch"}
    configs = {c.inputs["configName"]: c.inputs for c in run.of_type(MAINTENANCE)}
    assert set(configs) == {"aksManagedAutoUpgradeSchedule", "aksManagedNodeOSUpgradeSchedule"}
    for config in configs.values():
        window = config["maintenanceWindow"]
        assert window["schedule"] == {"weekly": {"dayOfWeek": "Sunday", "intervalWeeks": 1}}
        assert window["durationHours"] == 4 and window["startTime"] == "00:00"
        assert window["utcOffset"] == "+00:00"
        assert config["resourceName"] == "torchrec-cloud-azure-aks"


def test_the_maintenance_window_follows_the_settings() -> None:
    run = run_stack("azure", overrides={"azure": {"maintenanceDay": "Wednesday",
                                                  "maintenanceStart": "22:30"}})
    for config in run.of_type(MAINTENANCE):
        window = config.inputs["maintenanceWindow"]
        assert window["schedule"]["weekly"]["dayOfWeek"] == "Wednesday"
        assert window["startTime"] == "22:30"


@pytest.mark.parametrize(("overrides", "path"), [
    ({"azure": {"maintenanceStart": "25:00"}}, "azure.maintenanceStart"),
    ({"azure": {"maintenanceDay": "Caturday"}}, "azure.maintenanceDay"),
])
def test_a_bad_maintenance_window_is_refused(overrides: dict, path: str) -> None:
    run = run_stack("azure", overrides=overrides, expect_error=True)
    assert path in {p.path for p in run.error.problems} and not run.resources


def test_gpu_pools_upgrade_in_place_without_a_surge_node(run: Run) -> None:
    """On demand: the whole pool at once (one gang restart), no surge ND96. Spot: AKS refuses
    both settings (400) and never surges a spot pool."""
    pools = _pools(run)
    assert pools["gpu"].inputs["upgradeSettings"] == {"maxSurge": "0", "maxUnavailable": "2"}
    assert "upgradeSettings" not in pools["gpuspot"].inputs


# --- network access: the cluster's subnet, storage firewall, registry ---------------------------
NETWORK_CONTRIBUTOR_ROLE = "4d97b98b-1d4f-4787-a291-c67834d212e7"


def test_the_cluster_identity_may_manage_its_subnet_before_gpu_nodes_join(run: Run) -> None:
    role = _role(run, NETWORK_CONTRIBUTOR_ROLE)
    assert role.inputs["principalId"] == fake.CLUSTER_PRINCIPAL_ID
    assert role.inputs["scope"].endswith("/subnets/nodes")
    for pool in run.of_type(POOL):
        assert run.waits_for(pool, role)


def test_checkpoint_blobs_are_reachable_from_the_nodes_and_the_operators_network_only(run: Run
                                                                                    ) -> None:
    rules = run.one(ACCOUNT).inputs["networkRuleSet"]
    assert rules["defaultAction"] == "Deny" and rules["bypass"] == "AzureServices"
    (vnet_rule,) = rules["virtualNetworkRules"]
    assert vnet_rule["virtualNetworkResourceId"].endswith("/subnets/nodes")
    nodes = run.one(SUBNET, "nodes").inputs
    assert [e["service"] for e in nodes["serviceEndpoints"]] == ["Microsoft.Storage"]
    # a /32 as its bare address: storage IP rules take no /31 or /32 ranges
    assert [r["iPAddressOrRange"] for r in rules["ipRules"]] == [
        cidr.removesuffix("/32") for cidr in USER_API_CIDRS]


def test_storage_ip_rules_take_only_what_azure_accepts() -> None:
    from infra.azure.storage import storage_ip_rules

    assert storage_ip_rules(["198.51.100.7/32", "198.51.100.8/31", "203.0.113.0/24",
                             "10.0.0.0/16", "192.168.1.0/24", "2001:db8::/48"]) == [
        "198.51.100.7", "198.51.100.8", "198.51.100.9", "203.0.113.0/24"]


def test_the_registry_stays_public_but_entra_only(run: Run) -> None:
    registry = run.one(REGISTRY).inputs
    assert registry["sku"]["name"] == "Standard"  # network rules would need Premium
    assert registry["publicNetworkAccess"] == "Enabled"
    assert registry["adminUserEnabled"] is False and registry["anonymousPullEnabled"] is False


# --- subscription features ------------------------------------------------------------------------
def test_infiniband_without_the_aks_feature_is_refused_before_any_resource() -> None:
    """Without AKSInfinibandSupport a pool's nodes may sit on different IB fabrics: `pulumi up`
    would succeed and the job fail at the fabric gate. The program stops first, naming the
    commands."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(fake.FEATURE_STATES, "AKSInfinibandSupport", "Registering")
        run = run_stack("azure", expect_error=True)
        assert not run.resources
        (problem,) = run.error.problems
        assert problem.path == "interconnect.fabric"
        assert "AKSInfinibandSupport, which is Registering" in str(run.error)
        assert "az feature register" in str(run.error)
        # Without the fabric the feature is not needed.
        assert run_stack("azure", overrides={"interconnect": {"fabric": False}}).resources


@pytest.mark.parametrize(("reason", "namespace"), [
    (fake.feature_read_refused("Microsoft.Features"), "Microsoft.Features"),
    (fake.feature_read_refused("Microsoft.ContainerService"), None),
    ("request failed: Status=404 Code=\"SubscriptionFeatureRegistrationNotFound\" "
     "Message=\"The feature registration was not found.\"", None),
])
def test_a_fresh_subscriptions_refusal_of_the_feature_read_names_the_registrations(
        reason: str, namespace: str | None) -> None:
    """The InfiniBand feature read is the program's first azure-native call: in a fresh
    subscription ARM refuses it (409 MissingSubscriptionRegistration, or 404 for a feature never
    registered). The run stops before any resource with the commands that register them, not
    with a traceback; other refusals (no rights) still stop the run as they are."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(fake.FEATURE_ERRORS, "AKSInfinibandSupport", reason)
        run = run_stack("azure", expect_error=True)
        assert isinstance(run.error, SettingsError), repr(run.error)
        assert not run.resources
        (problem,) = run.error.problems
        assert problem.path == "interconnect.fabric"
        text = problem.allowed
        assert ("az feature register --namespace Microsoft.ContainerService --name "
                "AKSInfinibandSupport") in text
        assert "az provider register --namespace Microsoft.ContainerService --wait" in text
        if namespace:
            assert f"az provider register --namespace {namespace} --wait" in text
        assert "pulumi config set --stack azure --path interconnect.fabric false" in text
        patch.setitem(fake.FEATURE_ERRORS, "AKSInfinibandSupport",
                      "request failed: Status=403 Code=\"AuthorizationFailed\"")
        denied = run_stack("azure", expect_error=True)
        assert not isinstance(denied.error, SettingsError)
        assert "AuthorizationFailed" in str(denied.error)


# --- VM sizes in their zones, for this subscription (Resource SKUs) ---------------------------
@pytest.fixture
def skus(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    rows = [dict(row) for row in fake.RESOURCE_SKUS]
    monkeypatch.setattr(fake, "RESOURCE_SKUS", rows)
    return rows


def _restrict(rows: list[dict[str, Any]], name: str, **kwargs: Any) -> None:
    index = next(i for i, r in enumerate(rows) if r["name"] == name)
    zones = rows[index]["locationInfo"][0]["zones"]
    rows[index] = fake.vm_sku(name, kwargs.pop("zones", zones), **kwargs)


def test_a_gpu_size_barred_from_the_zone_is_refused_naming_the_zones_that_work(
        skus: list[dict[str, Any]]) -> None:
    """AKS would refuse the pool even at 0 nodes (AvailabilityZoneNotSupported) after the
    cluster exists; the subscription's SKU restrictions say so before anything is created."""
    _restrict(skus, "Standard_ND96asr_v4", restricted_zones=["1"])
    run = run_stack("azure", expect_error=True)
    assert isinstance(run.error, SettingsError)
    text = str(run.error)
    assert "gpuZones" in text and "Standard_ND96asr_v4" in text and "it can in: 2, 3" in text
    assert not [r for r in run.resources if r.custom and r.type.startswith("azure-native:")]
    sku_requests = fake.SKU_REQUESTS
    assert sku_requests and "api-version=2021-07-01" in sku_requests[-1]
    assert "%24filter=location+eq+%27eastus%27" in sku_requests[-1]


def test_a_size_offered_in_fewer_zones_or_not_in_the_region_is_refused(
        skus: list[dict[str, Any]]) -> None:
    _restrict(skus, "Standard_ND96asr_v4", zones=["2"])
    assert "it can in: 2" in str(run_stack("azure", expect_error=True).error)
    _restrict(skus, "Standard_ND96asr_v4", whole_region=True)
    assert "it can in: none" in str(run_stack("azure", expect_error=True).error)
    skus[:] = [r for r in skus if r["name"] != "Standard_D4s_v5"]
    error = str(run_stack("azure", overrides={"gpuZones": ["2"], "zones": ["1", "2"]},
                          expect_error=True).error)
    assert "systemPool.machineType" in error and "lists no VM size Standard_D4s_v5" in error


def test_zones_the_subscription_may_use_pass(skus: list[dict[str, Any]]) -> None:
    _restrict(skus, "Standard_ND96asr_v4", restricted_zones=["1"])
    run = run_stack("azure", overrides={"zones": ["1", "2"], "gpuZones": ["2"]})
    assert {tuple(p.inputs["availabilityZones"]) for p in run.of_type(POOL)} == {("2",)}
    assert run.one(VOLUME).inputs["zones"] == ["2"]  # ANF follows the GPU zone


def test_a_restriction_for_another_region_or_the_pages_after_the_first_are_read() -> None:
    from infra.azure.skus import list_skus, usable_zones

    other = fake.vm_sku("Standard_ND96asr_v4", ["1", "2"], restricted_zones=["1"],
                        location="westus2")
    here = fake.vm_sku("Standard_ND96asr_v4", ["1", "2", "3"])
    here["restrictions"] = other["restrictions"]  # a westus2 restriction on the eastus row
    assert usable_zones([here], "Standard_ND96asr_v4", "eastus") == {"1", "2", "3"}
    pages = {"first": {"value": [], "nextLink": "second"}, "second": {"value": [here]}}
    rows = list_skus("s", "eastus", "t", get=lambda url, token: pages[
        "first" if "skus?" in url else url])
    assert rows == [here]


# --- ANF in the GPU zones, for this subscription (Query Region Info) --------------------------
def test_a_gpu_zone_anf_cannot_use_is_refused_before_any_resource_naming_the_zones_that_work(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The volume is pinned to gpuZones; ANF's region info for the subscription says where it
    can place one, read with the ARM token before anything exists."""
    monkeypatch.setattr(fake, "NETAPP_REGION_INFO", fake.region_info(["2", "3"], ["1"]))
    run = run_stack("azure", expect_error=True)  # gpuZones ["1"] in Pulumi.azure.yaml
    assert isinstance(run.error, SettingsError)
    (problem,) = run.error.problems
    assert problem.path == "gpuZones" and problem.value == ["1"]
    assert ("Azure NetApp Files cannot place the shared volume in zone(s) 1 of eastus for this "
            "subscription; it can in: 2, 3") in str(run.error)
    assert "az netappfiles resource query-region-info --location eastus" in str(run.error)
    assert not [r for r in run.resources if r.custom and r.type.startswith("azure-native:")]
    url = fake.NETAPP_REQUESTS[-1]
    assert url == (f"https://management.azure.com/subscriptions/{fake.SUBSCRIPTION}/providers/"
                   "Microsoft.NetApp/locations/eastus/regionInfo?api-version=2024-09-01")
    # A zone the mapping does not list at all, or a region without zones for ANF: refused too.
    monkeypatch.setattr(fake, "NETAPP_REGION_INFO", fake.region_info(["2"]))
    assert "it can in: 2" in str(run_stack("azure", expect_error=True).error)
    monkeypatch.setattr(fake, "NETAPP_REGION_INFO", {"storageToNetworkProximity": "T2"})
    assert "it can in: none" in str(run_stack("azure", expect_error=True).error)


def test_gpu_zones_anf_can_use_pass_and_the_volume_is_placed_there(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fake, "NETAPP_REGION_INFO", fake.region_info(["2", "3"], ["1"]))
    run = run_stack("azure", overrides={"zones": ["1", "2"], "gpuZones": ["2"]})
    assert run.one(VOLUME).inputs["zones"] == ["2"]


def test_the_region_info_api_version_is_the_one_azure_native_creates_the_volume_with() -> None:
    import inspect

    from pulumi_azure_native.netapp import capacity_pool_volume

    from infra.azure.netapp import API_VERSION

    used = re.findall(r"Uses Azure REST API version (\S+?)\.", inspect.getsource(
        capacity_pool_volume))
    assert used and set(used) == {API_VERSION}


def test_the_region_info_read_retries_throttling_and_stops_at_a_refusal() -> None:
    """The same policy as the program's other ARM GETs (infra/azure/https.py)."""
    import io
    import urllib.error

    from infra.azure import versions
    from infra.azure.netapp import available_zones

    answers: list[Any] = [urllib.error.HTTPError("u", 429, "Too Many Requests", {}, io.BytesIO()),
                          fake.region_info(["1"])]

    def flaky(url: str, token: str) -> dict[str, Any]:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    sleeps: list[float] = []
    with unittest.mock.patch.object(versions, "get_json", flaky):
        info = versions.get_with_retries("u", "t", sleeps.append)
    assert available_zones(info) == {"1"} and sleeps == [2.0]
    assert available_zones({"availabilityZoneMappings": [
        {"availabilityZone": "1", "isAvailable": False}, {"availabilityZone": "3"}]}) == set()


def test_an_unregistered_netapp_provider_is_named_with_the_command_that_registers_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A fresh subscription has Microsoft.NetApp unregistered: the program's first call into it
    (ANF's region info, before any resource) gets ARM's 409 MissingSubscriptionRegistration,
    said with `az provider register`, not as a bare HTTPError traceback (issue 32)."""
    from infra.azure.https import ProviderNotRegistered

    monkeypatch.setattr(fake, "UNREGISTERED", {"Microsoft.NetApp"})
    run = run_stack("azure", expect_error=True)
    assert isinstance(run.error, ProviderNotRegistered), repr(run.error)
    message = str(run.error)
    assert "az provider register --namespace Microsoft.NetApp" in message
    assert "Microsoft.NetApp" in message and "409" in message and "HTTPError" not in message
    assert "then run `pulumi up --stack azure` again" in message
    assert not [r for r in run.resources if r.custom and r.type.startswith("azure-native:")]


# --- InfiniBand only for the job's namespace -------------------------------------------------
VAP = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
VAP_BINDING = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding"


def test_only_the_jobs_namespace_may_request_the_infiniband_hcas(run: Run) -> None:
    """`rdma/ib` opens every HCA of a node, outside Cilium: an admission policy denies it to
    pods in every other namespace, valid against the official 1.34 schemas (the oldest minor
    AKS lists on the suite's day), and the job waits for it."""
    from tests.k8s_manifests import manifest_of
    import kubernetes_validate

    policy, binding = run.one(VAP, "rdma-ib"), run.one(VAP_BINDING, "rdma-ib")
    for resource in (policy, binding):
        kubernetes_validate.validate(manifest_of(resource), "1.34.0", strict=True)
        assert resource.provider_urn == run.named("torchrec-cloud-azure-k8s-addons").urn
    spec = policy.inputs["spec"]
    assert spec["failurePolicy"] == "Fail"
    (rule,) = spec["matchConstraints"]["resourceRules"]
    assert rule["resources"] == ["pods"] and rule["operations"] == ["CREATE"]
    (validation,) = spec["validations"]
    assert "'rdma/ib' in c.resources.requests" in validation["expression"]
    assert "'rdma/ib' in c.resources.limits" in validation["expression"]
    assert "initContainers" in spec["variables"][0]["expression"]
    bound = binding.inputs["spec"]
    assert bound["policyName"] == policy.inputs["metadata"]["name"]
    assert bound["validationActions"] == ["Deny"]
    (requirement,) = bound["matchResources"]["namespaceSelector"]["matchExpressions"]
    job_namespace = run.one(JOB).inputs["metadata"]["namespace"]  # its pods' namespace
    assert requirement == {"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                           "values": [job_namespace]}
    assert training_pod_template(run)["spec"]["containers"][0]["resources"]["limits"]["rdma/ib"]
    assert run.waits_for(run.one(JOB), binding)


def test_without_infiniband_no_rdma_policy() -> None:
    run = run_stack("azure", overrides={"interconnect": {"fabric": False}})
    assert not [r for r in [*run.of_type(VAP), *run.of_type(VAP_BINDING)] if "rdma-ib" in r.name]


def test_the_readme_states_what_anf_gives_the_dataset_reads() -> None:
    """docs/azure.md's ANF read figures follow from the catalog's per-TiB rates and the trainer's
    one-hot layout (trainer/prepare/write.py: float32 dense, int32 ids and label)."""
    from infra.catalog.storage import ANF_MIB_S_PER_TIB
    from trainer.config import NUM_DENSE_FEATURES, NUM_SPARSE_FEATURES

    readme = (Path(__file__).resolve().parent.parent / "docs" / "azure.md").read_text()
    sample_bytes = 4 * (NUM_DENSE_FEATURES + NUM_SPARSE_FEATURES + 1)
    premium = ANF_MIB_S_PER_TIB["Premium"] * 4
    wanted = 16 * 150_000 * sample_bytes / 2**20  # 2 ND96 nodes x 8 ranks at the target rate
    assert f"{sample_bytes} B a sample" in readme
    assert f"Premium 4 TiB gives {premium} MiB/s" in readme
    assert f"about {premium * 2**20 / sample_bytes / 1e6:.2f}M samples/s" in readme
    assert f"read about {wanted:.0f} MiB/s" in readme
    assert f"about {round((1 - premium / wanted) * 10) * 10} % of its time" in readme
    assert f"Ultra` ({ANF_MIB_S_PER_TIB['Ultra'] * 4} MiB/s at 4 TiB)" in readme
    six = ANF_MIB_S_PER_TIB["Premium"] * 6
    assert six >= wanted and f"{six} MiB/s" in readme


# --- the deployer's least privilege: a custom role and a conditioned RBAC Administrator ----------
def test_the_deployer_role_grants_every_action_a_full_run_uses_and_no_role_assignment(
        run: Run, cloud: SimpleNamespace, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every azure-native resource type and invoke of full mock runs (the shipped stack, one
    with placement, a given image and local accounts, a later run on a live cluster, an `up`
    after destroy) maps to ARM actions that infra/azure/deployer-role.json grants; role
    assignments are left to Role Based Access Control Administrator, whose condition names
    exactly the roles the program assigns (issue 33)."""
    from fnmatch import fnmatchcase

    import tests.harness as harness
    from infra.azure import deployer

    invoked: set[str] = set()
    real_call = harness.fake_call

    def recording(args: Any) -> Any:
        invoked.add(args.token)
        return real_call(args)

    monkeypatch.setattr(harness, "fake_call", recording)
    runs = [run_stack("azure"), run_stack("azure", overrides={
        "interconnect": {"placement": True}, "job": {"image": "example.azurecr.io/trainer:1"},
        "azure": {"disableLocalAccounts": False}})]
    with cloud.on("2026-11-26"):
        runs.append(run_stack("azure", previous_outputs=_live(run, "1.35.2")))
        _kept_after_destroy(run)
        runs.append(run_stack("azure"))
    shipped = deployer.shipped()
    assert shipped == deployer.role_definition()  # regenerated with the module
    granted = shipped["Actions"]

    def allowed(action: str) -> bool:
        return any(fnmatchcase(action.lower(), grant.lower()) for grant in granted)

    used = {r.type for one in runs for r in one.resources if r.type.startswith("azure-native:")}
    unmapped = used - set(deployer.RESOURCE_TYPES)
    assert not unmapped, f"add these types to infra/azure/deployer.py: {unmapped}"
    for token in used:
        arm_type = deployer.RESOURCE_TYPES[token]
        verbs = ("read",) if arm_type in deployer.DELEGATED else ("read", "write", "delete")
        for verb in verbs:
            assert allowed(f"{arm_type}/{verb}"), (token, verb)
    calls = {t for t in invoked if t.startswith("azure-native:")}
    assert {"azure-native:containerservice:getManagedCluster",
            "azure-native:storage:getStorageAccount"} <= calls  # the later runs' reads ran
    assert not calls - set(deployer.INVOKE_ACTIONS), calls - set(deployer.INVOKE_ACTIONS)
    for token in calls:
        for action in deployer.INVOKE_ACTIONS[token]:
            assert allowed(action), (token, action)
    # The program's own ARM GETs: AKS versions, Resource SKUs, ANF region info.
    for action in ("Microsoft.ContainerService/locations/kubernetesVersions/read",
                   "Microsoft.Compute/skus/read", "Microsoft.NetApp/locations/regionInfo/read",
                   "Microsoft.Network/virtualNetworks/subnets/join/action"):
        assert allowed(action), action
    # No way to grant itself anything: no Authorization writes, no wildcard over a provider.
    assert not [g for g in granted if g.startswith("Microsoft.Authorization/")
                and not g.endswith("/read")]
    assert not [g for g in granted if g == "*" or g.endswith("/*") or g.count("/") < 2]
    assigned = {r.inputs["roleDefinitionId"].rsplit("/", 1)[1]
                for one in runs for r in one.of_type(ROLE)}
    assert assigned == set(deployer.GRANTED_ROLES)
    condition = deployer.rbac_condition()
    assert all(condition.count(role) == 2 for role in assigned)  # write and delete
