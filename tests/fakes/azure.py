"""Fakes for the azure stack's resources and invokes: the outputs AzureGpuCluster reads."""

from __future__ import annotations

import base64
from typing import Any

import pulumi

from tests.fakes.common import FAKE_KUBECONFIG

SUBSCRIPTION = "00000000-0000-0000-0000-00000000abcd"
TENANT = "11111111-1111-1111-1111-111111111111"
DEPLOYER_OBJECT_ID = "22222222-2222-2222-2222-222222222222"
KUBELET_OBJECT_ID = "33333333-3333-3333-3333-333333333333"
TRAINER_CLIENT_ID = "44444444-4444-4444-4444-444444444444"
TRAINER_PRINCIPAL_ID = "55555555-5555-5555-5555-555555555555"
OIDC_ISSUER = f"https://eastus.oic.prod-aks.azure.com/{TENANT}/abcdef/"
ANF_MOUNT_IP = "10.1.128.4"
CLUSTER_PRINCIPAL_ID = "88888888-8888-8888-8888-888888888888"
ENTRA_ACCESS_TOKEN = "fake-entra-access-token"
ACR_REFRESH_TOKEN = "fake-acr-refresh-token"


def _rg(args: pulumi.runtime.MockResourceArgs) -> str:
    return str(args.inputs.get("resourceGroupName") or args.name)


def _arm_id(args: pulumi.runtime.MockResourceArgs, provider_path: str) -> str:
    return f"/subscriptions/{SUBSCRIPTION}/resourceGroups/{_rg(args)}/providers/{provider_path}"


def _resource_group(args: pulumi.runtime.MockResourceArgs) -> dict[str, Any]:
    name = args.inputs.get("resourceGroupName") or args.name
    return {"id": f"/subscriptions/{SUBSCRIPTION}/resourceGroups/{name}", "name": name}


def _vnet(args: pulumi.runtime.MockResourceArgs) -> dict[str, Any]:
    name = args.inputs.get("virtualNetworkName") or args.name
    return {"id": _arm_id(args, f"Microsoft.Network/virtualNetworks/{name}"), "name": name}


def _subnet(args: pulumi.runtime.MockResourceArgs) -> dict[str, Any]:
    name = args.inputs.get("subnetName") or args.name
    vnet = args.inputs.get("virtualNetworkName")
    return {"id": _arm_id(args, f"Microsoft.Network/virtualNetworks/{vnet}/subnets/{name}"),
            "name": name}


def _cluster(args: pulumi.runtime.MockResourceArgs) -> dict[str, Any]:
    name = args.inputs.get("resourceName") or args.name
    return {
        "id": _arm_id(args, f"Microsoft.ContainerService/managedClusters/{name}"),
        "name": name,
        "oidcIssuerProfile": {"enabled": True, "issuerURL": OIDC_ISSUER},
        "identity": {"type": "SystemAssigned", "principalId": CLUSTER_PRINCIPAL_ID,
                     "tenantId": TENANT},
        "identityProfile": {"kubeletidentity": {
            "clientId": "66666666-6666-6666-6666-666666666666",
            "objectId": KUBELET_OBJECT_ID,
            "resourceId": _arm_id(args, "Microsoft.ManagedIdentity/userAssignedIdentities/kubelet"),
        }},
        "fqdn": f"{name}.hcp.eastus.azmk8s.io",
    }


def _agent_pool(args: pulumi.runtime.MockResourceArgs) -> dict[str, Any]:
    name = args.inputs.get("agentPoolName") or args.name
    return {"id": _arm_id(args, f"Microsoft.ContainerService/managedClusters/x/agentPools/{name}"),
            "name": name}


def _ppg(args: pulumi.runtime.MockResourceArgs) -> dict[str, Any]:
    name = args.inputs.get("proximityPlacementGroupName") or args.name
    return {"id": _arm_id(args, f"Microsoft.Compute/proximityPlacementGroups/{name}"), "name": name}


def _volume(args: pulumi.runtime.MockResourceArgs) -> dict[str, Any]:
    name = args.inputs.get("volumeName") or args.name
    return {
        "id": _arm_id(args, f"Microsoft.NetApp/netAppAccounts/a/capacityPools/pool/volumes/{name}"),
        "name": name,
        "mountTargets": [{"ipAddress": ANF_MOUNT_IP, "fileSystemId": "fs-1", "mountTargetId": "mt-1"}],
    }


def _storage_account(args: pulumi.runtime.MockResourceArgs) -> dict[str, Any]:
    name = args.inputs.get("accountName") or args.name
    return {"id": _arm_id(args, f"Microsoft.Storage/storageAccounts/{name}"), "name": name}


def _container(args: pulumi.runtime.MockResourceArgs) -> dict[str, Any]:
    name = args.inputs.get("containerName") or args.name
    account = args.inputs.get("accountName")
    return {
        "id": _arm_id(args, f"Microsoft.Storage/storageAccounts/{account}/blobServices/default/"
                            f"containers/{name}"),
        "name": name,
    }


def _identity(args: pulumi.runtime.MockResourceArgs) -> dict[str, Any]:
    name = args.inputs.get("resourceName") or args.name
    return {"id": _arm_id(args, f"Microsoft.ManagedIdentity/userAssignedIdentities/{name}"),
            "name": name, "clientId": TRAINER_CLIENT_ID, "principalId": TRAINER_PRINCIPAL_ID,
            "tenantId": TENANT}


def _registry(args: pulumi.runtime.MockResourceArgs) -> dict[str, Any]:
    name = args.inputs.get("registryName") or args.name
    return {"id": _arm_id(args, f"Microsoft.ContainerRegistry/registries/{name}"), "name": name,
            "loginServer": f"{name}.azurecr.io"}


def _named(type_path: str, name_key: str):  # noqa: ANN202 (small factory)
    def outputs(args: pulumi.runtime.MockResourceArgs) -> dict[str, Any]:
        name = args.inputs.get(name_key) or args.name
        return {"id": _arm_id(args, f"{type_path}/{name}"), "name": name}
    return outputs


OUTPUTS: dict[str, Any] = {
    "azure-native:resources:ResourceGroup": _resource_group,
    "azure-native:network:VirtualNetwork": _vnet,
    "azure-native:network:Subnet": _subnet,
    "azure-native:containerservice:ManagedCluster": _cluster,
    "azure-native:containerservice:AgentPool": _agent_pool,
    "azure-native:compute:ProximityPlacementGroup": _ppg,
    "azure-native:netapp:Account": _named("Microsoft.NetApp/netAppAccounts", "accountName"),
    "azure-native:netapp:CapacityPool": _named("Microsoft.NetApp/netAppAccounts/a/capacityPools",
                                               "poolName"),
    "azure-native:netapp:CapacityPoolVolume": _volume,
    "azure-native:storage:StorageAccount": _storage_account,
    "azure-native:storage:BlobContainer": _container,
    "azure-native:managedidentity:UserAssignedIdentity": _identity,
    "azure-native:managedidentity:FederatedIdentityCredential": _named(
        "Microsoft.ManagedIdentity/userAssignedIdentities/x/federatedIdentityCredentials",
        "federatedIdentityCredentialResourceName"),
    "azure-native:authorization:RoleAssignment": _named(
        "Microsoft.Authorization/roleAssignments", "roleAssignmentName"),
    "azure-native:containerregistry:Registry": _registry,
}


def _client_config(args: pulumi.runtime.MockCallArgs) -> dict[str, Any]:
    return {"clientId": "77777777-7777-7777-7777-777777777777", "objectId": DEPLOYER_OBJECT_ID,
            "subscriptionId": SUBSCRIPTION, "tenantId": TENANT}


def _user_credentials(args: pulumi.runtime.MockCallArgs) -> dict[str, Any]:
    encoded = base64.b64encode(FAKE_KUBECONFIG.encode()).decode()
    return {"kubeconfigs": [{"name": "clusterUser", "value": encoded}]}


def _client_token(args: pulumi.runtime.MockCallArgs) -> dict[str, Any]:
    return {"token": ENTRA_ACCESS_TOKEN}


EXCHANGES: list[tuple[str, dict[str, str]]] = []  # every token exchange the program made


def acr_exchange(url: str, fields: dict[str, str]) -> dict[str, Any]:
    """Stands in for ACR's POST /oauth2/exchange (infra/azure/acr_login.post_form)."""
    EXCHANGES.append((url, dict(fields)))
    if fields.get("access_token") != ENTRA_ACCESS_TOKEN or fields.get("grant_type") != "access_token":
        return {"errors": [{"code": "UNAUTHORIZED"}]}
    return {"refresh_token": ACR_REFRESH_TOKEN}


FEATURE_STATES = {"AKSInfinibandSupport": "Registered"}  # tests may change a state


def _feature(args: pulumi.runtime.MockCallArgs) -> dict[str, Any]:
    name = args.args["featureName"]
    return {"name": f"{args.args['providerNamespace']}/{name}",
            "properties": {"state": FEATURE_STATES.get(name, "NotRegistered")}}


CALLS: dict[str, Any] = {
    "azure-native:features:getSubscriptionFeatureRegistration": _feature,
    "azure-native:authorization:getClientToken": _client_token,
    "azure-native:authorization:getClientConfig": _client_config,
    "azure-native:containerservice:listManagedClusterUserCredentials": _user_credentials,
}
