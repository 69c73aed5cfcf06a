"""Zones as the account sees them: zone ids and names resolved, and the GPU zone checked
against the machine type's offerings, when the program runs and before any cloud resource.

Zone names (us-east-1a) are per-account aliases; zone ids (use1-az4) name the same place in
every account (https://docs.aws.amazon.com/ram/latest/userguide/working-with-az-ids.html).
Whether a zone offers an instance type is what EC2's DescribeInstanceTypeOfferings answers, by
zone name or id (location type availability-zone / availability-zone-id,
https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeInstanceTypeOfferings.html);
a GPU group in a zone without its type never gets a node.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from infra.settings.errors import Problem, SettingsError


# Zone ids where EKS cannot place a cluster's subnets (EKS User Guide, "View Amazon EKS networking
# requirements for VPC and subnets", Subnet requirements for clusters:
# awsdocs/amazon-eks-user-guide latest/ug/networking/network-reqs.adoc).
EKS_DISALLOWED_ZONE_IDS = frozenset({"use1-az3", "usw1-az2", "cac1-az3"})


@dataclass(frozen=True)
class Zones:
    """The settings' zones as zone names, in their order; `ids` maps a name to its zone id."""

    names: list[str]
    gpu_names: list[str]
    ids: dict[str, str]


def resolve(zones: Iterable[str], gpu_zones: Iterable[str], region: str,
            provider: aws.Provider) -> Zones:
    """Zone names for the settings' zones (names or ids); unknown ones refused, listing both."""
    found = aws.get_availability_zones(state="available",
                                       opts=pulumi.InvokeOptions(provider=provider))
    id_by_name = dict(zip(found.names, found.zone_ids))
    name_by_id = {zone_id: name for name, zone_id in id_by_name.items()}
    known = ", ".join(f"{name} ({zone_id})" for name, zone_id in sorted(id_by_name.items()))
    problems: list[Problem] = []

    def name_of(path: str, zone: str) -> str:
        if zone in id_by_name:
            return zone
        if zone in name_by_id:
            return name_by_id[zone]
        problems.append(Problem(path, zone, f"an available zone of {region}: {known}"))
        return zone

    names = [name_of("zones", zone) for zone in zones]
    gpu_names = [name_of("gpuZones", zone) for zone in gpu_zones]
    for zone, name in zip(zones, names):
        if id_by_name.get(name) in EKS_DISALLOWED_ZONE_IDS:
            problems.append(Problem(
                "zones", zone, f"{name} is {id_by_name[name]}, a zone EKS does not accept for "
                f"cluster subnets; choose another of: {known}"))
    if problems:
        raise SettingsError(problems)
    return Zones(names=names, gpu_names=gpu_names, ids=id_by_name)


def check_offered(zones: Zones, machine_types: Iterable[str], provider: aws.Provider) -> None:
    """Refuse a GPU zone that does not offer a GPU pool's machine type, naming the zones that do."""
    wanted = sorted(set(machine_types))
    offerings = aws.ec2.get_instance_type_offerings(
        location_type="availability-zone-id",
        filters=[aws.ec2.GetInstanceTypeOfferingsFilterArgs(name="instance-type", values=wanted)],
        opts=pulumi.InvokeOptions(provider=provider))
    offered: dict[str, set[str]] = {}
    for instance_type, zone_id in zip(offerings.instance_types, offerings.locations):
        offered.setdefault(instance_type, set()).add(zone_id)
    name_by_id = {zone_id: name for name, zone_id in zones.ids.items()}
    problems = []
    for instance_type in wanted:
        where = offered.get(instance_type, set())
        for name in zones.gpu_names:
            if zones.ids[name] not in where:
                offering = ", ".join(sorted(f"{name_by_id.get(z, '?')} ({z})" for z in where))
                problems.append(Problem(
                    "gpuZones", name,
                    f"{name} ({zones.ids[name]}) does not offer {instance_type}; zones that do: "
                    f"{offering or 'none in this region'}"))
    if problems:
        raise SettingsError(problems)
