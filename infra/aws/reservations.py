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

A reservation made in a cluster placement group serves only launches into that group
(https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/cr-cpg.html; the launch names the group
and the reservation, capacity-reservations-launch.html): `placement_group` reads which group.
"""

from __future__ import annotations

from datetime import datetime, timezone

import pulumi
import pulumi_aws as aws

from infra.settings.errors import Problem, SettingsError
from infra.settings.model.cloud_options import CapacityReservation

PATH = "aws.capacityReservation.id"

# States a block can still launch in (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_CapacityReservation.html).
USABLE_BLOCK_STATES = ("scheduled", "payment-pending", "active")


def block_problems(found: aws.ec2.GetCapacityBlockReservationResult, machine_type: str,
                   zone_name: str, job_nodes: int, now: datetime) -> list[Problem]:
    """What EC2 would refuse at launch, as settings problems."""
    path = PATH
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


def placement_group_name(arn: str | None, reservation_id: str, account_id: str) -> str | None:
    """The group a launch must name for this reservation: the name in its placement group ARN
    (arn:aws:ec2:<region>:<account>:placement-group/<name>), None when it is in none.

    A group another account owns (a shared reservation) is refused: EC2 takes a shared placement
    group by id only (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/share-placement-group.html,
    "you must specify a shared placement group by ID, not by name"), and the reservation gives
    its ARN, not its id."""
    if not arn:
        return None
    owner = arn.split(":")[4]
    name = arn.split("/", 1)[1]
    if owner != account_id:
        raise SettingsError([Problem(
            PATH, reservation_id,
            f"a reservation in placement group {name} of account {owner}: a launch names a "
            f"shared placement group by id, which the reservation does not give; use a "
            f"reservation of account {account_id}, or one outside a placement group")])
    return name


def placement_group(prefix: str, reservation: CapacityReservation, account_id: str,
                    opts: pulumi.ResourceOptions) -> pulumi.Input[str] | None:
    """The name of the cluster placement group the reservation was made in, or None.

    A Capacity Block: from its data source (placementGroupArn "if applicable"), when the program
    runs. An On-Demand Capacity Reservation: pulumi-aws 7 has no data source for one, so it is
    read as an existing resource (`CapacityReservation.get`: the provider's read,
    DescribeCapacityReservations, which sets placement_group_arn; Pulumi never changes or
    deletes a resource it only reads); the name is then known when the read returns, in preview
    too."""
    if reservation.capacity_block:
        found = aws.ec2.get_capacity_block_reservation(
            id=reservation.id, opts=pulumi.InvokeOptions(provider=opts.provider))
        return placement_group_name(found.placement_group_arn, reservation.id, account_id)
    existing = aws.ec2.CapacityReservation.get(f"{prefix}-reservation", reservation.id, opts=opts)
    return existing.placement_group_arn.apply(
        lambda arn: placement_group_name(arn, reservation.id, account_id))
