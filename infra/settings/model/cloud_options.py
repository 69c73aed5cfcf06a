"""`aws`, `azure` and `gcp`: each cloud's own settings (networks, reservations, maintenance,
the GCP project)."""

from __future__ import annotations

import ipaddress
import re
from enum import Enum
from typing import Annotated

from pydantic import AfterValidator, Field, field_validator

from infra.settings.model.section import Section


def _private_cidr(value: str) -> str:
    try:
        network = ipaddress.ip_network(value, strict=True)
    except ValueError as error:
        raise ValueError(f"{value!r} is not a CIDR: {error}") from None
    if not network.is_private or network.version != 4 or network.prefixlen > 24:
        raise ValueError("a private IPv4 range of /24 or larger, e.g. 10.0.0.0/16")
    return value


PrivateCidr = Annotated[str, AfterValidator(_private_cidr)]


class CapacityReservation(Section):
    """Puts gpuPools.onDemand on an EC2 On-Demand Capacity Reservation or Capacity Block for ML (its zone must be gpuZones[0], its type the pool's machineType); its own placement replaces the program's placement group."""  # noqa: E501 (one line: the docs/settings.md table row)

    id: str = Field(description="Reservation id, e.g. cr-0123456789abcdef0.")
    capacity_block: bool = Field(
        False,
        description="True for a Capacity Block for ML (node group capacity type "
        "CAPACITY_BLOCK); false for an On-Demand Capacity Reservation.",
    )


class AwsOptions(Section):
    """AWS-only settings."""

    vpc_cidr: PrivateCidr = Field("10.0.0.0/16", description="VPC address range.")
    capacity_reservation: CapacityReservation | None = Field(
        None, description="The on-demand GPU pool's capacity reservation (see the section).")


class WeekDay(str, Enum):
    MONDAY = "Monday"
    TUESDAY = "Tuesday"
    WEDNESDAY = "Wednesday"
    THURSDAY = "Thursday"
    FRIDAY = "Friday"
    SATURDAY = "Saturday"
    SUNDAY = "Sunday"


class AzureOptions(Section):
    """Azure-only settings."""

    vnet_cidr: PrivateCidr = Field("10.1.0.0/16", description="Virtual network address range.")
    disable_local_accounts: bool = Field(
        True, description="Entra ID only: no static admin kubeconfig."
    )
    long_term_support: bool = Field(
        False,
        description="AKS Long-Term Support for kubernetes.version (Premium tier, support plan "
        "AKSLongTermSupport): needed for a version past its community support.",
    )
    maintenance_day: WeekDay = Field(
        WeekDay.SUNDAY,
        description="Weekly 4-hour window (UTC) for AKS patch upgrades and node OS security "
        "patches, which drain nodes and so restart the job from its checkpoint.",
    )
    maintenance_start: str = Field(
        "00:00", description="Start of the weekly maintenance window, HH:MM in UTC."
    )

    @field_validator("maintenance_start")
    @classmethod
    def _hh_mm(cls, value: str) -> str:
        hours, _, minutes = value.partition(":")
        if not (len(hours) == 2 and len(minutes) == 2 and hours.isdigit() and minutes.isdigit()
                and int(hours) < 24 and int(minutes) < 60):
            raise ValueError("a time of day HH:MM (UTC), e.g. '00:00' or '22:30'")
        return value


# A project id: 6 to 30 lowercase ASCII letters, digits or hyphens, starting with a letter, no
# trailing hyphen (Resource Manager v3 Project.projectId,
# https://cloud.google.com/resource-manager/reference/rest/v3/projects); older projects of a
# Google Workspace domain carry it as `<domain>:<id>` ("the Google apps domain is prefixed if
# applicable", Cloud SQL Admin API DatabaseInstance.project).
PROJECT_ID = re.compile(r"^(?:[a-z0-9][a-z0-9.-]*\.[a-z]{2,}:)?[a-z][a-z0-9-]{4,28}[a-z0-9]$")


class GcpOptions(Section):
    """GCP-only settings."""

    project: str = Field(
        description="GCP project id: `pulumi config set --path gcp.project <project-id>` "
        "(`gcloud config get-value project` prints yours).")

    @field_validator("project")
    @classmethod
    def _project_id(cls, value: str) -> str:
        if PROJECT_ID.match(value):
            return value
        if not value.strip():
            why = "empty (`gcloud config get-value project` prints nothing when gcloud has no project)"
        elif value.isdigit():
            why = "a project number; the project's id is its PROJECT_ID column"
        elif value.lower() != value or " " in value:
            why = "looks like a display name, not the project's id"
        else:
            why = "not a project id"
        raise ValueError(
            f"{why}: a GCP project id is 6 to 30 lowercase letters, digits or hyphens, starting "
            "with a letter and not ending with a hyphen (or a legacy domain-scoped "
            "`example.com:my-project`); `gcloud projects list` lists yours, `gcloud config set "
            "project <project-id>` makes one gcloud's default; set it with "
            "`pulumi config set --path gcp.project <project-id>`")
    network_cidr: PrivateCidr = Field("10.2.0.0/20", description="Node subnetwork range.")
    deletion_protection: bool = Field(False, description="GKE deletion protection.")
    secrets_kms_key: str | None = Field(
        None, description="Optional Cloud KMS key that encrypts the cluster's Kubernetes "
        "Secrets at the application layer (projects/P/locations/REGION/keyRings/R/cryptoKeys/K, "
        "in the stack's region; GKE's service agent needs "
        "roles/cloudkms.cryptoKeyEncrypterDecrypter on it: docs/gcp.md). Unset: Google's "
        "default encryption. Set or changed on a live cluster, GKE re-encrypts the Secrets.")
