"""What a user does about a cloud's refusal, per cloud: where AWS, Azure and GCP take a quota
request (with the EC2 P-family quotas of infra/quotas.py), how to see an EC2 capacity
reservation's state, where Azure keeps the code behind a failed provisioning, and how to get
around a stock-out; the texts that tell a refusal apart are workloads/cloud_errors.py's, this
module only words the next step."""

from __future__ import annotations

import re

from infra.quotas import EC2_QUOTAS, Ec2Quota, p_generation
from workloads.waiting.view import ClusterView

# EC2's P quotas, from the one table (infra/quotas.py EC2_QUOTAS, with its sources): Spot P5 has
# its own quota, apart from P4, P3 and P2's; on-demand, one quota covers every P generation.
AWS_SPOT_P_QUOTAS: dict[str, Ec2Quota] = {family: quotas[1] for family, quotas in EC2_QUOTAS.items()
                                          if p_generation(family) == family}
AWS_ON_DEMAND_P_QUOTA: Ec2Quota = EC2_QUOTAS["p4"][0]
# An EC2 instance type inside a message: p4d.24xlarge, p5en.48xlarge, p6-b200.48xlarge.
_INSTANCE_TYPE = re.compile(r"\bp\d[a-z0-9-]*\.\d*x?large\b", re.IGNORECASE)


def instance_family(text: str) -> str | None:
    """The P family ("p4", "p5", "p6") of the first EC2 P instance type named in `text`, as its
    Spot quota is named (infra/quotas.py p_generation: the one parse)."""
    m = _INSTANCE_TYPE.search(text)
    return p_generation(m.group(0)) if m else None


def _aws_gpu_machines() -> list:
    from infra.catalog.cloud import Cloud
    from infra.catalog.machines import MACHINES

    return [m for m in MACHINES if m.cloud == Cloud.AWS and m.has_gpus]


def aws_family(texts: list[str]) -> str | None:
    """The P family ("p4", "p5") named by an instance type (p4d.24xlarge) or an accelerator label
    value (k8s.amazonaws.com/accelerator=nvidia-a100, the catalog's GPU model: infra/aws/
    node_groups.py) in any of `texts`."""
    for text in texts:
        if family := instance_family(text):
            return family
    by_gpu = {f"nvidia-{(m.gpu_model or '').lower()}": instance_family(m.name)
              for m in _aws_gpu_machines()}
    for text in texts:
        for label, family in by_gpu.items():
            if re.search(rf"{re.escape(label)}\b", text.lower()):
                return family
    return None


def gang_vcpus(family: str | None, nodes: int | None) -> int | None:
    """The vCPUs the whole gang needs: its nodes times the vCPUs of the P family's machines in
    infra/catalog/machines.py (p4: 96, p5: 192), when every machine of the family has the same count;
    None when the family, the count or the node count is unknown."""
    counts = {m.vcpus for m in _aws_gpu_machines() if family and instance_family(m.name) == family}
    return counts.pop() * nodes if nodes and len(counts) == 1 else None


def quota_step(cloud: str | None, spot: bool, family: str | None = None,
               vcpus: int | None = None) -> str:
    """Where each cloud takes a quota request (docs/aws.md, azure.md, gcp.md say how much);
    `vcpus`: the gang's need, when the machine and node count are known."""
    if cloud == "aws":
        need = vcpus or "<vCPUs for job.nodes nodes>"
        if not spot:
            quotas = [AWS_ON_DEMAND_P_QUOTA]
        elif family in AWS_SPOT_P_QUOTAS:
            quotas = [AWS_SPOT_P_QUOTAS[family]]
        else:  # the family is not known: either Spot P quota may be the one
            quotas = sorted(set(AWS_SPOT_P_QUOTAS.values()), key=lambda q: q.name)
        named = " or ".join(f"\"{q.name}\" ({q.code})" for q in quotas)
        code = quotas[0].code if len(quotas) == 1 else "<code>"
        return (f"request quota {named}: aws service-quotas request-service-quota-increase "
                f"--service-code ec2 --quota-code {code} --desired-value {need} "
                "(https://console.aws.amazon.com/servicequotas/home/services/ec2/quotas)")
    if cloud == "azure":
        return ("request quota: az vm list-usage --location <region> -o table shows the family; "
                "ask in the portal under Quotas > Compute (https://portal.azure.com/#view/"
                "Microsoft_Azure_Capacity/QuotaMenuBlade/~/myQuotas)")
    if cloud == "gcp":
        kind = "PREEMPTIBLE_NVIDIA_*_GPUS" if spot else "NVIDIA_*_GPUS"
        return (f"request quota: {kind} in the region and GPUS_ALL_REGIONS "
                "(gcloud compute regions describe <region>; "
                "https://console.cloud.google.com/iam-admin/quotas)")
    return "request GPU quota for the node pool's machine type in the cloud's quota console"


def reservation_step() -> str:
    """An EC2 reservation that is full or not active yet (aws.capacityReservation)."""
    return ("the capacity reservation (aws.capacityReservation.id) is full or not active yet: see "
            "its state and start time with aws ec2 describe-capacity-reservations "
            "--capacity-reservation-ids <id> --query \"CapacityReservations[].[State,StartDate,"
            "EndDate,AvailableInstanceCount]\"; a Capacity Block launches nothing before its "
            "StartDate")


def azure_provisioning_step(view: ClusterView, spot: bool) -> str:
    """Azure's code behind the autoscaler's "provisioning-state-failed" is only in the node
    resource group's activity log; its name is in every AKS node's providerID."""
    group = "<node resource group>"
    for node in view.nodes:
        m = re.search(r"/resourceGroups/([^/]+)/", (node.get("spec") or {}).get("providerID") or "",
                      re.IGNORECASE)
        if m:
            group = m.group(1)
            break
    return (f"the exact code (AllocationFailed, ZonalAllocationFailed, SkuNotAvailable, a quota): "
            f"az monitor activity-log list -g {group} --status Failed --offset 1h; "
            + capacity_step(spot))


def capacity_step(spot: bool) -> str:
    if spot:
        return ("the spot pool is out of stock: wait, or run on on-demand capacity "
                "(pulumi config set --path job.pool onDemand, then pulumi up), or pick another "
                "zone (gpuZones)")
    return ("the zone has no such machine now: wait, pick another zone (gpuZones), or use a "
            "reservation (gpuPools.onDemand)")
