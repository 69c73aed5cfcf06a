"""The typed shape of a stack file: every setting, its default and its per-field rule.

Keys are camelCase in `Pulumi.<stack>.yaml` (Pulumi's convention) and snake_case here. Each
field's description is the documentation docs/settings.md is generated from. Rules that involve
more than one field, or a cloud's API limits, live in `rules.py`; defaults that differ per cloud
live in `defaults.py`.
"""

from __future__ import annotations

import ipaddress
import re
from enum import Enum
from types import UnionType
from typing import Annotated, Literal, Union, get_args, get_origin

from pydantic import (AfterValidator, BaseModel, ConfigDict, Field, ValidationInfo,
                      field_validator)
from pydantic_core import PydanticCustomError
from pydantic.alias_generators import to_camel

from infra.catalog import Cloud, FSX_CAPACITY_STEP_GIB, FSX_MB_S_PER_TIB_TIERS, FSX_SMALL_CAPACITIES_GIB


# Every field that holds a number (int or float), by name: `true` is refused in them
# (Section._no_true_for_a_number; tests/test_security.py holds the list to the models).
NUMBER_FIELDS = (
    "backoff_limit", "capacity_gib", "cpu", "deadline_hours", "desired_nodes", "every_seconds",
    "every_steps", "frequency_threshold", "keep", "max_hourly_usd", "max_ind_range",
    "max_nodes", "max_price", "max_wait_minutes", "memory_gib", "min_nodes", "nodes",
    "pool_size_tib", "processes_per_node", "termination_grace_seconds", "throughput_per_tib",
    "volume_size_gib", "workers")


class Section(BaseModel):
    """Base of every settings block: camelCase keys, unknown keys refused, immutable."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
        use_enum_values=False,
    )

    @field_validator(*NUMBER_FIELDS, mode="before", check_fields=False)
    @classmethod
    def _no_true_for_a_number(cls, value: object, info: ValidationInfo) -> object:
        """`keep: true` is not 1: pydantic's lax mode reads true/false as 1/0, so a typo would
        keep one checkpoint (or a 1-node pool) without a word; a number takes numbers only."""
        if isinstance(value, bool) and info.field_name is not None:
            number = _number_kind(cls.model_fields[info.field_name].annotation)
            if number is not None:
                raise PydanticCustomError(
                    f"{number}_type",
                    f"Input should be a valid {'integer' if number == 'int' else 'number'}")
        return value


def _number_kind(annotation: object) -> str | None:
    """'int' or 'float' for a field holding a number (or an optional one), else None."""
    kinds = get_args(annotation) if get_origin(annotation) in (Union, UnionType) else (annotation,)
    numbers = [k for k in kinds if k is not type(None)]
    if len(numbers) == 1 and numbers[0] in (int, float):
        return "int" if numbers[0] is int else "float"
    return None


class NodePool(Section):
    """A node pool's machine and size."""

    name: str = Field(description="Pool name (AKS: lowercase letters and digits, at most 12).")
    machine_type: str = Field(description="Machine type; must be in the catalog for the cloud.")
    min_nodes: int = Field(ge=0, description="Autoscaler lower bound.")
    desired_nodes: int = Field(
        ge=0, description="Nodes at creation (AWS: afterwards Cluster Autoscaler owns the size).")
    max_nodes: int = Field(ge=0, description="Autoscaler upper bound.")


class SystemPool(NodePool):
    """The small CPU pool that runs add-ons (device plugins, CSI drivers, DNS)."""

    name: str = Field("system", description="Pool name.")
    min_nodes: int = Field(1, ge=1, description="Autoscaler lower bound (at least 1).")
    desired_nodes: int = Field(
        2, ge=1,
        description="Nodes at creation (AWS: afterwards Cluster Autoscaler owns the size).")
    max_nodes: int = Field(3, ge=1, description="Autoscaler upper bound.")


class ReservationAffinity(str, Enum):
    ANY = "any"
    SPECIFIC = "specific"


class Reservation(Section):
    """GCP only: where the on-demand pool's nodes come from when on-demand capacity has none."""

    affinity: ReservationAffinity = Field(
        ReservationAffinity.SPECIFIC,
        description="specific (only the named reservation) or any (any matching reservation "
        "of the project, else on-demand).")
    name: str = Field(
        "", description="The reservation (specific only): its name, or "
        "projects/<project>/reservations/<name> for one shared from another project.")


class OnDemandGpuPool(NodePool):
    """The on-demand GPU pool: the reference setup trains on 2 of these nodes."""

    name: str = Field("gpu", description="Pool name.")
    min_nodes: int = Field(0, ge=0, description="Autoscaler lower bound.")
    desired_nodes: int = Field(
        0, ge=0,
        description="Nodes at creation; afterwards the cloud's autoscaler owns the size. 0 leaves "
        "the pool empty until the job's pods ask for nodes, so a shortage of the machine cannot "
        "fail `pulumi up` (a node group whose first nodes cannot launch ends in a failed state).")
    max_nodes: int = Field(2, ge=0, description="Autoscaler upper bound.")
    reservation: Reservation | None = Field(
        None, description="GCP only: consume a Compute Engine reservation (how H100/H200 "
        "capacity is usually bought).")
    flex_start: bool = Field(
        False, description="GCP only: Dynamic Workload Scheduler flex-start VMs, created when "
        "the job's pods wait (minNodes and desiredNodes 0, no reservation).")
    queued_provisioning: bool = Field(
        False, description="GCP only: DWS queued provisioning; refused, it needs a "
        "ProvisioningRequest the JobSet does not make (use flexStart).")


class SpotGpuPool(NodePool):
    """The spot GPU pool: scales to zero, paired with checkpointing."""

    enabled: bool = Field(True, description="Create the spot pool.")
    name: str = Field("gpuspot", description="Pool name.")
    min_nodes: int = Field(0, ge=0, description="Autoscaler lower bound (0 = scale to zero).")
    desired_nodes: int = Field(
        0, ge=0,
        description="Nodes at creation (AWS: afterwards Cluster Autoscaler owns the size).")
    max_nodes: int = Field(2, ge=0, description="Autoscaler upper bound.")
    max_price: float = Field(
        -1,
        description="Azure only: spot price cap in USD per hour; -1 pays up to on-demand.",
    )


class GpuPools(Section):
    """The two GPU pools: one on-demand, one spot."""

    on_demand: OnDemandGpuPool
    spot: SpotGpuPool


# RFC 5737 (IPv4) and RFC 3849 (IPv6) reserve these for documentation: no real client has them.
DOCUMENTATION_RANGES = tuple(ipaddress.ip_network(n) for n in (
    "192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24", "2001:db8::/32"))
# Addresses a machine has behind a router, never the one the cloud's API server sees it come
# from: RFC 1918 private networks (what `hostname -I` prints at home or in an office), RFC 6598
# carrier-grade NAT, loopback, link-local, and IPv6 unique local (RFC 4193) and link-local.
UNREACHABLE_RANGES = {
    "a private network (RFC 1918)": ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"),
    "carrier-grade NAT space (RFC 6598)": ("100.64.0.0/10",),
    "the loopback range": ("127.0.0.0/8", "::1/128"),
    "the link-local range": ("169.254.0.0/16", "fe80::/10"),
    "an IPv6 unique local range (RFC 4193)": ("fc00::/7",),
}
FIND_YOUR_ADDRESS = (
    "pulumi config set --path 'kubernetes.apiAccessCidrs[0]' "
    "\"$(curl -s https://checkip.amazonaws.com)/32\"")
# IPv6 prefixes that carry IPv4 addresses in their last 32 bits (RFC 4291 IPv4-mapped, RFC 6052
# NAT64's well-known prefix): a range inside one is judged as the IPv4 range it stands for, here
# (private, documentation) and by the breadth rule (infra/settings/security_rules.py).
IPV4_IN_IPV6 = tuple(ipaddress.ip_network(n) for n in ("::ffff:0:0/96", "64:ff9b::/96"))


def ipv4_equivalent(network: ipaddress.IPv4Network | ipaddress.IPv6Network
                    ) -> ipaddress.IPv4Network | None:
    """The IPv4 range an IPv6 range inside IPV4_IN_IPV6 stands for (`::ffff:10.1.2.3/128` ->
    `10.1.2.3/32`); None for an IPv4 range or one of IPv6 addresses only."""
    if network.version != 6:
        return None
    for embedding in IPV4_IN_IPV6:
        if network.subnet_of(embedding):  # type: ignore[arg-type]
            return ipaddress.IPv4Network((int(network.network_address) & 0xFFFFFFFF,
                                          network.prefixlen - embedding.prefixlen))
    return None


def _inside(network: ipaddress.IPv4Network | ipaddress.IPv6Network, cidrs: tuple[str, ...]) -> bool:
    return any(network.version == other.version
               and network.subnet_of(other)  # type: ignore[arg-type]
               for other in map(ipaddress.ip_network, cidrs))


def api_access_cidr(cidr: str, index: int = 0) -> str:
    """One CIDR the API server admits, normalised: a bare address is that address alone
    (`81.2.69.142` -> `81.2.69.142/32`), as `ip_network` reads it. Host bits are refused
    (strict), not cleared: `81.2.69.142/24` may mean the address or its /24, and clearing
    them silently would open the API to 255 other machines the user did not name."""
    try:
        network = ipaddress.ip_network(cidr.strip(), strict=True)
    except ValueError as error:
        if "host bits set" in str(error):
            address, _, prefix = cidr.strip().partition("/")
            whole = ipaddress.ip_network(cidr.strip(), strict=False)
            full = 32 if whole.version == 4 else 128
            raise ValueError(
                f"{cidr!r} has host bits set: write {address}/{full} for that address alone "
                f"or {whole} for its whole /{prefix} network; for the address alone: "
                f"`pulumi config set --path 'kubernetes.apiAccessCidrs[{index}]' {address}/{full}`"
                ) from None
        raise ValueError(f"{cidr!r} is not a CIDR: {error}") from None
    if network.prefixlen == 0:
        raise ValueError(
            f"{cidr!r} opens the API server to the whole internet; name your own public "
            f"address or network (a /32, or your office's public range): "
            f"`{FIND_YOUR_ADDRESS.replace('[0]', f'[{index}]')}`")
    # IPv4 written as IPv6 is that IPv4 range: `::ffff:10.1.2.3` is still a private address.
    judged = ipv4_equivalent(network) or network
    if judged is not network:
        cidr = f"{cidr.strip()} (IPv4 {judged})"
    if _inside(judged, tuple(str(doc) for doc in DOCUMENTATION_RANGES)):
        raise ValueError(
            f"{cidr!r} is a documentation range (RFC 5737/3849) no real machine has, so "
            f"`pulumi up` could not reach the cluster it creates; use your own address: "
            f"{FIND_YOUR_ADDRESS}")
    for kind, cidrs in UNREACHABLE_RANGES.items():
        if _inside(judged, cidrs):
            raise ValueError(
                f"{cidr!r} is in {kind}: the API server sees your machine come from its public "
                f"address, never this one, so `pulumi up` could not reach the cluster; use "
                f"your public address: {FIND_YOUR_ADDRESS}")
    return str(network)


class Kubernetes(Section):
    """The control plane."""

    version: str | None = Field(
        None, description="Kubernetes minor, e.g. 1.35; unset: the cloud's default on the first "
        "`pulumi up` (EKS, GKE's REGULAR channel, AKS in the region, asked when the program "
        "runs). A set minor must be one the cloud offers that day. Once the cluster exists, "
        "later runs keep the version it runs; a newer minor here upgrades it, one minor at a time.")
    extended_support: bool = Field(
        False,
        description=(
            "AWS only: accept a version in EKS extended support (billed per cluster hour) and "
            "keep the cluster there; off, a version past standard support is refused and EKS "
            "upgrades the cluster when standard support ends."
        ),
    )
    api_access_cidrs: list[str] = Field(
        description=(
            "CIDRs allowed to reach the public API endpoint (the machine running `pulumi up` must "
            "be inside one; a bare address is that address, /32). 0.0.0.0/0, documentation, private "
            "(RFC 1918), carrier-grade NAT, loopback and link-local ranges are refused. Set "
            "yours with "
            f"`{FIND_YOUR_ADDRESS}`."
        ),
    )

    allow_broad_api_access: bool = Field(
        False, description="Accept an apiAccessCidrs range broader than a /16 (IPv6: /48); "
        "off, such a range is refused (0.0.0.0/1 + 128.0.0.0/1 is all of IPv4).")

    @field_validator("version")
    @classmethod
    def _version_shape(cls, value: str | None) -> str | None:
        if value is None:
            return value
        parts = value.split(".")
        if len(parts) != 2 or not all(p.isdigit() for p in parts):
            raise ValueError("must be a minor version like '1.33'")
        return value

    @field_validator("api_access_cidrs")
    @classmethod
    def _cidrs(cls, value: list[str]) -> list[str]:
        if not value:
            raise ValueError(f"at least one CIDR, your own network: {FIND_YOUR_ADDRESS}")
        return [api_access_cidr(cidr, index) for index, cidr in enumerate(value)]


class Interconnect(Section):
    """Placement and the low-latency fabric between GPU nodes."""

    placement: bool = Field(
        True,
        description=(
            "Pack GPU nodes close together (AWS cluster placement group, Azure proximity "
            "placement group, GCP compact placement). Needs exactly one GPU zone."
        ),
    )
    fabric: bool = Field(
        True,
        description=(
            "Use the machine's fabric (AWS EFA, Azure InfiniBand, GCP GPUDirect). The machine "
            "must have one."
        ),
    )
    gate: bool = Field(
        True,
        description=(
            "Run the fabric gate before training: collectives across all ranks, NCCL's "
            "transport and bus bandwidth, a GPU health check. With fabric on, a bad node is "
            "tainted and left out (the gang restarts elsewhere, not counted), and so is every "
            "node of the gang when bandwidth is under the machine's floor (infra/catalog.py), "
            "up to --fabric_max_nodes_left_out nodes, then the job fails; otherwise it reports."
        ),
    )


class FsxDeploymentType(str, Enum):
    SCRATCH_2 = "SCRATCH_2"
    PERSISTENT_1 = "PERSISTENT_1"
    PERSISTENT_2 = "PERSISTENT_2"


class FsxLustre(Section):
    """AWS FSx for Lustre."""

    kind: Literal["fsx-lustre"] = Field("fsx-lustre", description="The file system kind of this cloud.")
    deployment_type: FsxDeploymentType = Field(
        FsxDeploymentType.PERSISTENT_2, description="SCRATCH_2, PERSISTENT_1 or PERSISTENT_2."
    )
    capacity_gib: int = Field(2400, description=(
        f"{', '.join(map(str, FSX_SMALL_CAPACITIES_GIB))}, then steps of {FSX_CAPACITY_STEP_GIB} GiB."))
    throughput_per_tib: int | None = Field(
        250,
        description="MB/s per TiB: " + ", ".join(
            f"{kind} {'/'.join(map(str, tiers))}" for kind, tiers in FSX_MB_S_PER_TIB_TIERS.items()
            if tiers) + ", none for SCRATCH_2.",
    )
    mount_path: str = Field("/mnt/shared", description="Where pods mount the file system.")
    backup_id: str | None = Field(
        None, description="Create the file system from this FSx backup, e.g. the final backup "
        "`pulumi destroy` kept of the checkpoints (docs/aws.md, Clean up); read at creation only.")


class AnfServiceLevel(str, Enum):
    STANDARD = "Standard"
    PREMIUM = "Premium"
    ULTRA = "Ultra"


class AzureNetAppFiles(Section):
    """Azure NetApp Files: a capacity pool and one NFS volume in it."""

    kind: Literal["azure-netapp-files"] = Field("azure-netapp-files", description="The file system kind of this cloud.")
    service_level: AnfServiceLevel = Field(
        AnfServiceLevel.PREMIUM, description="Standard, Premium or Ultra."
    )
    pool_size_tib: int = Field(4, description="Capacity pool size: at least 1 TiB, whole TiB.")
    volume_size_gib: int = Field(
        4096, description="Volume quota: 50 GiB to 100 TiB, and no more than the pool."
    )
    mount_path: str = Field("/mnt/shared", description="Where pods mount the file system.")


class FilestoreTier(str, Enum):
    BASIC_HDD = "BASIC_HDD"
    BASIC_SSD = "BASIC_SSD"
    ZONAL = "ZONAL"
    REGIONAL = "REGIONAL"
    HIGH_SCALE_SSD = "HIGH_SCALE_SSD"


class Filestore(Section):
    """GCP Filestore."""

    kind: Literal["filestore"] = Field("filestore", description="The file system kind of this cloud.")
    tier: FilestoreTier = Field(FilestoreTier.ZONAL, description="Filestore service tier.")
    capacity_gib: int = Field(
        2560,
        description="BASIC_HDD 1-63.9 TiB, BASIC_SSD 2.5-63.9 TiB, ZONAL/REGIONAL 1-9.75 TiB "
        "in 256 GiB steps or 10-100 TiB in 2.5 TiB steps, HIGH_SCALE_SSD 10-100 TiB.",
    )
    share_name: str = Field("shared", description="NFS export name.")
    mount_path: str = Field("/mnt/shared", description="Where pods mount the file system.")


SharedFileSystem = Annotated[
    Union[FsxLustre, AzureNetAppFiles, Filestore], Field(discriminator="kind")
]


class CheckpointLocation(str, Enum):
    OBJECT_STORE = "objectStore"
    SHARED_FILE_SYSTEM = "sharedFileSystem"


class Checkpoints(Section):
    """Where the trainer saves, and what `pulumi destroy` keeps."""

    enabled: bool = Field(True, description="Save checkpoints (required with a spot pool).")
    location: CheckpointLocation = Field(
        CheckpointLocation.OBJECT_STORE,
        description="objectStore (s3://, az://, gs:// bucket) or sharedFileSystem.",
    )
    retain_on_destroy: bool = Field(
        True, description="Keep the checkpoint bucket and its data on `pulumi destroy`."
    )
    every_steps: int | None = Field(
        None, ge=1,
        description="Steps between checkpoints. Unset: derived from one save's time so that a "
        "save is written at most 10% of the run (at the planned steps per second; 500 at "
        "least); a value under that bound is refused (infra/cadence.py).")
    every_seconds: int | None = Field(
        None, ge=0,
        description="On spot pools, also save when this many seconds passed since the last "
        "save (0 = steps only): bounds the work a preemption without a final save loses. "
        "Unset: 600, or 10 x one save's time where that is longer.")
    keep: int = Field(3, ge=1, description="Newest complete checkpoints to keep.")
    accept_preemption_loss: bool = Field(
        False,
        description="On a spot pool whose tables are too large to save within the cloud's "
        "notice (MLPerf's 209 GB), run anyway: a preemption then loses up to one checkpoint "
        "interval (everySeconds), which `make check` prints. False: such a stack is refused.")


class CriteoFormat(str, Enum):
    CRITEO_1TB = "criteo_1tb"
    CRITEO_KAGGLE = "criteo_kaggle"


class MultiHotDistribution(str, Enum):
    UNIFORM = "uniform"
    PARETO = "pareto"


class MultiHotMode(str, Enum):
    MATERIALIZE = "materialize"
    ON_THE_FLY = "onTheFly"


class PreparePool(str, Enum):
    CPU = "cpu"
    GPU = "gpu"


CRITEO_SPARSE_FEATURES = 26  # categorical columns of every Criteo layout (trainer/config.py)
CRITEO_1TB_DAYS = 24  # day_0 .. day_23


class DatasetPrepare(Section):
    """A Kubernetes Job before training turns raw Criteo TSV files into the layout the trainer reads, at dataset.path (`python -m trainer.prepare`; the training pods wait for its layout.json). `prepare: true` is short for `prepare: {enabled: true}`."""  # noqa: E501 (one line: the docs/settings.md table row)

    enabled: bool = Field(False, description="Run the preparation Job before training.")
    source: str = Field(
        "", description="Where the raw files are (day_0 .. day_23, optionally .gz, or Kaggle "
        "train.txt): s3://bucket/prefix (aws), gs://bucket/prefix (gcp), "
        "az://container@account.blob.core.windows.net/prefix (azure, an existing account; see "
        "sourceResourceGroup) or az://container/prefix (the stack's checkpoint account), read "
        "with the preparation's own workload identity (service account "
        "<job.serviceAccount>-prepare, read-only on the source); or a folder on the shared file "
        "system, relative to its mount (the preparation then has no cloud identity).")
    source_resource_group: str = Field(
        "", description="Azure, with an az://container@account... source: the account's resource "
        "group in the stack's subscription; the stack grants the preparation's identity Storage "
        "Blob Data Reader on that container.")
    format: CriteoFormat = Field(
        CriteoFormat.CRITEO_1TB, description="criteo_1tb (24 day files) or criteo_kaggle "
        "(one train.txt).")
    days: str = Field(
        "", description="criteo_1tb only: the days to prepare, e.g. 0-23 or 0-3 (empty = all "
        "24; the last one is split into validation and test).")
    frequency_threshold: int = Field(
        0, ge=0, description="Ids seen fewer times than this in the whole data share one row "
        "(torchrec's contiguous_preproc_criteo; 3 gives torchrec's published table sizes); "
        "0 = every id keeps its own row.")
    max_ind_range: int = Field(
        0, ge=0, description="Cap every table at this many rows (ids modulo it, as MLPerf's "
        "40000000); 0 = no cap.")
    shuffle: bool = Field(
        False, description="criteo_1tb: shuffle the rows of all days but the last together, as "
        "MLPerf's preprocessing step 3 (torchrec's BinaryCriteoUtils.shuffle, seed 0: the same "
        "files); needed to reproduce MLPerf DLRM-DCNv2 (job.trainerArgs.recipe: mlperf). The "
        "last day stays as it is (validation and test halves).")
    multi_hot_sizes: list[int] | None = Field(
        None, description=f"{CRITEO_SPARSE_FEATURES} ids per feature for MLPerf DLRM-DCNv2's "
        "synthetic multi-hot data, e.g. [3,2,1,2,6,1,1,1,1,7,3,8,1,6,9,5,1,1,1,12,100,27,10,3,"
        "1,1]; null = one-hot.")
    multi_hot_distribution: MultiHotDistribution = Field(
        MultiHotDistribution.UNIFORM, description="uniform or pareto: how the extra multi-hot "
        "ids are drawn (the reference's --multi_hot_distribution_type).")
    multi_hot: MultiHotMode = Field(
        MultiHotMode.MATERIALIZE, description="With multiHotSizes: materialize (the Job writes "
        "MLPerf's day_<i>_sparse_multi_hot.npz, about 3.8 TB for 1TB) or onTheFly (the Job "
        "writes one-hot data and the trainer draws the extra ids per batch, "
        "--multi_hot_sizes).")
    pool: PreparePool = Field(
        PreparePool.CPU, description="cpu: half a system node (one worker on the default "
        "machines: fine for Kaggle, about 20 h for all of 1TB, with the GPU nodes held); "
        "gpu: a node of the job's GPU pool (job.pool), all its CPUs and memory, no GPU. "
        "gpu needs one node more than job.nodes in that pool's maxNodes, because the training "
        "pods hold their nodes while they wait.")
    workers: int = Field(
        0, ge=0, description="Parallel workers of the preparation (0 = one per CPU of its pod, "
        "as many as its memory holds at 6 GiB each: a real 1TB day's scan takes about 5 GB).")
    cpu: int = Field(0, ge=0, description="CPUs requested (0 = sized from the pool's machine).")
    memory_gib: int = Field(
        0, ge=0, description="Memory requested in GiB (0 = sized from the pool's machine).")
    deadline_hours: int = Field(
        48, ge=1, description="The Job fails after this long (activeDeadlineSeconds); a rerun "
        "skips finished days.")


class Dataset(Section):
    """Training data: synthetic unless a path is given."""

    path: str = Field(
        "",
        description="Criteo data on the shared file system, relative to its mount "
        "(empty = synthetic data); the output folder of dataset.prepare.",
    )
    import_uri: str = Field(
        "",
        description="AWS only: s3:// prefix linked to FSx as a data repository association.",
    )
    prepare: DatasetPrepare = Field(default_factory=DatasetPrepare)

    @field_validator("prepare", mode="before")
    @classmethod
    def _prepare_switch(cls, value: object) -> object:
        """`prepare: true` is `prepare: {enabled: true}`."""
        return {"enabled": value} if isinstance(value, bool) else value

    def bucket_uris(self, scheme: str) -> list[str]:
        """The `<scheme>://bucket/prefix` URIs the trainer's identity must read: AWS's
        importUri. The preparation's source is read by the preparation's own identity
        (prepare_source_uris), never the trainer's."""
        return [self.import_uri] if self.import_uri.startswith(f"{scheme}://") else []

    def prepare_source_uris(self, scheme: str) -> list[str]:
        """The preparation's source when it is in a `<scheme>://` bucket: all its own identity
        reads. Empty for a folder on the shared file system: the preparation then has no cloud
        identity at all."""
        source = self.prepare.source if self.prepare.enabled else ""
        return [source] if source.startswith(f"{scheme}://") else []


def uri_parts(uri: str) -> tuple[str, str]:
    """`scheme://bucket/some/prefix/` -> ("bucket", "some/prefix")."""
    bucket, _, prefix = uri.split("://", 1)[1].partition("/")
    return bucket, prefix.strip("/")


class JobKind(str, Enum):
    JOB_SET = "JobSet"
    PYTORCH_JOB = "PyTorchJob"


# The JobSet's one replicated job; its pods are `<job.name>-node-0-<index>` (workloads/jobset.py).
JOBSET_REPLICATED_JOB = "node"
# The preparation Job's logical name is `<job.name>-prepare`; Pulumi names it that plus '-' and 8
# random characters (pulumi-kubernetes provider/pkg/metadata/naming.go AssignNameIfAutonamable ->
# resource.NewUniqueName(..., randlen 0), "if randlen <= 0 { randlen = 8 }"), and a Job's name
# becomes a pod label value, at most 63 characters (workloads/prepare.py).
PREPARE_JOB_SUFFIX = "-prepare"
PULUMI_AUTONAME_SUFFIX = 1 + 8


class PoolChoice(str, Enum):
    ON_DEMAND = "onDemand"
    SPOT = "spot"


class SpotShortagePolicy(str, Enum):
    WAIT = "wait"
    ON_DEMAND = "onDemand"


class SpotShortage(Section):
    """What a spot job does when the spot pool cannot get nodes (Kueue, workloads/kueue.py); waiting never uses job.backoffLimit and never fails the job."""  # noqa: E501 (one line: the docs/settings.md table row)

    policy: SpotShortagePolicy = Field(
        SpotShortagePolicy.WAIT,
        description="wait (for spot nodes, as long as it takes unless maxWaitMinutes is set) "
        "or onDemand (refused on every cloud, with the reason: no autoscaler here reports "
        "spot capacity to Kueue only once the spot nodes exist; use job.pool onDemand).")
    max_wait_minutes: int | None = Field(
        None, ge=15,
        description="Unset (default): Kueue requeues a gang that gets no nodes without end. "
        "Set: turned into a number of PodsReady timeouts, which Kueue counts over the job's "
        "whole life (never reset when the gang runs), after which it holds (deactivates) the "
        "job, never Failed; resume it with `kubectl -n <namespace> patch workload <name> "
        "--type merge -p '{\"spec\":{\"active\":true}}'`.")


TrainerArgValue = Union[str, int, float, bool, list[int], list[str]]


class Job(Section):
    """The training job the stack starts."""

    name: str = Field("dlrm", description="Job name (RFC 1123, at most 63 characters).")
    namespace: str = Field("torchrec", description="Kubernetes namespace (RFC 1123 label).")
    service_account: str = Field("trainer", description="Kubernetes service account name.")
    image: str = Field(
        "", description="Trainer image; empty = build trainer/Dockerfile into the stack's registry."
    )
    kind: JobKind = Field(
        JobKind.JOB_SET,
        description="JobSet (one Indexed Job, restarted as a gang) or PyTorchJob (Kubeflow).")
    pool: PoolChoice = Field(PoolChoice.ON_DEMAND, description="onDemand or spot.")
    spot_shortage: SpotShortage = Field(
        default_factory=lambda: SpotShortage(),
        description="When spot capacity is short (job.pool spot): see the section.")
    nodes: int = Field(2, ge=1, description="Nodes (pods) the job spans.")
    processes_per_node: int = Field(8, ge=1, description="torchrun processes per node.")
    backoff_limit: int = Field(
        3, ge=0, description="Gang restarts after crashes; preemptions never count.")
    termination_grace_seconds: int = Field(
        120, ge=30,
        description="On-demand pools: the pod's time from SIGTERM to SIGKILL on a drain. "
        "Spot pools take it from the cloud's notice (infra/catalog.py).")
    suspend: bool = Field(
        False, description="Create the training job suspended: no pods, so the GPU pools stay "
        "at their minimum, e.g. while dataset.prepare runs for hours; set it back to false and "
        "`pulumi up` to start training. Either change recreates the job: set on a running job, "
        "it deletes it (training resumes from its checkpoint when set back).")
    trainer_args: dict[str, TrainerArgValue] = Field(
        # The dense MLP's last size must equal embedding_dim (trainer/config.py).
        default_factory=lambda: {"batch_size": 2048, "embedding_dim": 128,
                                 "dense_arch_layer_sizes": [512, 256, 128]},
        description="Trainer flags without dashes, e.g. {batch_size: 2048}; checked against "
        "the trainer's own flags (`.venv/bin/python -m trainer --help`).",
    )
    max_hourly_usd: float | None = Field(
        None, gt=0,
        description="Spend ceiling, USD per hour: the stack is refused when what the job may "
        "scale to (each GPU pool the job can use and the system pool at its maxNodes, with the "
        "file system, network and control plane; infra/estimate.py) would cost more. Unset: no "
        "ceiling.")

    @property
    def prepare_service_account(self) -> str:
        """The dataset preparation's own Kubernetes service account: its identity reads the
        source and nothing else (no checkpoint write, no node rights)."""
        return f"{self.service_account}{PREPARE_JOB_SUFFIX}"


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


# Text whose values are naturally numbers (Azure zones "1", a tag "2026"): `pulumi config set
# --path 'zones[0]' 1` stores the integer 1 (the CLI reads integers as numbers under --path), so
# a whole number is taken as its text rather than refused with a fix that stores it again.
NumberText = Annotated[str, Field(coerce_numbers_to_str=True)]


class Quota(Section):
    """GPU quota: `pulumi up` reads the quota the job's nodes count against before any resource (AWS Service Quotas' vCPUs, Azure Compute usages per VM family or Spot vCPUs, GCP regional GPU and CPU quotas) and refuses a job whose nodes do not fit, with the request command; `torchrec-cloud doctor` reads every pool's."""  # noqa: E501 (one line: the docs/settings.md table row)

    pending: bool = Field(
        False, description="true: an increase is requested and on its way, so `pulumi up` goes "
        "ahead below the quota (the gang waits in Kueue until the nodes can start); on AWS it "
        "also lets a pool's maxNodes past EKS's 'Nodes per managed node group' quota (450 "
        "unless raised).")


class Settings(Section):
    """Everything one stack file says, validated."""

    cloud: Cloud = Field(description="aws, azure or gcp.")
    region: str = Field(description="Region for every resource.")
    zones: list[NumberText] = Field(
        description="Zones the cluster spans (EKS needs two). AWS takes zone names "
        "(us-east-1a, a per-account alias) or zone ids (use1-az4, the same place in every "
        "account); use one spelling in zones and gpuZones.")
    gpu_zones: list[NumberText] = Field(
        description="Zones of the GPU pools and the file system; on AWS checked against "
        "the machine type's offerings when the program runs.")
    kubernetes: Kubernetes
    system_pool: SystemPool
    gpu_pools: GpuPools
    interconnect: Interconnect = Field(default_factory=Interconnect)
    shared_file_system: SharedFileSystem
    checkpoints: Checkpoints = Field(default_factory=Checkpoints)
    dataset: Dataset = Field(default_factory=Dataset)
    job: Job = Field(default_factory=Job)
    quota: Quota = Field(default_factory=Quota)
    tags: dict[str, NumberText] = Field(default_factory=dict,
                                        description="Tags/labels on resources.")
    aws: AwsOptions | None = None
    azure: AzureOptions | None = None
    gcp: GcpOptions | None = None

    @property
    def job_pool(self) -> NodePool:
        """The GPU pool the job is scheduled on."""
        if self.job.pool == PoolChoice.SPOT:
            return self.gpu_pools.spot
        return self.gpu_pools.on_demand

    @property
    def gpu_pools_by_key(self) -> dict[PoolChoice, NodePool]:
        """The enabled GPU pools, keyed as in the stack file (onDemand, spot): the one place
        every cloud and the contract take their pool keys and spot-ness from."""
        pools: dict[PoolChoice, NodePool] = {PoolChoice.ON_DEMAND: self.gpu_pools.on_demand}
        if self.gpu_pools.spot.enabled:
            pools[PoolChoice.SPOT] = self.gpu_pools.spot
        return pools

    @property
    def enabled_gpu_pools(self) -> list[NodePool]:
        return list(self.gpu_pools_by_key.values())
