"""`pulumi up`'s quota check on Azure, before any resource: the subscription's Compute usages in
the region (ARM `GET /subscriptions/{id}/providers/Microsoft.Compute/locations/{region}/usages`,
operation Usage_List, the call behind `az vm list-usage`;
https://learn.microsoft.com/rest/api/compute/usage/list) against the job's nodes: a dedicated
job's VM family (the size's Resource SKUs `family`) and the region's total vCPUs, a Spot job's
regional low-priority vCPUs. pulumi-azure-native has no invoke for it (its `quota` module holds
group quotas only), so the program asks ARM itself with the deployer's token, as skus.py does.

A subscription's ND quota is 0 until asked for: AKS then creates the cluster, NetApp Files and
the NAT, and the pool never scales up while they bill. `quota.pending: true` lets it go ahead,
with a warning, while an increase is on its way. The words and numbers are infra/quotas.py's,
the ones `torchrec-cloud doctor` prints.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable
from typing import Any

import pulumi

from infra.azure import versions
from infra.azure.versions import ARM_ENDPOINT
from infra.quotas import (azure_family, azure_readings, job_need, preflight_refusal,
                          refuse_or_go_ahead)
from infra.settings.model.stack_file import Settings

API_VERSION = "2024-07-01"  # Compute's Usage_List (stable)


def usages_url(subscription_id: str, location: str) -> str:
    query = urllib.parse.urlencode({"api-version": API_VERSION})
    return (f"{ARM_ENDPOINT}/subscriptions/{subscription_id}/providers/Microsoft.Compute/"
            f"locations/{urllib.parse.quote(location)}/usages?{query}")


def list_usages(subscription_id: str, location: str, token: str,
                get: Callable[[str, str], dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Every usage row ARM lists for the region, following `nextLink`."""
    return versions.every_row(usages_url(subscription_id, location), token, get)


def check_job_quota(s: Settings, skus: list[dict[str, Any]]) -> None:
    """Refuse a job whose nodes do not fit the subscription's quota (warn under quota.pending).
    `skus`: the region's Resource SKUs rows (skus.check_pool_zones read them)."""
    need = job_need(s)
    if need is None:
        return  # an unknown size is refused by the settings' rules
    family = azure_family(skus, need.machine.name)
    if family is None and not need.spot:
        return  # skus.check_pool_zones has refused a size the region does not list
    subscription, token = versions.deployer_subscription_and_token()
    usages = list_usages(subscription, s.region, token)
    short = [r for r in azure_readings(need, family or "", usages, subscription, s.region)
             if r.short]
    refuse_or_go_ahead(s, [preflight_refusal(r, s.region) for r in short], pulumi.log.warn)
