"""Checkpoints: a locked-down storage account and container, and the job's workload identity."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
from pulumi_azure_native import authorization, managedidentity, storage

from infra.azure.identity import STORAGE_BLOB_DATA_CONTRIBUTOR, assign_role
from infra.contract import CheckpointStore
from infra.naming import compact
from infra.settings.model import Settings

TOKEN_EXCHANGE_AUDIENCE = "api://AzureADTokenExchange"
CHECKPOINT_CONTAINER = "checkpoints"


@dataclass
class Checkpoints:
    account: storage.StorageAccount
    container: storage.BlobContainer
    identity: managedidentity.UserAssignedIdentity
    credential: managedidentity.FederatedIdentityCredential
    role: authorization.RoleAssignment


def service_account_subject(settings: Settings) -> str:
    """The one Kubernetes service account allowed to exchange its token for the identity."""
    return f"system:serviceaccount:{settings.job.namespace}:{settings.job.service_account}"


def create_checkpoints(prefix: str, settings: Settings, resource_group_name: pulumi.Input[str],
                       oidc_issuer_url: pulumi.Input[str], subscription_id: pulumi.Input[str],
                       tags: dict[str, str], opts: pulumi.ResourceOptions) -> Checkpoints:
    """Account and container survive `pulumi destroy` unless checkpoints.retainOnDestroy is
    false; access is Entra-only (no shared keys, no public blobs) through the job's identity."""
    kept = pulumi.ResourceOptions.merge(
        opts, pulumi.ResourceOptions(retain_on_delete=settings.checkpoints.retain_on_destroy))
    account = storage.StorageAccount(
        f"{prefix}-ckpt",
        resource_group_name=resource_group_name,
        account_name=compact(prefix, "ckpt"),
        kind=storage.Kind.STORAGE_V2,
        sku=storage.SkuArgs(name=storage.SkuName.STANDARD_LRS),
        allow_blob_public_access=False,
        allow_shared_key_access=False,
        default_to_o_auth_authentication=True,
        enable_https_traffic_only=True,
        minimum_tls_version=storage.MinimumTlsVersion.TLS1_2,
        encryption=storage.EncryptionArgs(
            key_source=storage.KeySource.MICROSOFT_STORAGE,
            services=storage.EncryptionServicesArgs(
                blob=storage.EncryptionServiceArgs(enabled=True, key_type=storage.KeyType.ACCOUNT),
            ),
            require_infrastructure_encryption=True,
        ),
        tags=tags,
        opts=kept,
    )
    container = storage.BlobContainer(
        f"{prefix}-ckpt-container",
        resource_group_name=resource_group_name,
        account_name=account.name,
        container_name=CHECKPOINT_CONTAINER,
        public_access=storage.PublicAccess.NONE,
        opts=kept,
    )
    identity = managedidentity.UserAssignedIdentity(
        f"{prefix}-trainer-id", resource_group_name=resource_group_name,
        resource_name_=f"{prefix}-trainer", tags=tags, opts=opts)
    credential = managedidentity.FederatedIdentityCredential(
        f"{prefix}-trainer-federation",
        resource_group_name=resource_group_name,
        resource_name_=identity.name,
        federated_identity_credential_resource_name="trainer-service-account",
        issuer=oidc_issuer_url,
        subject=service_account_subject(settings),
        audiences=[TOKEN_EXCHANGE_AUDIENCE],
        opts=opts,
    )
    role = assign_role(
        f"{prefix}-trainer-blob-writer",
        role=STORAGE_BLOB_DATA_CONTRIBUTOR,
        principal_id=identity.principal_id,
        principal_type=authorization.PrincipalType.SERVICE_PRINCIPAL,
        scope=container.id,  # this container only, not the account
        subscription_id=subscription_id,
        opts=opts,
    )
    return Checkpoints(account=account, container=container, identity=identity,
                       credential=credential, role=role)


def checkpoint_store(ckpt: Checkpoints, settings: Settings) -> CheckpointStore:
    """What the job needs: where to write, and how its pods get the identity (the workload
    identity webhook injects AZURE_CLIENT_ID/TENANT_ID/FEDERATED_TOKEN_FILE for labelled pods;
    adlfs reads the account from AZURE_STORAGE_ACCOUNT_NAME)."""
    return CheckpointStore(
        uri=pulumi.Output.concat("az://", ckpt.container.name, "/", settings.job.name),
        bucket=ckpt.container.name,
        service_account_annotations={"azure.workload.identity/client-id": ckpt.identity.client_id},
        pod_labels={"azure.workload.identity/use": "true"},
        env={"AZURE_STORAGE_ACCOUNT_NAME": ckpt.account.name},
    )
