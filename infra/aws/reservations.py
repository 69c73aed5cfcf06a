"""The capacity reservation the on-demand GPU group launches into, checked against what EC2
will enforce at launch, when the program runs.

EC2 launches into a Capacity Block only in the block's zone, with its instance type, between
its start and end dates (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-launch.html;
https://docs.aws.amazon.com/eks/latest/userguide/capacity-blocks-mng.html: "only specify the
subnet in the same Availability Zone as the capacity reservation"). A block that has not started
is fine: the group stays at zero until it is active, and EKS itself scales the group to zero 40
minutes before it ends. On-Demand Capacity Reservations have the same zone and type rule
(https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-reservations-launch.html), but
pulumi-aws 7 has no data source that reads one, so only EC2 checks those, at launch.
"""

from __future__ import annotations

from datetime import datetime, timezone

import pulumi
import pulumi_aws as aws

from infra.settings.errors import Problem, SettingsError
from infra.settings.model import CapacityReservation

# States a block can still launch in (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_CapacityReservation.html).
USABLE_BLOCK_STATES = ("scheduled", "payment-pending", "active")


def block_problems(found: aws.ec2.GetCapacityBlockReservationResult, machine_type: str,
                   zone_name: str, job_nodes: int, now: datetime) -> list[Problem]:
    """What EC2 would refuse at launch, as settings problems."""
    path = "aws.capacityReservation.id"
    problems = []
    if found.instance_type != machine_type:
        problems.append(Problem(path, found.id, f"a block of {found.instance_type}; set "
                                f"gpuPools.onDemand.machineType: {found.instance_type}"))
    if found.availability_zone != zone_name:
        problems.append(Problem(path, found.id, f"a block in {found.availability_zone} "
                                f"({found.availability_zone_id}); set gpuZones to it"))
    end = datetime.fromisoformat(found.end_date.replace("Z", "+00:00"))
    if found.state not in USABLE_BLOCK_STATES or end <= now:
        problems.append(Problem(path, found.id, f"{found.state}, ended {found.end_date}: buy "
                                "another block (aws ec2 describe-capacity-block-offerings)"))
    if found.instance_count < job_nodes:
        problems.append(Problem(path, found.id, f"{found.instance_count} instances, fewer than "
                                f"job.nodes ({job_nodes})"))
    return problems


def check(reservation: CapacityReservation, machine_type: str, zone_name: str, job_nodes: int,
          provider: aws.Provider) -> None:
    if not reservation.capacity_block:
        return
    found = aws.ec2.get_capacity_block_reservation(
        id=reservation.id, opts=pulumi.InvokeOptions(provider=provider))
    problems = block_problems(found, machine_type, zone_name, job_nodes,
                              datetime.now(timezone.utc))
    if problems:
        raise SettingsError(problems)
