"""Which cloud quota a machine counts against, and how much a pool needs: one table for
`torchrec-cloud doctor` (every pool, every cloud) and `pulumi up`'s check (infra/aws/quotas.py).
No cloud SDK here."""

from __future__ import annotations

from infra.catalog import Machine

# EC2 vCPU quotas (Service Quotas, service code ec2) by instance family: (on-demand, spot).
# AWS "Amazon EC2 service quotas" (On-Demand Instance quotas, Spot Instance quotas): one quota
# per family group, counted in vCPUs.
EC2_QUOTAS = {
    "p": ("L-417A185B", "L-7212CCBC"),  # Running On-Demand P instances / All P Spot Instance Requests
    "g": ("L-DB2E81BA", "L-3819A6DF"),  # G and VT instances
    "standard": ("L-1216C47A", "L-34B43A08"),  # A, C, D, H, I, M, R, T, Z instances
}


def ec2_family(machine: Machine) -> str:
    letter = machine.name[0].lower()
    return letter if letter in EC2_QUOTAS else "standard"


def ec2_quota_code(machine: Machine, spot: bool) -> str:
    return EC2_QUOTAS[ec2_family(machine)][1 if spot else 0]


def ec2_request_command(code: str, vcpus: int, region: str) -> str:
    return (f"aws service-quotas request-service-quota-increase --service-code ec2 --quota-code "
            f"{code} --desired-value {vcpus} --region {region}")
