"""The one table of machine types: every fact about a machine type lives here.

Nothing else in the project hard-codes a GPU count, a GPU memory size, an EFA interface count or
its RDMA and huge-page needs, an accelerator type name, a GPU quota metric or a machine's price:
settings validation, node pools, pod resources, the NCCL environment, the quota checks and the
cost estimate all read this table (`Machine` per machine; its GPU model's rated figures are
gpus.py's `GpuModel`). A GPU machine whose GPU model has no `GpuModel` entry, or that lacks a
fact its cloud needs, is refused when this module loads (`Machine.__post_init__`). Tables kept
elsewhere by a name the catalog gives (the EC2 quotas per P family, `EC2_QUOTAS` in
infra/quotas.py) have a test that every catalog GPU machine has an entry
(tests/test_catalog.py). Sources per entry are in docs/catalog-sources.md; prices are
on-demand list prices in USD per hour in the reference regions (us-east-1, eastus,
us-central1) and drift, so treat the cost outputs as estimates. Last checked 2026-11 (see the
sources file for the date and what could not be verified).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from infra.catalog.cloud import Cloud
from infra.catalog.gate_floors import FabricFloor, fabric_floor
from infra.catalog.gpus import GpuModel, find_gpu_model
from infra.catalog.node_times import NODE_READY_MINUTES, OFED_BUILD_MINUTES


class Interconnect(str, Enum):
    """The low-latency fabric a machine offers between nodes."""

    NONE = "none"
    EFA = "efa"  # AWS Elastic Fabric Adapter (libfabric)
    INFINIBAND = "infiniband"  # Azure ND-series, Mellanox ConnectX (UCX / NCCL IB)
    GPUDIRECT_TCPX = "gpudirect-tcpx"  # GCP A3 High
    GPUDIRECT_TCPXO = "gpudirect-tcpxo"  # GCP A3 Mega
    RDMA = "rdma"  # GCP A3 Ultra / A4 (RoCE through the GKE RDMA plugin)


# NCCL's network for each fabric, as the fabric gate names what NCCL logged it chose.
FABRIC_TRANSPORTS = {
    Interconnect.NONE: "socket",
    Interconnect.EFA: "efa",  # aws-ofi-nccl, libfabric provider efa
    Interconnect.INFINIBAND: "ib",  # NCCL's IB verbs transport
    Interconnect.GPUDIRECT_TCPX: "tcpx",
    Interconnect.GPUDIRECT_TCPXO: "tcpxo",
    Interconnect.RDMA: "ib",  # RoCE through IB verbs
}

@dataclass(frozen=True)
class Machine:
    """One machine type and what it offers a training job."""

    name: str
    cloud: Cloud
    vcpus: int
    memory_gib: float
    network_gbps: float
    on_demand_usd_per_hour: float
    typical_spot_discount: float  # fraction off on-demand, e.g. 0.6 = spot costs 40%
    gpu_model: str | None = None
    gpu_count: int = 0
    gpu_memory_gib: int = 0
    interconnect: Interconnect = Interconnect.NONE
    efa_interfaces: int = 0  # interfaces a pod can request as vpc.amazonaws.com/efa
    # EFA with RDMA read/write (GPUDirect RDMA): p4d/p4de and p5* (infra/aws/interconnect.py
    # sets FI_EFA_USE_DEVICE_RDMA=1 on these).
    efa_device_rdma: bool = False
    # Whether the reference EKS manifests give this machine's pods 2 MiB huge pages for
    # libfabric's bounce buffers (p5*: awsome-distributed-training's nccl-tests.yaml requests
    # 5120Mi; its p4d/p4de examples none). Sources: infra/aws/interconnect.py.
    efa_hugepages: bool = False
    gcp_accelerator_type: str | None = None  # nodeConfig.guestAccelerators[].type on GKE
    # The regional GPU quota metric the machine's GPUs count against on Compute Engine
    # (regions.get `quotas[].metric`; Spot: PREEMPTIBLE_<metric>): infra/quotas.py.
    gcp_gpu_quota_metric: str | None = None
    # False where the vendor sells the machine only through reservations / capacity blocks /
    # Flex-start / Spot; on_demand_usd_per_hour is then the listed rate, not a buyable one.
    on_demand_available: bool = True
    # GKE only: the boot disk type the machine accepts (A3 Ultra and newer take Hyperdisk only),
    # and the local SSDs bundled with it, which GKE uses for ephemeral storage (emptyDir,
    # image layers) when the pool asks for them (ephemeral_storage_local_ssd_config).
    gcp_boot_disk_type: str = "pd-ssd"
    gcp_local_ssds: int = 0
    # The pod network's own NIC (Gbit/s) where it is not network_gbps: what NCCL's socket
    # transport gets between nodes when the fabric is not used (interconnect.fabric false or a
    # machine without one). AWS: network card 0's share (network_gbps over the network cards,
    # one per EFA interface: the primary ENA interface sits on card 0); Azure ND: the Ethernet
    # NIC, not the InfiniBand; GCP A3: the primary gVNIC, not the GPU NICs.
    # Sources per value: docs/catalog-sources.md ("Socket path").
    primary_nic_gbps: float | None = None
    # Azure ND (InfiniBand) only: the InfiniBand HCAs, one per GPU, named mlx5_0 .. mlx5_<n-1> on
    # AKS, and the NCCL topology family of Azure's HPC images ("ndv4", "ndv5": Azure/azhpc-images
    # components/setup_sku_customizations.sh), whose <family>-topo.xml trainer/Dockerfile must
    # install. Read by infra/azure/interconnect.py (NCCL_IB_HCA, NCCL_TOPO_FILE, fabric rails).
    ib_hcas: int = 0
    azure_topology: str | None = None

    def __post_init__(self) -> None:
        """A GPU machine without a fact its code path reads would silently lose a check or a
        setting (no matmul floor, no quota check, no EFA device): refuse it when the catalog
        loads, naming what to add."""
        if not self.has_gpus:
            return
        missing = []
        if find_gpu_model(self.gpu_model, self.gpu_memory_gib) is None:
            missing.append(f"a GpuModel entry for ({self.gpu_model!r}, {self.gpu_memory_gib})")
        if self.cloud == Cloud.GCP and not (self.gcp_accelerator_type and self.gcp_gpu_quota_metric):
            missing.append("gcp_accelerator_type and gcp_gpu_quota_metric")
        if self.interconnect == Interconnect.EFA and self.efa_interfaces <= 0:
            missing.append("efa_interfaces (EFA machines)")
        if self.interconnect == Interconnect.INFINIBAND and not (self.ib_hcas > 0 and self.azure_topology):
            missing.append("ib_hcas and azure_topology (InfiniBand machines)")
        if missing:
            raise ValueError(f"catalog machine {self.name}: add {', '.join(missing)} "
                             "in infra/catalog/ (machines.py, gpus.py)")

    @property
    def has_gpus(self) -> bool:
        return self.gpu_count > 0

    @property
    def gpu(self) -> "GpuModel | None":
        """The machine's GPU model record (rated throughput and bandwidth); None without GPUs."""
        return find_gpu_model(self.gpu_model, self.gpu_memory_gib) if self.has_gpus else None

    @property
    def fabric_transport(self) -> str:
        """The NCCL transport the fabric gate expects when the fabric is used (trainer/fabric_gate.py)."""
        return FABRIC_TRANSPORTS[self.interconnect]

    def fabric_floor(self, nodes: int) -> "FabricFloor":
        """What the fabric gate accepts between `nodes` of this machine (fabric_floor)."""
        return fabric_floor(self, nodes)

    @property
    def gcp_fast_socket(self) -> bool:
        """Whether GKE's NCCL Fast Socket plugin fits this GCP GPU machine when GPUDirect is off:
        where NCCL's inter-node traffic goes over gVNIC sockets (A2; A3 High and Mega without
        GPUDirect). Not on RDMA machines (A3 Ultra, A4): their NCCL path is the gIB plugin over
        the CX-7 NICs, and Google's A3 Ultra / A4 recipes (cluster-toolkit
        examples/gke-a3-ultragpu, gke-a4) never turn Fast Socket on."""
        return self.cloud == Cloud.GCP and self.has_gpus and self.interconnect != Interconnect.RDMA

    @property
    def socket_gbps(self) -> float:
        """Gbit/s between nodes over plain sockets (the primary NIC; primary_nic_gbps)."""
        if self.primary_nic_gbps is not None:
            return self.primary_nic_gbps
        if self.efa_interfaces:  # one network card per EFA interface, card 0 carries the ENA
            return self.network_gbps / self.efa_interfaces
        return self.network_gbps

    @property
    def spot_usd_per_hour(self) -> float:
        return round(self.on_demand_usd_per_hour * (1.0 - self.typical_spot_discount), 4)

    @property
    def node_ready_minutes(self) -> int:
        """How long a new node of this machine may take to run a Ready trainer pod
        (node_ready_minutes)."""
        return node_ready_minutes(self)


def _gpu(**kwargs: object) -> Machine:
    return Machine(**kwargs)  # type: ignore[arg-type]


MACHINES: tuple[Machine, ...] = (
    # network_gbps is the machine's aggregate inter-node bandwidth as the vendor states it:
    # AWS "network performance" (EFA included), Azure InfiniBand (8 x HDR 200 / NDR 400 Gbps;
    # the Ethernet NICs are 20-80 Gbps and not counted), GCP "max total bandwidth" (GPU NICs
    # plus gVNIC). Sources per value: docs/catalog-sources.md.
    # --- AWS: P4d/P4de (A100), P5 (H100), P5e/P5en (H200); EFA on all of them.
    # Prices: us-east-1 Linux on-demand after the June 2025 P4/P5 price cut.
    _gpu(name="p4d.24xlarge", cloud=Cloud.AWS, gpu_model="A100", gpu_count=8, gpu_memory_gib=40,
         vcpus=96, memory_gib=1152, network_gbps=400, interconnect=Interconnect.EFA,
         efa_interfaces=4, efa_device_rdma=True, on_demand_usd_per_hour=21.96,
         typical_spot_discount=0.6),
    _gpu(name="p4de.24xlarge", cloud=Cloud.AWS, gpu_model="A100", gpu_count=8, gpu_memory_gib=80,
         vcpus=96, memory_gib=1152, network_gbps=400, interconnect=Interconnect.EFA,
         efa_interfaces=4, efa_device_rdma=True, on_demand_usd_per_hour=27.45,
         typical_spot_discount=0.6),
    _gpu(name="p5.48xlarge", cloud=Cloud.AWS, gpu_model="H100", gpu_count=8, gpu_memory_gib=80,
         vcpus=192, memory_gib=2048, network_gbps=3200, interconnect=Interconnect.EFA,
         efa_interfaces=32, efa_device_rdma=True, efa_hugepages=True,
         on_demand_usd_per_hour=55.04, typical_spot_discount=0.6),
    # p5e: specs verified; the price is NOT verified (mostly sold through Capacity Blocks).
    _gpu(name="p5e.48xlarge", cloud=Cloud.AWS, gpu_model="H200", gpu_count=8, gpu_memory_gib=141,
         vcpus=192, memory_gib=2048, network_gbps=3200, interconnect=Interconnect.EFA,
         efa_interfaces=32, efa_device_rdma=True, efa_hugepages=True,
         on_demand_usd_per_hour=113.92, typical_spot_discount=0.5),
    # p5en: EFAv3, 16 network cards (vs 32 on p5/p5e) for the same 3200 Gbps.
    _gpu(name="p5en.48xlarge", cloud=Cloud.AWS, gpu_model="H200", gpu_count=8, gpu_memory_gib=141,
         vcpus=192, memory_gib=2048, network_gbps=3200, interconnect=Interconnect.EFA,
         efa_interfaces=16, efa_device_rdma=True, efa_hugepages=True,
         on_demand_usd_per_hour=63.30, typical_spot_discount=0.55),
    # Non-GPU, for system pools.
    Machine(name="m6i.xlarge", cloud=Cloud.AWS, vcpus=4, memory_gib=16, network_gbps=12.5,
            on_demand_usd_per_hour=0.192, typical_spot_discount=0.6),
    Machine(name="m6i.2xlarge", cloud=Cloud.AWS, vcpus=8, memory_gib=32, network_gbps=12.5,
            on_demand_usd_per_hour=0.384, typical_spot_discount=0.6),
    # --- Azure: NDv4 (A100 + HDR InfiniBand), NDm A100 v4, ND H100 v5 / H200 v5 (NDR).
    # Prices: eastus Linux pay-as-you-go.
    _gpu(name="Standard_ND96asr_v4", cloud=Cloud.AZURE, gpu_model="A100", gpu_count=8,
         gpu_memory_gib=40, vcpus=96, memory_gib=900, network_gbps=1600,
         interconnect=Interconnect.INFINIBAND, on_demand_usd_per_hour=27.20,
         typical_spot_discount=0.6, primary_nic_gbps=24,
         ib_hcas=8, azure_topology="ndv4"),
    _gpu(name="Standard_ND96amsr_A100_v4", cloud=Cloud.AZURE, gpu_model="A100", gpu_count=8,
         gpu_memory_gib=80, vcpus=96, memory_gib=1900, network_gbps=1600,
         interconnect=Interconnect.INFINIBAND, on_demand_usd_per_hour=32.77,
         typical_spot_discount=0.6, primary_nic_gbps=24,
         ib_hcas=8, azure_topology="ndv4"),
    _gpu(name="Standard_ND96isr_H100_v5", cloud=Cloud.AZURE, gpu_model="H100", gpu_count=8,
         gpu_memory_gib=80, vcpus=96, memory_gib=1900, network_gbps=3200,
         interconnect=Interconnect.INFINIBAND, on_demand_usd_per_hour=98.32,
         typical_spot_discount=0.5, primary_nic_gbps=80,
         ib_hcas=8, azure_topology="ndv5"),
    _gpu(name="Standard_ND96isr_H200_v5", cloud=Cloud.AZURE, gpu_model="H200", gpu_count=8,
         gpu_memory_gib=141, vcpus=96, memory_gib=1850, network_gbps=3200,
         interconnect=Interconnect.INFINIBAND, on_demand_usd_per_hour=110.24,
         typical_spot_discount=0.5, primary_nic_gbps=80,
         ib_hcas=8, azure_topology="ndv5"),
    # A GPU machine without InfiniBand, for small experiments (and to prove the IB rule).
    _gpu(name="Standard_NC24ads_A100_v4", cloud=Cloud.AZURE, gpu_model="A100", gpu_count=1,
         gpu_memory_gib=80, vcpus=24, memory_gib=220, network_gbps=20,
         on_demand_usd_per_hour=3.67, typical_spot_discount=0.6),
    Machine(name="Standard_D4s_v5", cloud=Cloud.AZURE, vcpus=4, memory_gib=16, network_gbps=12.5,
            on_demand_usd_per_hour=0.192, typical_spot_discount=0.6),
    Machine(name="Standard_D8s_v5", cloud=Cloud.AZURE, vcpus=8, memory_gib=32, network_gbps=12.5,
            on_demand_usd_per_hour=0.384, typical_spot_discount=0.6),
    # --- GCP: A2 (A100), A3 High (H100 + GPUDirect-TCPX), A3 Mega (TCPXO), A3 Ultra (H200, RDMA).
    # Prices: us-central1. Bundled local SSDs: a3-highgpu-8g and a3-megagpu-8g 16, a3-ultragpu-8g
    # 32 (cluster-toolkit modules/compute/gke-node-pool/disk_definitions.tf), a2-ultragpu-8g
    # 3,000 GiB = 8 x 375 GiB (https://cloud.google.com/compute/docs/gpus, A2 Ultra table);
    # a2-highgpu-8g has none bundled. Boot disks: A3 Ultra supports Hyperdisk only
    # (https://cloud.google.com/compute/docs/accelerator-optimized-machines, "Supported disk
    # types for A3 Ultra"; cluster-toolkit's A3 Ultra/A4 blueprints use hyperdisk-balanced).
    _gpu(name="a2-highgpu-8g", cloud=Cloud.GCP, gpu_model="A100", gpu_count=8, gpu_memory_gib=40,
         vcpus=96, memory_gib=680, network_gbps=100, gcp_accelerator_type="nvidia-tesla-a100",
         gcp_gpu_quota_metric="NVIDIA_A100_GPUS",
         on_demand_usd_per_hour=29.39, typical_spot_discount=0.6),
    _gpu(name="a2-ultragpu-8g", cloud=Cloud.GCP, gpu_model="A100", gpu_count=8, gpu_memory_gib=80,
         vcpus=96, memory_gib=1360, network_gbps=100, gcp_accelerator_type="nvidia-a100-80gb",
         gcp_gpu_quota_metric="NVIDIA_A100_80GB_GPUS",
         on_demand_usd_per_hour=40.22, typical_spot_discount=0.6, gcp_local_ssds=8),
    _gpu(name="a3-highgpu-8g", cloud=Cloud.GCP, gpu_model="H100", gpu_count=8, gpu_memory_gib=80,
         vcpus=208, memory_gib=1872, network_gbps=1000, interconnect=Interconnect.GPUDIRECT_TCPX,
         gcp_accelerator_type="nvidia-h100-80gb",
         gcp_gpu_quota_metric="NVIDIA_H100_GPUS", on_demand_usd_per_hour=88.25,
         primary_nic_gbps=200, typical_spot_discount=0.6, gcp_local_ssds=16),
    _gpu(name="a3-megagpu-8g", cloud=Cloud.GCP, gpu_model="H100", gpu_count=8, gpu_memory_gib=80,
         vcpus=208, memory_gib=1872, network_gbps=1800,
         interconnect=Interconnect.GPUDIRECT_TCPXO, gcp_accelerator_type="nvidia-h100-mega-80gb",
         gcp_gpu_quota_metric="NVIDIA_H100_MEGA_GPUS",
         on_demand_usd_per_hour=88.25, primary_nic_gbps=200, typical_spot_discount=0.6,
         gcp_local_ssds=16),
    # A3 Ultra: 8 x 400 Gbps CX-7 RDMA NICs + 2 x 200 Gbps gVNIC = 3600 Gbps. Google does not
    # sell it on-demand (reservations, Flex-start, Spot); the price is the listed hourly rate.
    _gpu(name="a3-ultragpu-8g", cloud=Cloud.GCP, gpu_model="H200", gpu_count=8,
         gpu_memory_gib=141, vcpus=224, memory_gib=2952, network_gbps=3600,
         interconnect=Interconnect.RDMA, gcp_accelerator_type="nvidia-h200-141gb",
         gcp_gpu_quota_metric="NVIDIA_H200_GPUS",
         on_demand_usd_per_hour=84.81, primary_nic_gbps=200, typical_spot_discount=0.4,
         on_demand_available=False,
         gcp_boot_disk_type="hyperdisk-balanced", gcp_local_ssds=32),
    Machine(name="e2-standard-4", cloud=Cloud.GCP, vcpus=4, memory_gib=16, network_gbps=8,
            on_demand_usd_per_hour=0.134, typical_spot_discount=0.6),
    Machine(name="n2-standard-4", cloud=Cloud.GCP, vcpus=4, memory_gib=16, network_gbps=10,
            on_demand_usd_per_hour=0.194, typical_spot_discount=0.6),
)


def node_ready_minutes(m: Machine) -> int:
    """The join-time estimate (node_times.py) for one machine (45 minutes for Azure ND with InfiniBand)."""
    extra = OFED_BUILD_MINUTES if m.interconnect == Interconnect.INFINIBAND else 0
    return NODE_READY_MINUTES[m.cloud] + extra


_BY_KEY: dict[tuple[Cloud, str], Machine] = {(m.cloud, m.name): m for m in MACHINES}


def find_machine(cloud: Cloud | str, name: str) -> Machine | None:
    """The catalog entry for a machine type on a cloud, or None when it is not in the catalog."""
    return _BY_KEY.get((Cloud(cloud), name))


def machine(cloud: Cloud | str, name: str) -> Machine:
    """The catalog entry; settings validation guarantees it exists before this is called."""
    found = find_machine(cloud, name)
    if found is None:
        raise KeyError(f"{name!r} is not in the machine catalog for {Cloud(cloud).value}")
    return found


def machine_names(cloud: Cloud | str, *, gpu: bool | None = None) -> list[str]:
    """Machine type names for a cloud, optionally only GPU (True) or only CPU (False) ones."""
    return sorted(
        m.name
        for m in MACHINES
        if m.cloud == Cloud(cloud) and (gpu is None or m.has_gpus == gpu)
    )


# --- Memory and NVLink bandwidth of a machine's GPUs, for the sharding planner (torchrec_cloud/plan.py)
def gpu_hbm_gb_s(m: Machine) -> float | None:
    return m.gpu.hbm_gb_s if m.gpu else None


def gpu_nvlink_gb_s(m: Machine) -> float | None:
    """None where the GPUs are not NVLink-connected (one GPU per machine)."""
    return m.gpu.nvlink_gb_s if m.gpu and m.gpu_count > 1 else None


def fabric_in_use(m: Machine, fabric: bool) -> bool:
    """Whether NCCL's traffic between nodes goes over the machine's fabric: the stack asks for
    it (interconnect.fabric) and the machine has one."""
    return fabric and m.interconnect != Interconnect.NONE


def inter_host_gb_s_per_gpu(m: Machine, fabric: bool) -> float:
    """The network between nodes shared by the machine's GPUs (GB/s per GPU), on the path NCCL
    takes: the rated fabric where it is in use (fabric_in_use), else the primary NIC's plain
    sockets (Machine.socket_gbps). What torchrec's planner calls inter_host_bw (its default
    12.5 GB/s = 100 Gbit/s per GPU); the run estimate's network bound reads the same figure."""
    gbps = m.network_gbps if fabric_in_use(m, fabric) else m.socket_gbps
    return gbps / 8 / max(m.gpu_count, 1)
