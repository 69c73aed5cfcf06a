"""Fakes for the azure stack's resources and invokes: the outputs AzureGpuCluster reads."""

from __future__ import annotations

import base64
import json
from typing import Any

import pulumi
import yaml

from infra.catalog.cloud import Cloud
from infra.catalog.machines import MACHINES

SUBSCRIPTION = "00000000-0000-0000-0000-00000000abcd"
TENANT = "11111111-1111-1111-1111-111111111111"
DEPLOYER_OBJECT_ID = "22222222-2222-2222-2222-222222222222"
KUBELET_OBJECT_ID = "33333333-3333-3333-3333-333333333333"
TRAINER_CLIENT_ID = "44444444-4444-4444-4444-444444444444"
TRAINER_PRINCIPAL_ID = "55555555-5555-5555-5555-555555555555"
PREPARE_PRINCIPAL_ID = "56565656-5656-5656-5656-565656565656"  # the preparation's own identity
OIDC_ISSUER = f"https://eastus.oic.prod-aks.azure.com/{TENANT}/abcdef/"
ANF_MOUNT_IP = "10.1.128.4"
CLUSTER_PRINCIPAL_ID = "88888888-8888-8888-8888-888888888888"
ACR_AUDIENCE_TOKEN = "fake-entra-acr-audience-token"  # audience: https://containerregistry.azure.net
AKS_AUDIENCE_TOKEN = "fake-entra-aks-server-token"  # audience: the AKS server application
ACR_REFRESH_TOKEN = "fake-acr-refresh-token"
AKS_SERVER_APP_ID = "6dae42f8-4368-4678-94ff-3960e28e3630"
AZURE_CLI_CLIENT_ID = "80faf920-1908-4b52-b5ef-a8e7bedfc67a"  # what AKS writes for devicecode
API_SERVER = "https://torchrec-cloud-azure-aks.hcp.eastus.azmk8s.io:443"


def entra_jwt(claims: dict[str, Any]) -> str:
    """A token shaped as Entra ID issues them: base64url header.payload.signature, unpadded
    (RFC 7515); the signature is never checked by the program, only the claims are read."""
    def part(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).decode().rstrip("=")
    header = {"typ": "JWT", "alg": "RS256", "x5t": "fake-kid", "kid": "fake-kid"}
    payload = json.dumps(claims, ensure_ascii=False).encode()  # UTF-8, as Entra writes it
    return ".".join([part(json.dumps(header).encode()), part(payload), part(b"fake-signature")])


# An ARM-audience v1.0 access token's claims, as Entra issues them to each kind of deployer
# (learn.microsoft.com/entra/identity-platform/access-token-claims-reference).
_ARM_TOKEN = {"aud": "https://management.core.windows.net/",
              "iss": f"https://sts.windows.net/{TENANT}/", "iat": 1795000000,
              "nbf": 1795000000, "exp": 1795004000, "oid": DEPLOYER_OBJECT_ID, "tid": TENANT,
              "sub": DEPLOYER_OBJECT_ID, "ver": "1.0"}
USER_CLAIMS = {**_ARM_TOKEN, "idtyp": "user", "scp": "user_impersonation",
               "appid": AZURE_CLI_CLIENT_ID, "appidacr": "0", "amr": ["pwd", "mfa"],
               "name": "Ada Deployer", "upn": "ada@example.com", "unique_name": "ada@example.com"}
SERVICE_PRINCIPAL_CLAIMS = {**_ARM_TOKEN, "idtyp": "app", "appid": "sp-app-id",
                            "appidacr": "1"}  # client secret; no scp: app-only
MANAGED_IDENTITY_CLAIMS = {
    **_ARM_TOKEN, "idtyp": "app", "appid": "uami-client-id", "appidacr": "2",
    "xms_mirid": (f"/subscriptions/{SUBSCRIPTION}/resourcegroups/ci/providers/"
                  "Microsoft.ManagedIdentity/userAssignedIdentities/deployer")}
# By default the deployer is a user signed in with `az login`.
ENTRA_ACCESS_TOKEN = entra_jwt(USER_CLAIMS)  # audience: Azure Resource Manager


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
            "name": name, "clientId": TRAINER_CLIENT_ID,
            "principalId": PREPARE_PRINCIPAL_ID if name.endswith("-prepare") else TRAINER_PRINCIPAL_ID,
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
    "azure-native:operationalinsights:Workspace": _named(
        "Microsoft.OperationalInsights/workspaces", "workspaceName"),
}


def _client_config(args: pulumi.runtime.MockCallArgs) -> dict[str, Any]:
    return {"clientId": "77777777-7777-7777-7777-777777777777", "objectId": DEPLOYER_OBJECT_ID,
            "subscriptionId": SUBSCRIPTION, "tenantId": TENANT}


def aks_exec_kubeconfig() -> str:
    """What listClusterUserCredential(format=exec) returns for an Entra-only cluster: a
    kubelogin exec user with AKS's server application, the Azure CLI's client id, devicecode."""
    return yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "fake",
        "clusters": [{"name": "fake", "cluster": {
            "server": API_SERVER,
            "certificate-authority-data": base64.b64encode(b"fake-cluster-ca").decode()}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "clusterUser"}}],
        "users": [{"name": "clusterUser", "user": {"exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1", "command": "kubelogin",
            "args": ["get-token", "--environment", "AzurePublicCloud", "--server-id",
                     AKS_SERVER_APP_ID, "--client-id", AZURE_CLI_CLIENT_ID, "--tenant-id", TENANT,
                     "--login", "devicecode"],
            "env": None, "interactiveMode": "IfAvailable", "provideClusterInfo": False}}}],
    }, sort_keys=False)


def _user_credentials(args: pulumi.runtime.MockCallArgs) -> dict[str, Any]:
    encoded = base64.b64encode(aks_exec_kubeconfig().encode()).decode()
    return {"kubeconfigs": [{"name": "clusterUser", "value": encoded}]}


TOKENS_BY_AUDIENCE = {"https://containerregistry.azure.net": ACR_AUDIENCE_TOKEN,
                      AKS_SERVER_APP_ID: AKS_AUDIENCE_TOKEN}


def _client_token(args: pulumi.runtime.MockCallArgs) -> dict[str, Any]:
    """getClientToken asks Entra for `<endpoint>/.default`; each audience its own token. No
    endpoint: ARM's, read at call time so a test can sign in as another kind of deployer
    (monkeypatch ENTRA_ACCESS_TOKEN)."""
    endpoint = args.args.get("endpoint")
    if endpoint in (None, ""):
        return {"token": ENTRA_ACCESS_TOKEN}
    if endpoint not in TOKENS_BY_AUDIENCE:
        return {}, [("endpoint", f"no fake token for audience {endpoint!r}")]
    return {"token": TOKENS_BY_AUDIENCE[endpoint]}


EXCHANGES: list[tuple[str, dict[str, str]]] = []  # every token exchange the program made


def acr_exchange(url: str, fields: dict[str, str]) -> dict[str, Any]:
    """Stands in for ACR's POST /oauth2/exchange (infra/azure/acr_login.post_form)."""
    EXCHANGES.append((url, dict(fields)))
    # A registry under the built-in "ARM audience token authentication disabled" policy: only
    # an ACR-audience token is exchanged.
    if fields.get("access_token") != ACR_AUDIENCE_TOKEN or fields.get("grant_type") != "access_token":
        return {"errors": [{"code": "UNAUTHORIZED"}]}
    return {"refresh_token": ACR_REFRESH_TOKEN}


FEATURE_STATES = {"AKSInfinibandSupport": "Registered"}  # tests may change a state


# Feature name -> the provider's error for the read (a fresh subscription's refusal).
FEATURE_ERRORS: dict[str, str] = {}


def feature_read_refused(namespace: str) -> str:
    """azure-native's error text for ARM's 409 to the feature registration read in a subscription
    that has not registered `namespace` (learn.microsoft.com/azure/azure-resource-manager/
    troubleshooting/error-register-resource-provider)."""
    return (f"request failed /subscriptions/{SUBSCRIPTION}/providers/Microsoft.Features/"
            "featureProviders/Microsoft.ContainerService/subscriptionFeatureRegistrations/"
            "AKSInfinibandSupport: Status=409 Code=\"MissingSubscriptionRegistration\" "
            f"Message=\"The subscription is not registered to use namespace '{namespace}'. See "
            "https://aka.ms/rps-not-found for how to register subscriptions.\"")


def _feature(args: pulumi.runtime.MockCallArgs) -> Any:
    name = args.args["featureName"]
    if name in FEATURE_ERRORS:
        return {}, [("", FEATURE_ERRORS[name])]
    return {"name": f"{args.args['providerNamespace']}/{name}",
            "properties": {"state": FEATURE_STATES.get(name, "NotRegistered")}}


# --- AKS's version listing (infra/azure/versions.get_json) ------------------------------------
def aks_listing(official: list[str], default: str, lts_only: list[str] = (),  # type: ignore[assignment]
                preview: list[str] = ()) -> dict[str, Any]:  # type: ignore[assignment]
    """An ARM kubernetesVersions answer (api-version 2025-09-01, the shape of
    KubernetesVersions_List.json): community minors carry both plans, LTS-only ones only
    AKSLongTermSupport, previews isPreview."""
    def entry(minor: str, plans: list[str], is_preview: bool = False) -> dict[str, Any]:
        row: dict[str, Any] = {"version": minor, "capabilities": {"supportPlan": plans},
                               "patchVersions": {f"{minor}.3": {"upgrades": []}}}
        if minor == default:
            row["isDefault"] = True
        if is_preview:
            row["isPreview"] = True
        return row
    values = [entry(m, ["AKSLongTermSupport"]) for m in lts_only]
    values += [entry(m, ["KubernetesOfficial", "AKSLongTermSupport"]) for m in official]
    values += [entry(m, ["KubernetesOfficial"], True) for m in preview]
    return {"values": values}


# What AKS in the stack's region lists on the suite's pinned day (2026-11-26, tests/conftest.py),
# from the calendar in infra/kubernetes_versions.py; a test for another day sets its own.
AKS_LISTING: dict[str, Any] = aks_listing(
    official=["1.34", "1.35", "1.36", "1.37"], default="1.35",
    lts_only=["1.31", "1.32", "1.33"], preview=["1.38"])
AKS_REQUESTS: list[tuple[str, str]] = []  # (url, token) of every listing request


# Each catalog size's quota family, as Resource SKUs' `family` names it (`az vm list-skus`).
VM_FAMILIES = {"Standard_ND96asr_v4": "standardNDASv4_A100Family",
               "Standard_ND96amsr_A100_v4": "standardNDAMSv4_A100Family",
               "Standard_ND96isr_H100_v5": "standardNDSH100v5Family",
               "Standard_ND96isr_H200_v5": "standardNDSH200v5Family",
               "Standard_NC24ads_A100_v4": "StandardNCADSA100v4Family",
               "Standard_D4s_v5": "standardDSv5Family", "Standard_D8s_v5": "standardDSv5Family"}


def vm_sku(name: str, zones: list[str], restricted_zones: list[str] = (),  # type: ignore[assignment]
           location: str = "eastus", whole_region: bool = False) -> dict[str, Any]:
    """One Resource SKUs row (api-version 2021-07-01, the shape `az vm list-skus` prints): the
    zones the size is offered in, and this subscription's restrictions."""
    restrictions = []
    if restricted_zones:
        restrictions.append({"type": "Zone", "values": [location],
                             "restrictionInfo": {"locations": [location],
                                                 "zones": list(restricted_zones)},
                             "reasonCode": "NotAvailableForSubscription"})
    if whole_region:
        restrictions.append({"type": "Location", "values": [location],
                             "restrictionInfo": {"locations": [location]},
                             "reasonCode": "NotAvailableForSubscription"})
    return {"resourceType": "virtualMachines", "name": name, "tier": "Standard",
            "size": name.removeprefix("Standard_"), "family": VM_FAMILIES.get(name, "standardFamily"),
            "locations": [location],
            "locationInfo": [{"location": location, "zones": list(zones), "zoneDetails": []}],
            "capabilities": [], "restrictions": restrictions}


# The subscription's Resource SKUs in the stack's region (tests change rows).
RESOURCE_SKUS: list[dict[str, Any]] = [
    {"resourceType": "disks", "name": "Premium_LRS", "locations": ["eastus"],
     "locationInfo": [{"location": "eastus", "zones": ["1", "2", "3"]}], "restrictions": []},
    # Every Azure size in the catalog, offered in all three zones, unrestricted.
    *(vm_sku(m.name, ["1", "2", "3"]) for m in MACHINES if m.cloud == Cloud.AZURE),
]


SKU_REQUESTS: list[str] = []  # every Resource SKUs request


def usage(name: str, limit: float, current: float = 0) -> dict[str, Any]:
    """One Compute usages row (Usage_List, api-version 2024-07-01; `az vm list-usage` prints it)."""
    return {"unit": "Count", "currentValue": current, "limit": limit,
            "name": {"value": name, "localizedValue": name}}


# The subscription's Compute quotas in the stack's region (tests set one to 0): room for every
# catalog family, the regional total and Spot.
COMPUTE_USAGES: dict[str, dict[str, Any]] = {
    **{family: usage(family, 1000) for family in set(VM_FAMILIES.values())},
    "cores": usage("cores", 2000), "lowPriorityCores": usage("lowPriorityCores", 1000)}
USAGE_REQUESTS: list[str] = []  # every Compute usages request


def region_info(available: list[str], unavailable: list[str] = ()  # type: ignore[assignment]
                ) -> dict[str, Any]:
    """ANF's Query Region Info answer (Microsoft.NetApp 2024-09-01, RegionInfo): the logical
    zones and whether ANF can place a volume in each for this subscription."""
    return {"storageToNetworkProximity": "T2",
            "availabilityZoneMappings": [
                *({"availabilityZone": z, "isAvailable": True} for z in available),
                *({"availabilityZone": z, "isAvailable": False} for z in unavailable)]}


# ANF in the stack's region (tests replace it): every zone available.
NETAPP_REGION_INFO: dict[str, Any] = region_info(["1", "2", "3"])
NETAPP_REQUESTS: list[str] = []  # every Query Region Info request


# Resource providers this subscription has not registered (a fresh one: Microsoft.NetApp).
UNREGISTERED: set[str] = set()


def missing_registration(url: str, namespace: str) -> Exception:
    """ARM's answer to a call into an unregistered provider, as urllib raises it: HTTP 409 with
    MissingSubscriptionRegistration (learn.microsoft.com/azure/azure-resource-manager/
    troubleshooting/error-register-resource-provider)."""
    import io
    import urllib.error

    body = json.dumps({"error": {
        "code": "MissingSubscriptionRegistration",
        "message": f"The subscription is not registered to use namespace '{namespace}'. See "
                   "https://aka.ms/rps-not-found for how to register subscriptions.",
        "details": [{"code": "MissingSubscriptionRegistration", "target": namespace,
                     "message": f"The subscription is not registered to use namespace "
                                f"'{namespace}'."}]}}).encode()
    return urllib.error.HTTPError(url, 409, "Conflict", {}, io.BytesIO(body))  # type: ignore[arg-type]


def arm_get(url: str, token: str) -> dict[str, Any]:
    """Stands in for the program's ARM GETs (infra/azure/versions.get_json): AKS's version
    listing, the Resource SKUs list and ANF's region info, all with the ARM-audience token."""
    if token != ENTRA_ACCESS_TOKEN:
        raise AssertionError(f"ARM request {url} without the ARM-audience token")
    for namespace in UNREGISTERED:
        if f"/providers/{namespace}/" in url:
            raise missing_registration(url, namespace)
    if "/kubernetesVersions?api-version=" in url:
        AKS_REQUESTS.append((url, token))
        return AKS_LISTING
    if "/providers/Microsoft.Compute/skus?" in url and "api-version=2021-07-01" in url:
        SKU_REQUESTS.append(url)
        return {"value": RESOURCE_SKUS}
    if "/providers/Microsoft.Compute/locations/" in url and "/usages?api-version=2024-07-01" in url:
        USAGE_REQUESTS.append(url)
        return {"value": list(COMPUTE_USAGES.values())}
    if "/providers/Microsoft.NetApp/locations/" in url and "/regionInfo?api-version=" in url:
        NETAPP_REQUESTS.append(url)
        return NETAPP_REGION_INFO
    raise AssertionError(f"unexpected ARM request {url}")


aks_versions_get = arm_get  # the name tests use for the version listing


# --- the API server's SelfSubjectAccessReview (infra/azure/kube_access.post_json) ----------
REVIEWS: list[tuple[str, dict[str, Any], str, str]] = []
GRANT = {"denied_reviews": 0}  # reviews answered "not allowed" before the grant is in force


def access_review(url: str, body: dict[str, Any], token: str, ca_pem: str) -> dict[str, Any]:
    """The API server's answer to a SelfSubjectAccessReview from the AKS-audience token."""
    import urllib.error

    REVIEWS.append((url, body, token, ca_pem))
    if token != AKS_AUDIENCE_TOKEN:
        raise urllib.error.HTTPError(url, 401, "Unauthorized", {}, None)  # type: ignore[arg-type]
    if GRANT["denied_reviews"] > 0:
        GRANT["denied_reviews"] -= 1
        return {**body, "status": {"allowed": False}}
    return {**body, "status": {"allowed": True}}


# --- the subscription as it is: clusters and a destroy's kept checkpoint store --------------
# Cluster name -> what AKS answers for it (currentKubernetesVersion, agentPoolProfiles).
LIVE_CLUSTERS: dict[str, dict[str, Any]] = {}
# Lower-case ARM ids of resources that exist outside any stack state (a destroy kept them).
EXISTING: set[str] = set()


def group_id(group: str) -> str:
    return f"/subscriptions/{SUBSCRIPTION}/resourceGroups/{group}"


def account_id(group: str, account: str) -> str:
    return f"{group_id(group)}/providers/Microsoft.Storage/storageAccounts/{account}"


def container_id(group: str, account: str, container: str) -> str:
    return f"{account_id(group, account)}/blobServices/default/containers/{container}"


def keep_store(group: str, account: str, container: str = "checkpoints") -> None:
    """What `pulumi destroy` leaves with checkpoints.retainOnDestroy: group, account, container."""
    EXISTING.update(i.lower() for i in (group_id(group), account_id(group, account),
                                        container_id(group, account, container)))


def not_found(code: str, name: str) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """An invoke failure, as the engine reports the provider's answer to ARM's 404 (the
    program sees `Exception("invoke of <token> failed: <reason>")`)."""
    return {}, [("", f"{code}: The Resource '{name}' was not found. (status 404)")]


def _lookup(resource_id: str, code: str, name: str) -> Any:
    if resource_id.lower() not in EXISTING:
        return not_found(code, name)
    return {"id": resource_id, "name": name}


# Tags of the groups in EXISTING, by group name (a kept store's owner tag).
GROUP_TAGS: dict[str, dict[str, str]] = {}


def _get_group(args: pulumi.runtime.MockCallArgs) -> Any:
    name = args.args["resourceGroupName"]
    found = _lookup(group_id(name), "ResourceGroupNotFound", name)
    return {**found, "tags": GROUP_TAGS.get(name, {})} if "id" in found else found


# Lower-case account id -> the virtualNetworkRules ARM reports for a kept account (default:
# none, the rule Azure dropped with its subnet).
ACCOUNT_VNET_RULES: dict[str, list[dict[str, Any]]] = {}


def keep_vnet_rule(group: str, account: str, subnet_id: str, state: str) -> None:
    """The kept account still lists its rule for the destroyed subnet, in `state` (Azure marks
    it NetworkSourceDeleted: MicrosoftDocs/azure-docs#71743)."""
    ACCOUNT_VNET_RULES[account_id(group, account).lower()] = [
        {"id": subnet_id, "action": "Allow", "state": state}]


def _get_account(args: pulumi.runtime.MockCallArgs) -> Any:
    group, name = args.args["resourceGroupName"], args.args["accountName"]
    found = _lookup(account_id(group, name), "ResourceNotFound", name)
    if "id" not in found:
        return found
    rules = ACCOUNT_VNET_RULES.get(account_id(group, name).lower(), [])
    return {**found, "networkRuleSet": {"defaultAction": "Deny", "bypass": "AzureServices",
                                        "virtualNetworkRules": rules, "ipRules": []}}


def _get_container(args: pulumi.runtime.MockCallArgs) -> Any:
    group, account = args.args["resourceGroupName"], args.args["accountName"]
    name = args.args["containerName"]
    return _lookup(container_id(group, account, name), "ContainerNotFound", name)


def workspace_id(group: str, workspace: str) -> str:
    return f"{group_id(group)}/providers/Microsoft.OperationalInsights/workspaces/{workspace}"


def _get_workspace(args: pulumi.runtime.MockCallArgs) -> Any:
    group, name = args.args["resourceGroupName"], args.args["workspaceName"]
    return _lookup(workspace_id(group, name), "ResourceNotFound", name)


def _get_cluster(args: pulumi.runtime.MockCallArgs) -> Any:
    name = args.args["resourceName"]
    if name not in LIVE_CLUSTERS:
        return not_found("ResourceNotFound", f"Microsoft.ContainerService/managedClusters/{name}")
    return {"name": name, "location": "eastus", **LIVE_CLUSTERS[name]}


def live_cluster(name: str, version: str, pools: dict[str, str],
                 nodes: dict[str, int] | None = None,
                 vm_sizes: dict[str, str] | None = None) -> None:
    """A cluster AKS reports as running `version`, its agent pools at `pools` (name -> version),
    with `nodes` nodes each (default 0) and VM sizes `vm_sizes` (default: not reported)."""
    LIVE_CLUSTERS[name] = {
        "currentKubernetesVersion": version, "kubernetesVersion": version.rsplit(".", 1)[0],
        "agentPoolProfiles": [{"name": pool, "currentOrchestratorVersion": running,
                               "orchestratorVersion": running.rsplit(".", 1)[0],
                               "count": (nodes or {}).get(pool, 0),
                               **({"vmSize": vm_sizes[pool]} if pool in (vm_sizes or {}) else {})}
                              for pool, running in pools.items()],
    }


CALLS: dict[str, Any] = {
    "azure-native:resources:getResourceGroup": _get_group,
    "azure-native:storage:getStorageAccount": _get_account,
    "azure-native:storage:getBlobContainer": _get_container,
    "azure-native:containerservice:getManagedCluster": _get_cluster,
    "azure-native:operationalinsights:getWorkspace": _get_workspace,
    "azure-native:features:getSubscriptionFeatureRegistration": _feature,
    "azure-native:authorization:getClientToken": _client_token,
    "azure-native:authorization:getClientConfig": _client_config,
    "azure-native:containerservice:listManagedClusterUserCredentials": _user_credentials,
}
