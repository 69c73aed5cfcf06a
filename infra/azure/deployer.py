"""The least the deployer needs: a custom role for what the program creates and reads, and
Role Based Access Control Administrator limited by a condition to the roles it grants.

Owner, or Contributor + User Access Administrator, let the deployer grant any role to anyone.
Instead (issue 33):
- `deployer-role.json` (next to this file): a custom role with exactly the ARM actions of the
  resources the program declares (read, write, delete of each type in RESOURCE_TYPES) and of
  the reads it makes itself (INVOKE_ACTIONS, PROGRAM_READS), and nothing of
  Microsoft.Authorization but reads;
- the built-in Role Based Access Control Administrator, assigned with the condition
  `rbac_condition()`: it may create and delete role assignments of the roles in GRANTED_ROLES
  only (the "Constrain roles" condition, https://learn.microsoft.com/azure/role-based-access-
  control/delegate-role-assignments-examples), which is every role the program assigns
  (infra/azure/identity.py).
tests/test_azure.py runs the program under mocks and checks every azure-native resource type
and invoke it used against this file, so a new resource cannot ship without its actions.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from infra.azure.identity import (ACR_PULL, ACR_PUSH, AKS_RBAC_CLUSTER_ADMIN, NETWORK_CONTRIBUTOR,
                                  STORAGE_BLOB_DATA_CONTRIBUTOR, STORAGE_BLOB_DATA_READER)

ROLE_FILE = Path(__file__).with_name("deployer-role.json")
GRANTED_ROLES = (STORAGE_BLOB_DATA_CONTRIBUTOR, STORAGE_BLOB_DATA_READER, ACR_PULL, ACR_PUSH,
                 AKS_RBAC_CLUSTER_ADMIN, NETWORK_CONTRIBUTOR)

# Each azure-native resource type the program declares -> its ARM resource type.
RESOURCE_TYPES: dict[str, str] = {
    "azure-native:resources:ResourceGroup": "Microsoft.Resources/subscriptions/resourceGroups",
    "azure-native:network:VirtualNetwork": "Microsoft.Network/virtualNetworks",
    "azure-native:network:Subnet": "Microsoft.Network/virtualNetworks/subnets",
    "azure-native:containerservice:ManagedCluster": "Microsoft.ContainerService/managedClusters",
    "azure-native:containerservice:AgentPool": "Microsoft.ContainerService/managedClusters/agentPools",
    "azure-native:containerservice:MaintenanceConfiguration":
        "Microsoft.ContainerService/managedClusters/maintenanceConfigurations",
    "azure-native:compute:ProximityPlacementGroup": "Microsoft.Compute/proximityPlacementGroups",
    "azure-native:netapp:Account": "Microsoft.NetApp/netAppAccounts",
    "azure-native:netapp:CapacityPool": "Microsoft.NetApp/netAppAccounts/capacityPools",
    "azure-native:netapp:CapacityPoolVolume": "Microsoft.NetApp/netAppAccounts/capacityPools/volumes",
    "azure-native:storage:StorageAccount": "Microsoft.Storage/storageAccounts",
    "azure-native:storage:BlobServiceProperties": "Microsoft.Storage/storageAccounts/blobServices",
    "azure-native:storage:BlobContainer": "Microsoft.Storage/storageAccounts/blobServices/containers",
    "azure-native:storage:ManagementPolicy": "Microsoft.Storage/storageAccounts/managementPolicies",
    "azure-native:managedidentity:UserAssignedIdentity":
        "Microsoft.ManagedIdentity/userAssignedIdentities",
    "azure-native:managedidentity:FederatedIdentityCredential":
        "Microsoft.ManagedIdentity/userAssignedIdentities/federatedIdentityCredentials",
    "azure-native:containerregistry:Registry": "Microsoft.ContainerRegistry/registries",
    "azure-native:operationalinsights:Workspace": "Microsoft.OperationalInsights/workspaces",
    "azure-native:monitor:DiagnosticSetting": "Microsoft.Insights/diagnosticSettings",
    # Writes and deletes through the conditioned RBAC Administrator, reads in the custom role.
    "azure-native:authorization:RoleAssignment": "Microsoft.Authorization/roleAssignments",
}
# Types whose write and delete come from the conditioned RBAC Administrator, not the custom role.
DELEGATED = {"Microsoft.Authorization/roleAssignments"}

# Each invoke the program calls -> the ARM actions it needs (none: no ARM call, a token).
INVOKE_ACTIONS: dict[str, tuple[str, ...]] = {
    "azure-native:authorization:getClientConfig": (),
    "azure-native:authorization:getClientToken": (),
    "azure-native:resources:getResourceGroup": ("Microsoft.Resources/subscriptions/resourceGroups/read",),
    "azure-native:storage:getStorageAccount": ("Microsoft.Storage/storageAccounts/read",),
    "azure-native:storage:getBlobContainer": (
        "Microsoft.Storage/storageAccounts/blobServices/containers/read",),
    "azure-native:operationalinsights:getWorkspace": ("Microsoft.OperationalInsights/workspaces/read",),
    "azure-native:containerservice:getManagedCluster": ("Microsoft.ContainerService/managedClusters/read",),
    "azure-native:containerservice:listManagedClusterUserCredentials": (
        "Microsoft.ContainerService/managedClusters/listClusterUserCredential/action",),
    "azure-native:features:getSubscriptionFeatureRegistration": (
        "Microsoft.Features/featureProviders/subscriptionFeatureRegistrations/read",),
}
# The program's own ARM GETs (infra/azure/versions.py, skus.py, quotas.py, netapp.py) and what a create
# needs beyond the type's own write: joining the subnet (AKS pools, ANF's delegated subnet) and
# naming it in the storage account's service-endpoint rule; the audit setting's destination.
PROGRAM_READS: tuple[str, ...] = (
    # ARM lists versions under locations (kubernetesVersions; orchestrators before it): every
    # read there, and nothing else.
    "Microsoft.ContainerService/locations/*/read",
    "Microsoft.Compute/skus/read",
    "Microsoft.Compute/locations/usages/read",  # the quota check (infra/azure/quotas.py)
    "Microsoft.NetApp/locations/*/read",
    # Polling a long-running create or delete reads its operation under the location
    # (Azure-AsyncOperation / Location headers, e.g. Microsoft.Network/locations/operations/read:
    # AuthorizationFailed without it, Azure/azure-xplat-cli#2051).
    "Microsoft.Network/locations/*/read",
    "Microsoft.Storage/locations/*/read",
    "Microsoft.Compute/locations/*/read",
)
JOINS: tuple[str, ...] = (
    "Microsoft.Network/virtualNetworks/subnets/join/action",
    "Microsoft.Network/virtualNetworks/subnets/joinViaServiceEndpoint/action",
    "Microsoft.OperationalInsights/workspaces/sharedKeys/action",
    "Microsoft.Authorization/roleDefinitions/read",
)


def actions_for(arm_type: str) -> tuple[str, ...]:
    verbs = ("read",) if arm_type in DELEGATED else ("read", "write", "delete")
    return tuple(f"{arm_type}/{verb}" for verb in verbs)


def role_definition(assignable_scope: str = "/subscriptions/<subscription-id>") -> dict[str, Any]:
    """The custom role, as `az role definition create --role-definition` takes it."""
    actions: list[str] = []
    for arm_type in RESOURCE_TYPES.values():
        actions += actions_for(arm_type)
    for needed in INVOKE_ACTIONS.values():
        actions += needed
    actions += [*PROGRAM_READS, *JOINS]
    return {
        "Name": "torchrec-cloud deployer",
        "IsCustom": True,
        "Description": "Creates, reads and deletes what `pulumi up --stack azure` of torchrec-cloud "
                       "declares; role assignments come from a conditioned Role Based Access "
                       "Control Administrator (docs/azure.md).",
        "Actions": sorted(set(actions)),
        "NotActions": [],
        "DataActions": [],
        "NotDataActions": [],
        "AssignableScopes": [assignable_scope],
    }


def rbac_condition() -> str:
    """Role Based Access Control Administrator may assign and remove GRANTED_ROLES only."""
    ids = ", ".join(GRANTED_ROLES)
    return ("((!(ActionMatches{'Microsoft.Authorization/roleAssignments/write'})) OR "
            "(@Request[Microsoft.Authorization/roleAssignments:RoleDefinitionId] "
            f"ForAnyOfAnyValues:GuidEquals {{{ids}}})) AND "
            "((!(ActionMatches{'Microsoft.Authorization/roleAssignments/delete'})) OR "
            "(@Resource[Microsoft.Authorization/roleAssignments:RoleDefinitionId] "
            f"ForAnyOfAnyValues:GuidEquals {{{ids}}}))")


def shipped() -> dict[str, Any]:
    return json.loads(ROLE_FILE.read_text())


if __name__ == "__main__":  # `python -m infra.azure.deployer > infra/azure/deployer-role.json`
    print(json.dumps(role_definition(), indent=2))
