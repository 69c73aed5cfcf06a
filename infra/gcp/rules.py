"""GKE's settings rules: Filestore sizes, reservations and DWS flex-start, the GPUDirect
fabrics this program sets up, kept checkpoints in the bucket, the secrets' KMS key.

Each is a rule as in infra/settings/rules.py (a function of the whole settings yielding the
problems it finds), run on every stack by infra/settings/all_rules.py check_all: a rule here
also refuses a GCP-only setting on another cloud. Imports no pulumi or cloud SDK: `make check`
runs it on requirements-check.txt alone.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from infra.catalog.cloud import Cloud
from infra.catalog.machines import Interconnect, find_machine
from infra.catalog.storage import FILESTORE_CAPACITY_RANGES, filestore_capacity_fits
from infra.settings.errors import Problem, set_command
from infra.settings.model.checkpoints import CheckpointLocation
from infra.settings.model.shared_file_system import Filestore
from infra.settings.model.stack_file import Settings
from infra.settings.rules import GCP_FABRICS_SET_UP, TIB, Rule, _pools


def filestore_sizes(s: Settings) -> Iterator[Problem]:
    fs = s.shared_file_system
    if not isinstance(fs, Filestore):
        return
    gib = fs.capacity_gib
    if not filestore_capacity_fits(fs.tier.value, gib):
        sizes = [f"{int(least * TIB)}-{int(most * TIB)} GiB in {step} GiB steps" if step
                 else f"{least}-{most} TiB ({int(least * TIB)}-{int(most * TIB)} GiB)"
                 for least, most, step in FILESTORE_CAPACITY_RANGES[fs.tier.value]]
        yield Problem("sharedFileSystem.capacityGib", gib, f"{fs.tier.value}: {', or '.join(sizes)}")


# --- GCP capacity: reservations, DWS flex-start, queued provisioning --------------------------
# GKE's rules as cluster-toolkit's gke-node-pool enforces them (modules/compute/gke-node-pool/
# main.tf preconditions): flex-start takes no reservation (NO_RESERVATION), is not spot, has no
# static node count and no auto-repair; a specific reservation is named by its name; spot takes
# no reservation. Flex-start VMs are created by the autoscaler when pods wait and run at most
# seven days (https://cloud.google.com/kubernetes-engine/docs/concepts/dws); this stack creates
# the pool empty. Queued provisioning adds nodes only for a ProvisioningRequest, made by Kueue
# or by hand (https://cloud.google.com/kubernetes-engine/docs/how-to/provisioningrequest).
RESERVATION_NAME = re.compile(
    r"^(projects/[a-z][-a-z0-9]{4,28}[a-z0-9]/reservations/)?[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")


def gpu_capacity_options_fit_gcp(s: Settings) -> Iterator[Problem]:
    pool, path = s.gpu_pools.on_demand, "gpuPools.onDemand"
    chosen = {"reservation": pool.reservation is not None, "flexStart": pool.flex_start,
              "queuedProvisioning": pool.queued_provisioning}
    if s.cloud != Cloud.GCP:
        for key, on in chosen.items():
            if on:
                yield Problem(f"{path}.{key}", getattr(pool, _snake(key)),
                              f"GCP only; on {s.cloud.value} leave it unset")
        return
    if pool.queued_provisioning:
        yield Problem(f"{path}.queuedProvisioning", True,
                      "not supported: queued provisioning adds nodes only for a "
                      "ProvisioningRequest (made by Kueue's ProvisioningRequest admission check), "
                      "and this stack's JobSet or PyTorchJob makes none, so the job would wait "
                      "for ever; use flexStart: true (the autoscaler asks DWS for the nodes)")
    if pool.flex_start and pool.reservation is not None:
        yield Problem(f"{path}.reservation", pool.reservation.model_dump(by_alias=True, mode="json"),
                      "flex-start VMs take no reservation: set flexStart: false or drop "
                      "the reservation")
    if pool.flex_start and s.interconnect.placement:
        # cluster-toolkit gke-node-pool (main.tf): "Compact placement with DWS Flex start is
        # only supported for A3 Ultra, A4, and H4D machine types", and those through a Compute
        # Engine workload policy, not the COMPACT type this stack sets.
        yield Problem("interconnect.placement", True,
                      "flex-start pools take no compact placement on GKE: set "
                      "interconnect.placement: false with gpuPools.onDemand.flexStart: true")
    if pool.flex_start and (pool.min_nodes, pool.desired_nodes) != (0, 0):
        yield Problem(f"{path}.desiredNodes",
                      {"minNodes": pool.min_nodes, "desiredNodes": pool.desired_nodes},
                      "flex-start pools start empty and grow when the job's pods wait: "
                      "minNodes 0 and desiredNodes 0 (maxNodes bounds them)")
    reservation = pool.reservation
    if (reservation is not None and s.interconnect.placement
            and reservation.name.startswith("projects/")):
        # Compact placement policies work "only with single-project reservations"; shared
        # reservations are not supported (cloud.google.com/compute/docs/instances/
        # define-instance-placement, restrictions); Google's reservation blueprints
        # (cluster-toolkit examples/gke-a3-highgpu, gke-a3-megagpu) set no placement policy.
        yield Problem(f"{path}.reservation.name", reservation.name,
                      "a shared reservation (another project's) takes no compact placement: "
                      "set interconnect.placement: false, or name a reservation of this project")
    if reservation is not None:
        if reservation.affinity.value == "specific" and not RESERVATION_NAME.match(reservation.name):
            yield Problem(f"{path}.reservation.name", reservation.name,
                          "a reservation name (lowercase letters, digits and '-', at most 63) "
                          "or projects/<project>/reservations/<name>")
        elif reservation.affinity.value == "any" and reservation.name:
            yield Problem(f"{path}.reservation.name", reservation.name,
                          "affinity any consumes whichever reservation matches: leave name "
                          "empty, or set affinity: specific")


def _snake(camel: str) -> str:
    return re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), camel)


def on_demand_pool_can_be_bought(s: Settings) -> Iterator[Problem]:
    """The catalog's on_demand_available: a machine sold only through reservations, flex-start
    or spot cannot fill the on-demand pool from on-demand capacity."""
    pool = s.gpu_pools.on_demand
    found = find_machine(s.cloud, pool.machine_type)
    if found is None or found.on_demand_available or pool.max_nodes == 0:
        return
    if pool.reservation is not None or pool.flex_start:
        return
    yield Problem("gpuPools.onDemand.machineType", pool.machine_type,
                  f"{found.name} is not sold on demand; get it through a reservation "
                  "(gpuPools.onDemand.reservation: {affinity: specific, name: <reservation>} or "
                  "{affinity: any}), DWS flex-start (gpuPools.onDemand.flexStart: true) or spot "
                  "(gpuPools.spot with job.pool: spot, and another machine for the on-demand pool)")


def gcp_fabric_is_one_this_program_sets_up(s: Settings) -> Iterator[Problem]:
    """GPUDirect-RDMA (A3 Ultra, A4: RoCE NICs, the RDMA binary installer, DRANET or the RDMA
    device plugin) is not set up by infra/gcp: its fabric would be claimed, not delivered."""
    if s.cloud != Cloud.GCP or not s.interconnect.fabric:
        return
    for path, pool in _pools(s):
        found = find_machine(s.cloud, pool.machine_type)
        if (path.startswith("gpuPools") and found
                and found.interconnect not in GCP_FABRICS_SET_UP | {Interconnect.NONE}):
            yield Problem("interconnect.fabric", True,
                          f"{path}.machineType {pool.machine_type} uses "
                          f"{found.interconnect.value}, which this program does not set up; "
                          f"`{set_command('interconnect.fabric', 'false')}` (NCCL over gVNIC, "
                          "no fabric), or use "
                          "a3-highgpu-8g (GPUDirect-TCPX) or a3-megagpu-8g (GPUDirect-TCPXO)")
            return


def gcp_kept_checkpoints_are_in_the_bucket(s: Settings) -> Iterator[Problem]:
    """retainOnDestroy keeps the bucket only: `pulumi destroy` deletes the Filestore instance
    with its data, and this stack keeps no Filestore backup for the next `up` to restore from
    (issue 33), so checkpoints kept on destroy must be in the bucket."""
    c = s.checkpoints
    if (s.cloud != Cloud.GCP or not c.enabled or not c.retain_on_destroy
            or c.location != CheckpointLocation.SHARED_FILE_SYSTEM):
        return
    yield Problem("checkpoints.location", c.location.value,
                  "objectStore with checkpoints.retainOnDestroy true: destroy deletes the "
                  "Filestore instance and the checkpoints on it, and no Filestore backup is "
                  f"kept on GCP (`{set_command('checkpoints.location', 'objectStore')}`), or "
                  "checkpoints.retainOnDestroy false to accept that destroy deletes them")


# GKE application-layer secrets encryption takes a Cloud KMS key by its resource name, in the
# cluster's location ("The key ring must be in the same location as the cluster",
# https://cloud.google.com/kubernetes-engine/docs/how-to/encrypting-secrets).
KMS_KEY = re.compile(r"^projects/([a-z][-a-z0-9]{4,28}[a-z0-9]|[a-z0-9.-]+:[a-z][-a-z0-9]{4,28}"
                     r"[a-z0-9])/locations/([a-z0-9-]+)/keyRings/([\w-]{1,63})/cryptoKeys/"
                     r"([\w-]{1,63})$")


def gcp_secrets_key_is_one_gke_takes(s: Settings) -> Iterator[Problem]:
    key = s.gcp.secrets_kms_key if s.gcp is not None else None
    if s.cloud != Cloud.GCP or key is None:
        return
    found = KMS_KEY.match(key)
    path = "gcp.secretsKmsKey"
    if found is None:
        yield Problem(path, key, "a Cloud KMS key's resource name, projects/PROJECT/locations/"
                      f"{s.region}/keyRings/RING/cryptoKeys/KEY (`gcloud kms keys list "
                      f"--location {s.region} --keyring RING --format='value(name)'`)")
    elif found.group(2) != s.region:
        yield Problem(path, key, f"a key in the cluster's region {s.region} (this one is in "
                      f"{found.group(2)}): GKE takes a key ring in the cluster's location")


RULES: tuple[Rule, ...] = (
    filestore_sizes,
    gpu_capacity_options_fit_gcp,
    on_demand_pool_can_be_bought,
    gcp_fabric_is_one_this_program_sets_up,
    gcp_kept_checkpoints_are_in_the_bucket,
    gcp_secrets_key_is_one_gke_takes,
)
