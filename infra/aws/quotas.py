"""`pulumi up`'s quota check on AWS, before any resource: the account's vCPU quota for the job's
pool (Service Quotas' GetServiceQuota, through pulumi-aws's invoke) against the job's nodes.

Without it a fresh account (P quota 0) deploys cleanly, pays for EKS, FSx and NAT, and Kueue
requeues the gang without end. `quota.pending: true` lets it go ahead, with a warning, while an
increase is on its way. The job's own pool only: a pool the job does not use may wait for its
quota (`torchrec-cloud doctor` reports every pool's; the table is infra/quotas.py).
"""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from infra.catalog.machines import machine as machine_of
from infra.quotas import ec2_quota, ec2_request_command, refuse_or_go_ahead
from infra.settings.model.stack_file import Settings


def check_job_quota(s: Settings, provider: aws.Provider) -> None:
    spot = s.job.pool.value == "spot"
    machine = machine_of(s.cloud, s.job_pool.machine_type)
    wanted = ec2_quota(machine, spot)  # P5 spot has its own quota (infra/quotas.py EC2_QUOTAS)
    code = wanted.code
    quota = aws.servicequotas.get_service_quota(service_code="ec2", quota_code=code,
                                                opts=pulumi.InvokeOptions(provider=provider))
    need = s.job.nodes * machine.vcpus
    if quota.value is not None and quota.value >= need:
        return
    have = 0 if quota.value is None else quota.value
    refusal = (f"{s.job.nodes} x {machine.name} need {need} vCPUs of the account's "
               f"{'spot' if spot else 'on-demand'} {wanted.label} quota \"{wanted.name}\" ({code} "
               f"in {s.region}), which is {have:g}: request it with "
               f"`{ec2_request_command(code, need, s.region)}`, then `pulumi up` again")
    refuse_or_go_ahead(s, [refusal], pulumi.log.warn)
