"""Azure RBAC role assignments: built-in role ids and one helper that scopes them."""

from __future__ import annotations

import pulumi
from pulumi_azure_native import authorization

# Built-in role definition ids (the same in every subscription and tenant).
STORAGE_BLOB_DATA_CONTRIBUTOR = "ba92f5b4-2d11-453d-a403-e96b0029c9fe"
STORAGE_BLOB_DATA_READER = "2a2b9908-6ea1-4ae2-8e65-a410df84e7d1"  # learn.microsoft.com azure/role-based-access-control/built-in-roles/storage
ACR_PULL = "7f951dce-4414-4c5e-8dfe-0f3d1ab6b0b5"
ACR_PUSH = "8311e382-0749-4cb8-b61a-304f252e45ec"
AKS_RBAC_CLUSTER_ADMIN = "b1ff04bb-8a4e-4dc4-8eb5-8693973ce19b"
NETWORK_CONTRIBUTOR = "4d97b98b-1d4f-4787-a291-c67834d212e7"


def role_definition_id(subscription_id: pulumi.Input[str], role: str) -> pulumi.Output[str]:
    return pulumi.Output.concat(
        "/subscriptions/", subscription_id, "/providers/Microsoft.Authorization/roleDefinitions/",
        role)


def assign_role(name: str, *, role: str, principal_id: pulumi.Input[str],
                principal_type: authorization.PrincipalType, scope: pulumi.Input[str],
                subscription_id: pulumi.Input[str], opts: pulumi.ResourceOptions
                ) -> authorization.RoleAssignment:
    """A built-in role for one principal on one scope (the provider names it with a GUID).
    principal_type is always given: for identities created here, so Azure does not wait for
    Entra replication; for the deployer, deployer.deployer_principal_type(), because ARM
    refuses a type that differs from the principal's and the SDK turns None into "User"."""
    return authorization.RoleAssignment(
        name,
        role_definition_id=role_definition_id(subscription_id, role),
        principal_id=principal_id,
        principal_type=principal_type,
        scope=scope,
        opts=opts,
    )
