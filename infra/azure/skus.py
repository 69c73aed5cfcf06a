"""Which zones of the region each pool's VM size may use in this subscription, asked first.

AKS refuses an agent pool whose VM size the subscription cannot deploy in one of its zones, even
at zero nodes (AvailabilityZoneNotSupported), after the cluster and the rest are made. ND sizes
are zonal and often offered in one or two zones of a region, and a subscription can be barred
from a zone the region has. So the program reads the subscription's view first: ARM's Resource
SKUs list (`GET /subscriptions/{id}/providers/Microsoft.Compute/skus?api-version=2021-07-01&
$filter=location eq '{region}'`, the call behind `az vm list-skus`;
https://learn.microsoft.com/rest/api/compute/resource-skus/list). For a VM size,
`locationInfo[].zones` are the zones it is offered in, and `restrictions[]` remove some for this
subscription: type `Location` (none in the region) or type `Zone` with
`restrictionInfo.zones`, reason `NotAvailableForSubscription` or `QuotaId`
(https://learn.microsoft.com/azure/azure-resource-manager/troubleshooting/error-sku-not-available;
AKS's own troubleshooting for this error reads the same list: https://learn.microsoft.com/
troubleshoot/azure/azure-kubernetes/error-codes/availabilityzonenotsupported-error).
A size or zone that does not work is refused here, naming the zones that do.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from infra.azure import versions
from infra.azure.versions import ARM_ENDPOINT
from infra.settings.errors import Problem, SettingsError
from infra.settings.model.stack_file import Settings

API_VERSION = "2021-07-01"  # the Resource SKUs API's current stable version
VIRTUAL_MACHINES = "virtualMachines"


def skus_url(subscription_id: str, location: str) -> str:
    query = urllib.parse.urlencode({"api-version": API_VERSION,
                                    "$filter": f"location eq '{location}'"})
    return (f"{ARM_ENDPOINT}/subscriptions/{subscription_id}/providers/Microsoft.Compute/skus"
            f"?{query}")


def usable_zones(skus: Iterable[Mapping[str, Any]], vm_size: str,
                 location: str) -> set[str] | None:
    """The zones of `location` where this subscription may deploy `vm_size`: its offered zones
    less every zone restriction; empty when it is restricted in the whole region; None when the
    region does not list the size at all."""
    region = location.lower()
    for sku in skus:
        if sku.get("resourceType") != VIRTUAL_MACHINES or \
                str(sku.get("name", "")).lower() != vm_size.lower():
            continue
        zones: set[str] = set()
        for info in sku.get("locationInfo") or []:
            if str(info.get("location", "")).lower() == region:
                zones.update(str(z) for z in info.get("zones") or [])
        for restriction in sku.get("restrictions") or []:
            info = restriction.get("restrictionInfo") or {}
            where = {str(loc).lower() for loc in info.get("locations") or
                     restriction.get("values") or []}
            if where and region not in where:
                continue
            if restriction.get("type") == "Location":
                return set()
            if restriction.get("type") == "Zone":
                zones -= {str(z) for z in info.get("zones") or []}
        return zones
    return None


def list_skus(subscription_id: str, location: str, token: str,
              get: Callable[[str, str], dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Every SKU row ARM lists for the region, following `nextLink`."""
    return versions.every_row(skus_url(subscription_id, location), token, get)


def pool_zone_problems(settings: Settings, skus: list[dict[str, Any]]) -> list[Problem]:
    """One Problem per pool whose VM size cannot run in every zone the settings give it."""
    region = settings.region
    pools = [("systemPool.machineType", settings.system_pool.machine_type, "zones",
              list(settings.zones))]
    pools += [(f"gpuPools.{key.value}.machineType", pool.machine_type, "gpuZones",
               list(settings.gpu_zones))
              for key, pool in settings.gpu_pools_by_key.items()]
    problems = []
    for path, size, zones_key, zones in pools:
        usable = usable_zones(skus, size, region)
        if usable is None:
            problems.append(Problem(path, size, f"{region} lists no VM size {size} for this "
                                    f"subscription (`az vm list-skus --location {region} --size "
                                    f"{size} --output table`). Nothing was created"))
            continue
        missing = [z for z in zones if z not in usable]
        if not missing:
            continue
        works = ", ".join(sorted(usable)) or "none"
        problems.append(Problem(
            zones_key, zones,
            f"{size} ({path}) cannot be deployed by this subscription in zone(s) "
            f"{', '.join(missing)} of {region}; it can in: {works} (Resource SKUs "
            f"restrictions, `az vm list-skus --location {region} --size {size} --zone "
            "--output table`). AKS would refuse the pool even at 0 nodes "
            f"(AvailabilityZoneNotSupported); set {zones_key} to zones it can use, or ask "
            "Azure support to lift the restriction. Nothing was created"))
    return problems


def check_pool_zones(settings: Settings) -> list[dict[str, Any]]:
    """Refuse, before any resource, a pool VM size this subscription cannot use in its zones.
    Returns the SKU rows read (the quota check reads each size's quota family from them)."""
    subscription, token = versions.deployer_subscription_and_token()
    skus = list_skus(subscription, settings.region, token)
    problems = pool_zone_problems(settings, skus)
    if problems:
        raise SettingsError(problems)
    return skus
