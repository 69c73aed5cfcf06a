"""EKS's settings rules: FSx for Lustre sizes and backups, S3 import, capacity reservations,
extended support, the GPU groups' one zone.

Each is a rule as in infra/settings/rules.py (a function of the whole settings yielding the
problems it finds), run on every stack by infra/settings/all_rules.py check_all: a rule here
also refuses an AWS-only setting on another cloud. Imports no pulumi or cloud SDK: `make check`
runs it on requirements-check.txt alone.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from infra.catalog.cloud import Cloud
from infra.catalog.storage import (FSX_CAPACITY_STEP_GIB, FSX_MB_S_PER_TIB_TIERS,
                                   FSX_SMALL_CAPACITIES_GIB)
from infra.settings.errors import Problem
from infra.settings.model.checkpoints import CheckpointLocation
from infra.settings.model.shared_file_system import FsxDeploymentType, FsxLustre
from infra.settings.model.stack_file import Settings
from infra.settings.rules import (Rule, distinct_zones, one_gpu_zone_commands,
                                  zones_once_in_the_region)


# Capacity reservation ids, e.g. cr-02168da1478b509e0 (EKS User Guide, capacity-blocks-mng).
CAPACITY_RESERVATION_ID = re.compile(r"^cr-[0-9a-f]+$")


def fsx_lustre_sizes(s: Settings) -> Iterator[Problem]:
    fs = s.shared_file_system
    if not isinstance(fs, FsxLustre):
        return
    step = FSX_CAPACITY_STEP_GIB
    if fs.capacity_gib not in FSX_SMALL_CAPACITIES_GIB and (fs.capacity_gib <= 0
                                                            or fs.capacity_gib % step):
        yield Problem("sharedFileSystem.capacityGib", fs.capacity_gib,
                      f"{fs.deployment_type.value}: "
                      f"{', '.join(map(str, FSX_SMALL_CAPACITIES_GIB))}, or a multiple of {step} GiB")
    allowed = set(FSX_MB_S_PER_TIB_TIERS[fs.deployment_type.value])
    if allowed and fs.throughput_per_tib not in allowed:
        yield Problem("sharedFileSystem.throughputPerTib", fs.throughput_per_tib,
                      f"{fs.deployment_type.value}: one of {sorted(allowed)} MB/s per TiB")
    elif not allowed and fs.throughput_per_tib is not None:
        yield Problem("sharedFileSystem.throughputPerTib", fs.throughput_per_tib,
                      "SCRATCH_2 has a fixed throughput: set it to null")


def dataset_import_is_aws_s3(s: Settings) -> Iterator[Problem]:
    uri = s.dataset.import_uri
    if not uri:
        return
    if s.cloud != Cloud.AWS:
        yield Problem("dataset.importUri", uri,
                      f"only FSx for Lustre links a bucket; on {s.cloud.value} copy the data "
                      "onto the file system and set dataset.path")
    elif not re.match(r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/.*)?$", uri):
        yield Problem("dataset.importUri", uri, "an s3://bucket/prefix URI")


def extended_support_is_aws_only(s: Settings) -> Iterator[Problem]:
    if s.cloud != Cloud.AWS and s.kubernetes.extended_support:
        yield Problem("kubernetes.extendedSupport", True,
                      f"only EKS has extended support; leave it false on {s.cloud.value}")


def capacity_reservation_fits_the_pool(s: Settings) -> Iterator[Problem]:
    """What EC2 checks when a node launches into a reservation, as far as the id and the
    settings show it; the reservation's own zone, type and dates are checked when the program
    runs (infra/aws/reservations.py)."""
    reservation = s.aws.capacity_reservation if s.aws else None
    if reservation is None:
        return
    if not CAPACITY_RESERVATION_ID.match(reservation.id):
        yield Problem("aws.capacityReservation.id", reservation.id,
                      "a reservation id like cr-0123456789abcdef0")


def aws_gpu_groups_share_one_zone(s: Settings) -> Iterator[Problem]:
    """infra/aws puts every GPU group and the (single-AZ) FSx file system in one zone; with
    placement on, placement_needs_one_zone already says so."""
    gpu = zones_once_in_the_region(s, "gpuZones")  # as the zones rule's commands leave them
    if s.cloud == Cloud.AWS and not s.interconnect.placement and distinct_zones(gpu) != 1:
        yield Problem("gpuZones", s.gpu_zones,
                      "one zone on AWS: the GPU groups and FSx for Lustre (single-AZ) share it; "
                      f"keep one with {one_gpu_zone_commands(s)}")


FSX_BACKUP_ID = re.compile(r"^backup-[0-9a-f]{8,17}$")


def fsx_checkpoints_survive_destroy(s: Settings) -> Iterator[Problem]:
    """Checkpoints on FSx for Lustre kept on destroy: `pulumi destroy` takes a final backup of
    a persistent file system (infra/aws/fsx.py); a SCRATCH_2 file system takes none
    ("backups are not supported on scratch file systems",
    https://docs.aws.amazon.com/fsx/latest/LustreGuide/using-backups-fsx.html), so destroy
    would delete the checkpoints that check says are kept."""
    fs = s.shared_file_system
    if not isinstance(fs, FsxLustre):
        return
    if fs.backup_id is not None and not FSX_BACKUP_ID.match(fs.backup_id):
        yield Problem("sharedFileSystem.backupId", fs.backup_id,
                      "an FSx backup id like backup-0123456789abcdef0 (aws fsx describe-backups)")
    if (s.checkpoints.enabled and s.checkpoints.location == CheckpointLocation.SHARED_FILE_SYSTEM
            and s.checkpoints.retain_on_destroy
            and fs.deployment_type == FsxDeploymentType.SCRATCH_2):
        yield Problem("sharedFileSystem.deploymentType", fs.deployment_type.value,
                      "PERSISTENT_2 or PERSISTENT_1 while checkpoints.location is "
                      "sharedFileSystem and checkpoints.retainOnDestroy is true: a SCRATCH_2 file "
                      "system takes no backup, so `pulumi destroy` would delete the checkpoints. "
                      "Or set checkpoints.location: objectStore (S3, kept on destroy)")
    if (s.checkpoints.enabled and s.checkpoints.location == CheckpointLocation.SHARED_FILE_SYSTEM
            and s.checkpoints.retain_on_destroy and s.dataset.import_uri
            and fs.deployment_type == FsxDeploymentType.PERSISTENT_1):
        # FSx backs up only file systems "not linked to a data repository"
        # (https://docs.aws.amazon.com/fsx/latest/LustreGuide/using-backups-fsx.html); a
        # PERSISTENT_1 file system is linked at creation by its import path, so no final backup.
        yield Problem("dataset.importUri", s.dataset.import_uri,
                      "no S3 import on a PERSISTENT_1 file system while checkpoints.location is "
                      "sharedFileSystem and checkpoints.retainOnDestroy is true: FSx takes no "
                      "backup of a file system linked to S3, so `pulumi destroy` would delete the "
                      "checkpoints. Use PERSISTENT_2 (`pulumi config set --path "
                      "sharedFileSystem.deploymentType PERSISTENT_2`) or keep checkpoints in S3 "
                      "(`pulumi config set --path checkpoints.location objectStore`)")


RULES: tuple[Rule, ...] = (
    fsx_lustre_sizes,
    dataset_import_is_aws_s3,
    extended_support_is_aws_only,
    capacity_reservation_fits_the_pool,
    aws_gpu_groups_share_one_zone,
    fsx_checkpoints_survive_destroy,
)
