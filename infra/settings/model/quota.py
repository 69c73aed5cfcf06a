"""`quota`: whether a GPU quota increase is on its way."""

from __future__ import annotations

from pydantic import Field

from infra.settings.model.section import Section


class Quota(Section):
    """GPU quota: `pulumi up` reads the quota the job's nodes count against before any resource (AWS Service Quotas' vCPUs, Azure Compute usages per VM family or Spot vCPUs, GCP regional GPU and CPU quotas) and refuses a job whose nodes do not fit, with the request command; `torchrec-cloud doctor` reads every pool's."""  # noqa: E501 (one line: the docs/settings.md table row)

    pending: bool = Field(
        False, description="true: an increase is requested and on its way, so `pulumi up` goes "
        "ahead below the quota (the gang waits in Kueue until the nodes can start); on AWS it "
        "also lets a pool's maxNodes past EKS's 'Nodes per managed node group' quota (450 "
        "unless raised).")
