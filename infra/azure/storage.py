"""Checkpoints: a locked-down storage account and container in their own kept resource group,
and the job's workload identity on it (made by infra/azure/identity.py).

Retention: `pulumi destroy` deletes the stack's resource group, and Azure deletes a group with
everything in it, whatever Pulumi's `retainOnDelete` says about one resource inside. So the
account lives in a resource group of its own that is itself retained: destroy leaves the group,
the account and the container, and drops them from the stack
(https://www.pulumi.com/docs/iac/concepts/options/retainondelete/).

Found again after destroy: the group (`<prefix>-ckpt-rg`), the account (its name a stable hash
of subscription, project and stack) and the container are the same on every run, so a run with
no previous outputs (first run, or after destroy) looks them up before anything is registered
(`find_kept_store`). What exists is imported (Pulumi's `import` option), not created: azure-native
refuses to create what exists ("already exists"). Imported, not read-only (`.get`), because the
account's network rules belong to the stack: Azure drops a virtual network rule when its subnet
is deleted, and a new subnet of the same name is not admitted until authorized again
(storage-network-security-limitations, below). Since pulumi/pulumi#19339 an import whose inputs
differ from the resource imports it and then updates it to the program's inputs
(https://www.pulumi.com/docs/iac/concepts/options/import/; Pulumi CLI 3.174 or newer), so the
new node subnet and the operator's addresses are written back in the same `pulumi up`; and an
imported resource is managed again, with the same retainOnDestroy as one created here. The
update changes nothing else: every declared property, the create-only ones (kind, SKU,
infrastructure encryption) included, is what the first run created (tests/test_azure.py), so it
re-authorizes the node subnet, whose rule Azure dropped with the old subnet (a diff), or kept
marked `NetworkSourceDeleted` under the same subnet id (no diff: the run then tags the account,
RENEWED_TAG, so that the update goes out), and rewrites IP rules and tags only where the
settings changed them. Once imported, later runs find
them in the stack's state and declare them as any other resource.

Network: the account keeps its public endpoint but denies every network except the node subnet
(a `Microsoft.Storage` service endpoint) and the operator's `kubernetes.apiAccessCidrs`, so the
pods and the people allowed to reach the API server, and no one else, reach the blobs. Firewall
rules apply to the data plane only; creating the account and container is ARM and unaffected
(https://learn.microsoft.com/azure/storage/common/storage-network-security-limitations).
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from datetime import datetime, timezone

import pulumi
from pulumi_azure_native import authorization, managedidentity, resources, storage

from infra.azure.identity import (STORAGE_BLOB_DATA_CONTRIBUTOR, STORAGE_BLOB_DATA_READER,
                                  assign_role, federated_identity, preparation_identity,
                                  service_account_subject)
from infra.contract import CheckpointStore, PreparationIdentity
from infra.settings.model.stack_file import Settings
from infra.store_owner import OWNER_KEY, check_owner, owner_tags, owner_value

CHECKPOINT_CONTAINER = "checkpoints"
STORAGE_ACCOUNT_MAX_LENGTH = 24  # 3-24 lowercase letters and digits, globally unique
# Storage IP rules take public IPv4 only ("Only IPV4 address is allowed", the ARM IPRule schema):
# no IPv6, no RFC 1918 ranges, and no /31 or /32 ranges (single addresses are written without a
# prefix) (storage-network-security-limitations, above).
# Deleted or overwritten checkpoints stay recoverable this long (issue 33): blob versioning (an
# overwrite or delete keeps the previous version), blob soft delete (a deleted version or blob
# is kept) and container soft delete, the data protection Azure recommends together
# (https://learn.microsoft.com/azure/storage/blobs/data-protection-overview). The job's Storage
# Blob Data Contributor cannot shorten it: deleting a version needs `deleteBlobVersion/action`
# (Storage Blob Data Owner only), and soft-deleted data is purged before its retention ends only
# with the account's allowPermanentDelete, left off (https://learn.microsoft.com/azure/storage/
# blobs/soft-delete-blob-overview, versioning-overview; built-in roles, Storage).
RECOVERY_DAYS = 7
# Older versions then go: the lifecycle rule deletes previous versions 7 days after they became
# previous, so keeping `checkpoints.keep` checkpoints does not pay for every one ever written.
LIFECYCLE_POLICY = "default"  # the only name ARM takes for an account's management policy
BLOB_SERVICE = "default"  # likewise for its blob service
# A virtual network rule's state when it admits its subnet (ARM VirtualNetworkRule.state:
# Provisioning, Deprovisioning, Succeeded, Failed, NetworkSourceDeleted).
RULE_IN_FORCE = "Succeeded"
# Set on a kept account whose subnet rule is not in force. The import compares the account's
# declared inputs with what ARM reports, and a rule kept as NetworkSourceDeleted has the same
# subnet id as the new subnet: no diff, no update, the new subnet never admitted and the pods
# answered 403. A tag ARM does not have makes the diff, and azure-native's update carries every
# declared input, the network rule set included, which re-authorizes the subnet. Its value is
# the time of that run, so it differs from any earlier renewal's; the next run on the live
# stack drops the tag again (a tags-only update). Azure tag names may not contain '/'.
RENEWED_TAG = "torchrec-cloud-network-rules-renewed"
RFC1918 = tuple(ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"))


NOT_FOUND = re.compile(r"NotFound|\b404\b|could not be found|was not found|does not exist",
                       re.IGNORECASE)


def checkpoint_group_name(prefix: str) -> str:
    return f"{prefix}-ckpt-rg"


@dataclass(frozen=True)
class KeptStore:
    """The ARM ids of the checkpoint group, account and container a destroy left (None: not
    there, so this run creates it)."""

    group_id: str | None = None
    account_id: str | None = None
    container_id: str | None = None
    audit_workspace_id: str | None = None  # the kube-audit workspace (infra/azure/audit.py)
    group_name: str | None = None  # the group's name; None: checkpoint_group_name(prefix)
    # States of the kept account's virtual network rules other than Succeeded (e.g.
    # NetworkSourceDeleted: the subnet went with the destroyed stack); see RENEWED_TAG.
    stale_rules: tuple[str, ...] = ()

    @property
    def adopted(self) -> bool:
        return self.group_id is not None


def _found(lookup):  # noqa: ANN001, ANN202 (a no-argument invoke and its result)
    """What a get_* invoke returns, or None when Azure answers that it does not exist; any
    other failure (no rights, throttling) stops the run rather than guessing."""
    try:
        return lookup()
    except Exception as error:  # noqa: BLE001 (invoke errors carry ARM's code in the text)
        if NOT_FOUND.search(str(error)):
            return None
        raise


def _exists(lookup) -> str | None:  # noqa: ANN001 (a no-argument invoke)
    """The id a get_* invoke returns, or None (see _found)."""
    found = _found(lookup)
    return found.id if found is not None else None


def stale_rules(account) -> tuple[str, ...]:  # noqa: ANN001 (GetStorageAccountResult)
    """The states of a kept account's virtual network rules that are not in force: Azure keeps
    a rule whose subnet was deleted, marked NetworkSourceDeleted (MicrosoftDocs/azure-docs#71743,
    "Note on NetworkSourceDeleted"), and a subnet made again under the same id is not admitted
    by it."""
    rule_set = account.network_rule_set
    rules = (rule_set.virtual_network_rules if rule_set else None) or []
    return tuple(sorted({rule.state for rule in rules
                         if rule.state and rule.state != RULE_IN_FORCE}))


def _group(name: str) -> tuple[str | None, dict[str, str]]:
    """A resource group's id (None: not there) and tags."""
    try:
        found = resources.get_resource_group(resource_group_name=name)
    except Exception as error:  # noqa: BLE001 (invoke errors carry ARM's code in the text)
        if NOT_FOUND.search(str(error)):
            return None, {}
        raise
    return found.id, dict(found.tags or {})


def find_kept_store(prefix: str, account_name: str, audit_workspace: str | None = None,
                    former_prefix: str | None = None) -> KeptStore:
    """What of this stack's checkpoint store exists in the subscription now (synchronous
    invokes with the deployer's credentials, before any resource is registered). A group tagged
    for another stack is refused (infra/store_owner.py); `former_prefix`: the cut prefix the
    group was named with before names carried the stack's hash, adopted when tagged for us."""
    group_name = checkpoint_group_name(prefix)
    group_id, tags = _group(group_name)
    if group_id is not None:
        check_owner(group_name, tags)
    elif former_prefix:
        former = checkpoint_group_name(former_prefix)
        group_id, tags = _group(former)
        if group_id is not None and tags.get(OWNER_KEY) == owner_value():
            group_name = former
        elif group_id is not None:
            pulumi.log.warn(f"resource group {former} has this stack's former name but is not "
                            f"tagged {OWNER_KEY}={owner_value()}: not adopted; {group_name} is "
                            "created (docs/checkpoints.md, \"Whose store is it\")")
            group_id = None
    if group_id is None:
        return KeptStore(group_name=group_name)
    workspace_id = None
    if audit_workspace:
        from pulumi_azure_native import operationalinsights

        workspace_id = _exists(lambda: operationalinsights.get_workspace(
            resource_group_name=group_name, workspace_name=audit_workspace))
    account = _found(lambda: storage.get_storage_account(
        account_name=account_name, resource_group_name=group_name))
    if account is None:
        return KeptStore(group_id=group_id, group_name=group_name,
                         audit_workspace_id=workspace_id)
    container_id = _exists(lambda: storage.get_blob_container(
        account_name=account_name, container_name=CHECKPOINT_CONTAINER,
        resource_group_name=group_name))
    return KeptStore(group_id=group_id, account_id=account.id, container_id=container_id,
                     audit_workspace_id=workspace_id, group_name=group_name,
                     stale_rules=stale_rules(account))


def renewal_tags(found: KeptStore) -> dict[str, str]:
    """RENEWED_TAG when the kept account has a rule not in force, so the import's update goes
    out (and sends the declared network rule set); nothing otherwise."""
    if not found.stale_rules:
        return {}
    return {RENEWED_TAG: datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%MZ")}


def _importing(opts: pulumi.ResourceOptions, resource_id: str | None) -> pulumi.ResourceOptions:
    if resource_id is None:
        return opts
    return pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(import_=resource_id))


@dataclass
class Checkpoints:
    resource_group: resources.ResourceGroup
    account: storage.StorageAccount
    container: storage.BlobContainer
    identity: managedidentity.UserAssignedIdentity
    credential: managedidentity.FederatedIdentityCredential
    role: authorization.RoleAssignment
    # The preparation's own identity, federation and read of its az:// source (none: the
    # source is on the shared file system, and the preparation has no identity at all).
    preparation: PreparationIdentity
    deployer_read: authorization.RoleAssignment  # the user's laptop reads the telemetry mirror
    recovery: storage.BlobServiceProperties  # versioning and soft delete (RECOVERY_DAYS)
    lifecycle: storage.ManagementPolicy  # previous versions expire after RECOVERY_DAYS


def storage_ip_rules(cidrs: list[str]) -> list[str]:
    """The operator's CIDRs as storage firewall rules: /31 and /32 as single addresses; IPv6 and
    private (RFC 1918) ranges left out because Azure refuses them (a private network reaches the
    account only through a VNet rule)."""
    rules: list[str] = []
    for cidr in cidrs:
        network = ipaddress.ip_network(cidr, strict=True)
        if not isinstance(network, ipaddress.IPv4Network) or any(
                network.subnet_of(private) for private in RFC1918):
            continue
        if network.prefixlen >= 31:
            rules += [str(address) for address in network]  # its one or two addresses
        else:
            rules.append(str(network))
    return rules


def network_rules(settings: Settings, nodes_subnet_id: pulumi.Input[str]
                  ) -> storage.NetworkRuleSetArgs:
    return storage.NetworkRuleSetArgs(
        default_action=storage.DefaultAction.DENY,
        bypass=storage.Bypass.AZURE_SERVICES,
        virtual_network_rules=[storage.VirtualNetworkRuleArgs(
            virtual_network_resource_id=nodes_subnet_id, action=storage.Action.ALLOW)],
        ip_rules=[storage.IPRuleArgs(i_p_address_or_range=rule, action=storage.Action.ALLOW)
                  for rule in storage_ip_rules(list(settings.kubernetes.api_access_cidrs))],
    )


def create_checkpoints(prefix: str, settings: Settings, account_name: pulumi.Input[str],
                       resource_group_name: pulumi.Input[str],
                       nodes_subnet_id: pulumi.Input[str], oidc_issuer_url: pulumi.Input[str],
                       subscription_id: pulumi.Input[str], tags: dict[str, str],
                       opts: pulumi.ResourceOptions, found: KeptStore = KeptStore(), *,
                       deployer_object_id: pulumi.Input[str],
                       deployer_type: authorization.PrincipalType) -> Checkpoints:
    """Group, account and container survive `pulumi destroy` unless checkpoints.retainOnDestroy
    is false; access is Entra-only (no shared keys, no public blobs): the job's identity writes,
    the deployer (`deployer_object_id`, whoever runs `pulumi up`) reads, so that
    `python -m torchrec_cloud status|tensorboard` can read the trainer's telemetry mirror
    (<checkpoint_uri>/telemetry/) with the user's own `az login`: with shared keys off, a blob
    read needs a data-plane role, which no control-plane role (Owner, Contributor) includes
    (https://learn.microsoft.com/azure/storage/blobs/authorize-access-azure-active-directory).
    The identity, its federation and the roles go with the stack (`resource_group_name`).
    `found`: what a destroy left, imported instead of created."""
    kept = pulumi.ResourceOptions.merge(
        opts, pulumi.ResourceOptions(retain_on_delete=settings.checkpoints.retain_on_destroy))
    group = resources.ResourceGroup(
        f"{prefix}-ckpt-rg", resource_group_name=found.group_name or checkpoint_group_name(prefix),
        tags={**tags, **owner_tags()},
        opts=_importing(kept, found.group_id))
    account = storage.StorageAccount(
        f"{prefix}-ckpt",
        resource_group_name=group.name,
        account_name=account_name,
        kind=storage.Kind.STORAGE_V2,
        sku=storage.SkuArgs(name=storage.SkuName.STANDARD_LRS),
        allow_blob_public_access=False,
        allow_shared_key_access=False,
        default_to_o_auth_authentication=True,
        enable_https_traffic_only=True,
        minimum_tls_version=storage.MinimumTlsVersion.TLS1_2,
        network_rule_set=network_rules(settings, nodes_subnet_id),
        encryption=storage.EncryptionArgs(
            key_source=storage.KeySource.MICROSOFT_STORAGE,
            services=storage.EncryptionServicesArgs(
                blob=storage.EncryptionServiceArgs(enabled=True, key_type=storage.KeyType.ACCOUNT),
            ),
            require_infrastructure_encryption=True,
        ),
        tags={**tags, **renewal_tags(found)},
        opts=_importing(kept, found.account_id),
    )
    container = storage.BlobContainer(
        f"{prefix}-ckpt-container",
        resource_group_name=group.name,
        account_name=account.name,
        container_name=CHECKPOINT_CONTAINER,
        public_access=storage.PublicAccess.NONE,
        opts=_importing(kept, found.container_id),
    )
    recovery, lifecycle = protect_blobs(prefix, group.name, account, kept, found)
    identity, credential = federated_identity(
        prefix, "trainer", service_account_subject(settings), resource_group_name,
        oidc_issuer_url, tags, opts)
    role = assign_role(
        f"{prefix}-trainer-blob-writer",
        role=STORAGE_BLOB_DATA_CONTRIBUTOR,
        principal_id=identity.principal_id,
        principal_type=authorization.PrincipalType.SERVICE_PRINCIPAL,
        scope=container.id,  # this container only, not the account
        subscription_id=subscription_id,
        opts=opts,
    )
    preparation = preparation_identity(prefix, settings, account, resource_group_name,
                                       oidc_issuer_url, subscription_id, tags, opts)
    # Reader, not Contributor: the laptop only reads. The container, like the job's role. The
    # principal type as for the deployer's other grants (AKS admin, registry push): User or
    # ServicePrincipal, read off the deployer's token (deployer.deployer_principal_type).
    deployer_read = assign_role(
        f"{prefix}-deployer-blob-reader",
        role=STORAGE_BLOB_DATA_READER,
        principal_id=deployer_object_id,
        principal_type=deployer_type,
        scope=container.id,
        subscription_id=subscription_id,
        opts=opts,
    )
    return Checkpoints(resource_group=group, account=account, container=container,
                       identity=identity, credential=credential, role=role,
                       preparation=preparation, deployer_read=deployer_read,
                       recovery=recovery, lifecycle=lifecycle)


def protect_blobs(prefix: str, resource_group_name: pulumi.Input[str],
                  account: storage.StorageAccount, kept: pulumi.ResourceOptions,
                  found: KeptStore) -> tuple[storage.BlobServiceProperties,
                                             storage.ManagementPolicy]:
    """Versioning, blob and container soft delete for RECOVERY_DAYS, and the lifecycle rule
    that deletes previous versions after as long. Kept with the account on destroy (so a kept
    store stays protected), and imported with it after a destroy (both are the account's
    singletons, `default`)."""
    retention = storage.DeleteRetentionPolicyArgs(enabled=True, days=RECOVERY_DAYS)
    recovery = storage.BlobServiceProperties(
        f"{prefix}-ckpt-recovery",
        resource_group_name=resource_group_name,
        account_name=account.name,
        blob_services_name=BLOB_SERVICE,
        is_versioning_enabled=True,
        delete_retention_policy=retention,
        container_delete_retention_policy=retention,
        opts=_importing(kept, found.account_id and f"{found.account_id}/blobServices/default"),
    )
    lifecycle = storage.ManagementPolicy(
        f"{prefix}-ckpt-lifecycle",
        resource_group_name=resource_group_name,
        account_name=account.name,
        management_policy_name=LIFECYCLE_POLICY,
        policy=storage.ManagementPolicySchemaArgs(rules=[storage.ManagementPolicyRuleArgs(
            name="expire-previous-versions",
            type=storage.RuleType.LIFECYCLE,
            enabled=True,
            definition=storage.ManagementPolicyDefinitionArgs(
                filters=storage.ManagementPolicyFilterArgs(blob_types=["blockBlob"]),
                actions=storage.ManagementPolicyActionArgs(
                    version=storage.ManagementPolicyVersionArgs(
                        delete=storage.DateAfterCreationArgs(
                            days_after_creation_greater_than=float(RECOVERY_DAYS))))),
        )]),
        opts=pulumi.ResourceOptions.merge(
            _importing(kept, found.account_id
                       and f"{found.account_id}/managementPolicies/default"),
            pulumi.ResourceOptions(depends_on=[recovery])),  # versions exist to expire
    )
    return recovery, lifecycle


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
