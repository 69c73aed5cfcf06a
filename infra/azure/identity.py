"""Azure identities: built-in role ids and one helper that scopes them, and the workload
identities the job's and the preparation's service accounts act as (user-assigned identities
federated with one Kubernetes service account each)."""

from __future__ import annotations

from collections.abc import Mapping

import pulumi
from pulumi_azure_native import authorization, managedidentity, storage

from infra.contract import PreparationIdentity
from infra.settings.model.stack_file import Settings
from infra.settings.prepare_rules import AZURE_SOURCE_URI

TOKEN_EXCHANGE_AUDIENCE = "api://AzureADTokenExchange"

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


def service_account_subject(settings: Settings) -> str:
    """The one Kubernetes service account allowed to exchange its token for the identity."""
    return f"system:serviceaccount:{settings.job.namespace}:{settings.job.service_account}"


def federated_identity(prefix: str, role: str, subject: str,
                       resource_group_name: pulumi.Input[str], oidc_issuer_url: pulumi.Input[str],
                       tags: Mapping[str, str], opts: pulumi.ResourceOptions,
                       ) -> tuple[managedidentity.UserAssignedIdentity,
                                  managedidentity.FederatedIdentityCredential]:
    """A user-assigned identity `<prefix>-<role>` that only the Kubernetes service account
    `subject` can act as (workload identity: its token exchanged at Entra ID)."""
    identity = managedidentity.UserAssignedIdentity(
        f"{prefix}-{role}-id", resource_group_name=resource_group_name,
        resource_name_=f"{prefix}-{role}", tags=tags, opts=opts)
    credential = managedidentity.FederatedIdentityCredential(
        f"{prefix}-{role}-federation",
        resource_group_name=resource_group_name,
        resource_name_=identity.name,
        federated_identity_credential_resource_name=f"{role}-service-account",
        issuer=oidc_issuer_url,
        subject=subject,
        audiences=[TOKEN_EXCHANGE_AUDIENCE],
        opts=opts,
    )
    return identity, credential


def preparation_identity(prefix: str, settings: Settings, account: storage.StorageAccount,
                         resource_group_name: pulumi.Input[str],
                         oidc_issuer_url: pulumi.Input[str], subscription_id: pulumi.Input[str],
                         tags: dict[str, str],
                         opts: pulumi.ResourceOptions) -> PreparationIdentity:
    """The preparation's own user-assigned identity, federated with its service account only
    (Job.prepare_service_account), with Storage Blob Data Reader on its az:// source and no
    role on the checkpoint container; nothing when the source is on the shared file system."""
    scopes = dataset_read_scopes(settings, account.id, subscription_id)
    if not scopes:
        return PreparationIdentity()
    identity, credential = federated_identity(
        prefix, "prepare",
        f"system:serviceaccount:{settings.job.namespace}:{settings.job.prepare_service_account}",
        resource_group_name, oidc_issuer_url, tags, opts)
    reads = [assign_role(
        f"{prefix}-prepare-dataset-reader",
        role=STORAGE_BLOB_DATA_READER,
        principal_id=identity.principal_id,
        principal_type=authorization.PrincipalType.SERVICE_PRINCIPAL,
        scope=scope,
        subscription_id=subscription_id,
        opts=opts,
    ) for scope in scopes]
    return PreparationIdentity(
        service_account_annotations={"azure.workload.identity/client-id": identity.client_id},
        pod_labels={"azure.workload.identity/use": "true"},
        env={"AZURE_STORAGE_ACCOUNT_NAME": account.name},
        ready=[credential, *reads])


def dataset_read_scopes(settings: Settings, stack_account_id: pulumi.Input[str],
                        subscription_id: pulumi.Input[str]) -> list[pulumi.Input[str]]:
    """Where the job's identity reads the preparation's az:// source (at most one scope).

    az://<container>@<account>.blob.core.windows.net/...: that existing container, by its ARM
    id (a role assignment's scope must exist; the user's data is already there). The account's
    firewall must admit the cluster's nodes, whose subnet reaches storage through a
    Microsoft.Storage service endpoint (infra/azure/network.py).
    az://<container>/...: the stack's own account, which the pods' AZURE_STORAGE_ACCOUNT_NAME
    names and whose network rules admit the nodes. The account, not the container: the user
    creates that container after the account exists."""
    scopes: list[pulumi.Input[str]] = []
    for uri in settings.dataset.prepare_source_uris("az"):
        match = AZURE_SOURCE_URI.match(uri)
        if match is None:  # the settings rules refuse it before any resource exists
            raise ValueError(f"dataset.prepare.source={uri!r} is no az:// source URI")
        if match.group("account"):
            scopes.append(pulumi.Output.concat(
                "/subscriptions/", subscription_id, "/resourceGroups/",
                settings.dataset.prepare.source_resource_group,
                "/providers/Microsoft.Storage/storageAccounts/", match.group("account"),
                "/blobServices/default/containers/", match.group("container")))
        else:
            scopes.append(stack_account_id)
    return scopes
