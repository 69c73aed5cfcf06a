"""`pulumi up`'s quota check on AWS, before any resource: the account's vCPU quota for the job's
pool (Service Quotas' GetServiceQuota, through pulumi-aws's invoke) against the job's nodes.

Without it a fresh account (P quota 0) deploys cleanly, pays for EKS, FSx and NAT, and Kueue
requeues the gang without end. `quota.pending: true` lets it go ahead while an increase is on its
way. The job's own pool only: a pool the job does not use may wait for its quota
(`torchrec-cloud doctor` reports every pool's).
"""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from infra.catalog import machine as machine_of
from infra.quotas import ec2_family, ec2_quota_code, ec2_request_command
from infra.settings import Settings, SettingsError
from infra.settings.errors import Problem, set_command


def check_job_quota(s: Settings, provider: aws.Provider) -> None:
    if s.quota.pending:
        return
    spot = s.job.pool.value == "spot"
    machine = machine_of(s.cloud, s.job_pool.machine_type)
    code = ec2_quota_code(machine, spot)
    quota = aws.servicequotas.get_service_quota(service_code="ec2", quota_code=code,
                                                opts=pulumi.InvokeOptions(provider=provider))
    need = s.job.nodes * machine.vcpus
    if quota.value is not None and quota.value >= need:
        return
    have = 0 if quota.value is None else quota.value
    raise SettingsError([Problem(
        "job.nodes", s.job.nodes,
        f"{s.job.nodes} x {machine.name} need {need} vCPUs of the account's "
        f"{'spot' if spot else 'on-demand'} {ec2_family(machine).upper()} quota ({code} in "
        f"{s.region}), which is {have:g}: request it with `{ec2_request_command(code, need, s.region)}`"
        f", then `pulumi up` again; or, once requested, `{set_command('quota.pending', 'true')}`")])
