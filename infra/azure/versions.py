"""Which Kubernetes versions AKS creates today, and which one the stack's cluster runs.

AKS's own list, asked when the program runs: ARM `GET /subscriptions/{id}/providers/
Microsoft.ContainerService/locations/{region}/kubernetesVersions` (operation
ManagedClusters_ListKubernetesVersions, the call behind `az aks get-versions`; azure-rest-api-specs
specification/containerservice/resource-manager/Microsoft.ContainerService/aks/stable/2025-09-01/
examples/KubernetesVersions_List.json). Each entry of `values` is a minor with `isDefault`,
`isPreview`, `capabilities.supportPlan` (KubernetesOfficial: community support, created on any
tier; AKSLongTermSupport: created only with the Premium tier and that plan) and its
`patchVersions`. pulumi-azure-native has no invoke for it, so the program calls ARM itself with
the deployer's own token (`authorization.get_client_token`), as acr_login.py does for ACR.

A live cluster's version is read from the cluster (`currentKubernetesVersion`), never from this
list, so a minor that has left it never blocks an update (infra/kubernetes_release.py). The dated
calendar (infra/kubernetes_versions.py) only gives advice.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import pulumi
from pulumi_azure_native import authorization, containerservice

from infra.azure.subscription import check_one_login
from infra.azure.https import not_registered, with_retries
from infra.kubernetes_release import Offered, minor_key, minor_of
from infra.kubernetes_versions import aks_advice
from infra.previous_run import PreviousRun
from infra.settings.errors import Problem, SettingsError
from infra.settings.model.stack_file import Settings

# Public Azure, as the program's azure-native provider (infra/azure/subscription.py: a sovereign
# cloud is refused before this is called; getClientConfig does not say which cloud it reached).
ARM_ENDPOINT = "https://management.azure.com"
API_VERSION = "2025-09-01"  # the api-version azure-native 3.x uses for containerservice
OFFICIAL = "KubernetesOfficial"
LONG_TERM_SUPPORT = "AKSLongTermSupport"
REQUEST_TIMEOUT_SECONDS = 60
# Stack outputs a later run reads to find the cluster (AzureGpuCluster exports them).
CLUSTER_NAME_OUTPUT = "cluster_name"
CLUSTER_GROUP_OUTPUT = "cluster_resource_group"
NOT_FOUND = re.compile(r"NotFound|\b404\b|could not be found|was not found|does not exist",
                       re.IGNORECASE)


def get_json(url: str, token: str) -> dict[str, Any]:
    """One HTTPS GET with a bearer token, returning JSON (tests/fakes/azure.py stands in for it)."""
    request = urllib.request.Request(
        url, method="GET", headers={"Authorization": f"Bearer {token}",
                                    "Accept": "application/json"})
    with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_SECONDS) as response:
        return json.loads(response.read())


def get_with_retries(url: str, token: str,
                     sleep: Callable[[float], None] | None = None) -> dict[str, Any]:
    """get_json under the shared retry policy (infra/azure/https.py): every ARM read the
    program makes itself (this listing, Resource SKUs, NetApp region info) goes through it. A
    provider the subscription has not registered is said with `az provider register`."""
    try:
        return with_retries(lambda: get_json(url, token), sleep)
    except urllib.error.HTTPError as error:
        unregistered = not_registered(error, url)
        if unregistered is None:
            raise
        raise unregistered from None


def every_row(first_url: str, token: str,
              get: Callable[[str, str], dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Every `value` row of an ARM listing, following `nextLink` page by page (get_with_retries
    unless a test gives `get`)."""
    fetch = get or get_with_retries
    rows: list[dict[str, Any]] = []
    url: str | None = first_url
    while url:
        page = fetch(url, token)
        rows.extend(page.get("value") or [])
        url = page.get("nextLink")
    return rows


def deployer_subscription_and_token() -> tuple[str, str]:
    """The subscription and ARM token of the identity running `pulumi up`: what the
    program's own ARM reads are asked with (the azure-native default provider's login)."""
    client = authorization.get_client_config()
    return client.subscription_id, authorization.get_client_token().token


@dataclass(frozen=True)
class AksMinor:
    """One entry of the ARM listing."""

    minor: str
    default: bool
    preview: bool
    plans: tuple[str, ...]

    @property
    def lts_only(self) -> bool:
        return OFFICIAL not in self.plans and LONG_TERM_SUPPORT in self.plans


def parse_listing(body: Mapping[str, Any]) -> list[AksMinor]:
    """The ARM answer's `values` as AksMinor rows (unknown fields ignored)."""
    rows = []
    for value in body.get("values") or []:
        plans = tuple((value.get("capabilities") or {}).get("supportPlan") or ())
        rows.append(AksMinor(minor=minor_of(str(value["version"])),
                             default=bool(value.get("isDefault")),
                             preview=bool(value.get("isPreview")), plans=plans))
    return rows


def listing_url(subscription_id: str, location: str) -> str:
    return (f"{ARM_ENDPOINT}/subscriptions/{subscription_id}/providers/"
            f"Microsoft.ContainerService/locations/{location}/kubernetesVersions"
            f"?api-version={API_VERSION}")


def list_minors(location: str) -> list[AksMinor]:
    """What AKS in `location` lists today, asked with the identity running `pulumi up`."""
    subscription, token = deployer_subscription_and_token()
    return parse_listing(get_with_retries(listing_url(subscription, location), token))


def _today() -> Any:
    return datetime.now(timezone.utc).date()


def offered_versions(settings: Settings) -> Offered:
    """Non-preview minors AKS creates in the stack's region with the KubernetesOfficial plan,
    plus the LTS-only ones when azure.longTermSupport is on; the default is AKS's own. A pinned
    minor AKS offers only with LTS is refused here, naming azure.longTermSupport."""
    assert settings.azure is not None  # the azure defaults always add this section
    check_one_login()
    lts = settings.azure.long_term_support
    rows = [row for row in list_minors(settings.region) if not row.preview]
    official = [row.minor for row in rows if OFFICIAL in row.plans]
    lts_only = [row.minor for row in rows if row.lts_only]
    minors = tuple(official + (lts_only if lts else []))
    if not minors:
        raise RuntimeError(f"AKS in {settings.region} lists no Kubernetes version a cluster can "
                           f"be created at (`az aks get-versions --location {settings.region}`)")
    defaults = [row.minor for row in rows if row.default and row.minor in minors]
    # AKS marks one default; should it ever mark none, its newest community minor.
    default = defaults[0] if defaults else max(official or minors, key=minor_key)
    pinned = settings.kubernetes.version
    if pinned is not None and not lts and pinned in lts_only:
        raise SettingsError([Problem(
            "kubernetes.version", pinned,
            f"AKS in {settings.region} creates {pinned} only with Long-Term Support: set "
            "azure.longTermSupport: true (Premium tier, billed per cluster hour), or use one of "
            f"{', '.join(sorted(official, key=minor_key))} (default {default}). Nothing was "
            "created")])
    for line in aks_advice(pinned or default, _today(), lts):
        pulumi.log.warn(line)
    return Offered(
        minors=minors, default=default, where=f"AKS in {settings.region}",
        how_to_list=f"az aks get-versions --location {settings.region} --output table")


@dataclass(frozen=True)
class LiveCluster:
    """What the stack's AKS cluster runs: its control plane and each agent pool."""

    version: str  # currentKubernetesVersion, e.g. "1.35.4"
    pools: Mapping[str, str]  # agent pool name -> the minor its nodes run
    name: str = ""  # the cluster's name and resource group, for the commands in messages
    resource_group: str = ""
    nodes: Mapping[str, int] = field(default_factory=dict)  # agent pool name -> its node count
    vm_sizes: Mapping[str, str] = field(default_factory=dict)  # agent pool name -> its VM size


def live_cluster(previous: PreviousRun) -> LiveCluster | None:
    """The cluster the last run made, read from AKS (None when it is gone or was never
    named). A missing cluster is no error: the run then creates one."""
    name, group = previous.text(CLUSTER_NAME_OUTPUT), previous.text(CLUSTER_GROUP_OUTPUT)
    if not name or not group:
        return None
    try:
        cluster = containerservice.get_managed_cluster(resource_group_name=group,
                                                       resource_name=name)
    except Exception as error:  # noqa: BLE001 (invoke errors carry ARM's code in the text)
        if NOT_FOUND.search(str(error)):
            return None
        raise
    pools, nodes, sizes = {}, {}, {}
    for profile in cluster.agent_pool_profiles or []:
        running = profile.current_orchestrator_version or profile.orchestrator_version
        if running:
            pools[profile.name] = minor_of(running)
        nodes[profile.name] = int(profile.count or 0)
        if profile.vm_size:
            sizes[profile.name] = profile.vm_size
    version = cluster.current_kubernetes_version or cluster.kubernetes_version
    if not version:
        return None
    return LiveCluster(version=version, pools=pools, name=name, resource_group=group,
                       nodes=nodes, vm_sizes=sizes)


def live_version(settings: Settings, previous: PreviousRun) -> str | None:
    """The version the stack's cluster runs now, read from AKS; None when AKS has no such
    cluster (deleted outside Pulumi: the run then creates one at a minor AKS offers today, not
    at a minor that may have left the list). The last run's own record only for stacks whose
    outputs predate the cluster's name and group, which cannot be looked up."""
    check_one_login()
    if previous.text(CLUSTER_NAME_OUTPUT) and previous.text(CLUSTER_GROUP_OUTPUT):
        live = live_cluster(previous)
        version = live.version if live else None
    else:
        version = previous.text("kubernetes_version")
    if version and settings.azure is not None:
        for line in aks_advice(minor_of(version), _today(), settings.azure.long_term_support):
            pulumi.log.warn(f"the cluster runs {version}: {line}")
    return version
