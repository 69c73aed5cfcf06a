"""`pulumi up`'s quota check on GCP, before any resource: the project's regional quotas (Compute
Engine `regions.get`, `quotas[]` with metric, limit and usage; the call behind `gcloud compute
regions describe`; https://cloud.google.com/compute/docs/reference/rest/v1/regions/get) against
the job's nodes: the GPU model's metric (PREEMPTIBLE_ for Spot, e.g. PREEMPTIBLE_NVIDIA_H100_GPUS)
and the machine family's CPUs.

pulumi-gcp has no invoke that returns a region's quotas (`compute.get_regions` lists names; the
`cloudquota` invokes need the Cloud Quotas API enabled and report limits without usage), so the
program asks Compute Engine itself with the deployer's own token (`getClientConfig`'s
accessToken), the API GKE needs enabled anyway. A fresh project's A100/H100 quota is 0: GKE then
creates the cluster, Filestore and the NAT, and the pool never scales up while they bill.
`quota.pending: true` lets it go ahead, with a warning, while an increase is on its way. The
words and numbers are infra/quotas.py's, the ones `torchrec-cloud doctor` prints.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

import pulumi
import pulumi_gcp as gcp

from infra.quotas import gcp_readings, job_need, preflight_refusal, refuse_or_go_ahead
from infra.settings.errors import Problem, SettingsError, set_command
from infra.settings.model.stack_file import Settings

COMPUTE_API = "https://compute.googleapis.com/compute/v1"
REQUEST_TIMEOUT_SECONDS = 60


def region_url(project: str, region: str) -> str:
    return (f"{COMPUTE_API}/projects/{urllib.parse.quote(project)}/regions/"
            f"{urllib.parse.quote(region)}")


def get_json(url: str, token: str) -> dict[str, Any]:
    """One HTTPS GET with the deployer's token (tests/fakes/gcp.py stands in for it)."""
    request = urllib.request.Request(url, method="GET", headers={
        "Authorization": f"Bearer {token}", "Accept": "application/json"})
    with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_SECONDS) as response:  # noqa: S310
        return json.loads(response.read())


def region_quotas(project: str, region: str) -> list[dict[str, Any]]:
    """The region's quotas as Compute Engine reports them to the deployer."""
    token = gcp.organizations.get_client_config(opts=pulumi.InvokeOptions()).access_token
    try:
        return list(get_json(region_url(project, region), token).get("quotas") or [])
    except (urllib.error.URLError, OSError) as error:
        raise SettingsError([Problem(
            "quota.pending", False,
            f"the quotas of {region} in project {project} could not be read ({error}); the "
            "deployer needs compute.regions.get (roles/compute.viewer) and the Compute Engine "
            f"API enabled (`gcloud services enable compute.googleapis.com --project {project}`); "
            f"or go ahead unchecked with `{set_command('quota.pending', 'true')}`. Nothing "
            "was created")]) from None


def check_job_quota(s: Settings) -> None:
    """Refuse a job whose nodes do not fit the project's regional quotas (warn under
    quota.pending)."""
    need = job_need(s)
    if need is None or s.gcp is None:
        return  # an unknown machine or a missing gcp section is refused by the settings' rules
    quotas = region_quotas(s.gcp.project, s.region)
    short = [r for r in gcp_readings(need, quotas, s.region, s.gcp.project) if r.short]
    refuse_or_go_ahead(s, [preflight_refusal(r, s.region) for r in short], pulumi.log.warn)
