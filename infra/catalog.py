"""The one table of machine types: every fact about a GPU machine lives here.

Nothing else in the project hard-codes a GPU count, a GPU memory size, an EFA interface count or
its RDMA and huge-page needs, an accelerator type name, a GPU quota metric, a GPU model's rated
throughput and bandwidth or a price: settings validation, node pools, pod resources, the NCCL
environment, the quota checks and the cost estimate all read this table (`Machine` per machine,
`GpuModel` per GPU model and memory size). A GPU machine whose GPU model has no `GpuModel` entry,
or that lacks a fact its cloud needs, is refused when this module loads (`Machine.__post_init__`).
Tables kept elsewhere by a name the catalog gives (the EC2 Spot quota names per P family,
workloads/waiting/cloud_steps.py) have a test that every catalog GPU machine has an entry
(tests/test_catalog.py). Sources per entry are in
docs/catalog-sources.md; prices are on-demand list prices in USD per hour in the reference
regions (us-east-1, eastus, us-central1) and drift, so treat the cost outputs as estimates.
Last checked 2026-11 (see the sources file for the date and what could not be verified).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

from infra.kubernetes_versions import version_key, version_reaches


class Cloud(str, Enum):
    """The clouds this program deploys to."""

    AWS = "aws"
    AZURE = "azure"
    GCP = "gcp"


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
# Where no published nccl-tests result for a machine exists, the gate's floor is this fraction
# of what its rated inter-node bandwidth allows: CONSERVATIVE, a guess marked as such.
FABRIC_FLOOR_FRACTION = 0.5


@dataclass(frozen=True)
class GpuModel:
    """One GPU model at one memory size: the rated figures the gate, the estimate and the
    sizing advisor plan from. Read from memory of NVIDIA's data sheets, not re-verified in a
    stored copy (sources per figure below)."""

    model: str  # Machine.gpu_model
    memory_gib: int  # Machine.gpu_memory_gib
    # Dense BF16 tensor-core peak, TFLOPS, without sparsity (A100: 312; H100 SXM and H200: 989.5).
    bf16_dense_tflops: float
    # Rated dense fp32 matmuls, TFLOPS per GPU, without sparsity: plain FP32 (CUDA cores: the
    # trainer's default, --tf32 off) and TF32 tensor cores (--tf32 on). A100
    # (nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/
    # nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf: FP32 19.5, TF32 156 dense / 312
    # sparse); H100 SXM (nvidia.com/en-us/data-center/h100/: FP32 67, TF32 989 "with sparsity",
    # so 494.5 dense); H200 SXM (nvidia.com/en-us/data-center/h200/: the same 67 and 989). The
    # sizing advisor (torchrec_cloud/plan.py) times the dense layers at these rates.
    fp32_dense_tflops: float
    tf32_dense_tflops: float
    # GB/s (1e9 B/s), for the sharding planner. HBM: A100 40GB SXM 1,555; A100 80GB SXM 2,039;
    # H100 SXM 3,350; H200 4,800. NVLink: total bidirectional per GPU (A100 600, H100/H200
    # 900), the figure torchrec's own default (INTRA_NODE_BANDWIDTH, 600 GB/s for A100) is
    # given in.
    hbm_gb_s: float
    nvlink_gb_s: float


GPU_MODELS: tuple[GpuModel, ...] = (
    GpuModel("A100", 40, bf16_dense_tflops=312.0, fp32_dense_tflops=19.5, tf32_dense_tflops=156.0,
             hbm_gb_s=1555.0, nvlink_gb_s=600.0),
    GpuModel("A100", 80, bf16_dense_tflops=312.0, fp32_dense_tflops=19.5, tf32_dense_tflops=156.0,
             hbm_gb_s=2039.0, nvlink_gb_s=600.0),
    GpuModel("H100", 80, bf16_dense_tflops=989.5, fp32_dense_tflops=67.0, tf32_dense_tflops=494.5,
             hbm_gb_s=3350.0, nvlink_gb_s=900.0),
    GpuModel("H200", 141, bf16_dense_tflops=989.5, fp32_dense_tflops=67.0,
             tf32_dense_tflops=494.5, hbm_gb_s=4800.0, nvlink_gb_s=900.0),
)
_GPU_MODELS: dict[tuple[str | None, int], GpuModel] = {(g.model, g.memory_gib): g
                                                       for g in GPU_MODELS}


def gpu_model(model: str, memory_gib: int) -> GpuModel:
    """The record of a GPU model at a memory size (a recorded run's GPU: ThroughputReference)."""
    return _GPU_MODELS[(model, memory_gib)]


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
        if (self.gpu_model, self.gpu_memory_gib) not in _GPU_MODELS:
            missing.append(f"a GpuModel entry for ({self.gpu_model!r}, {self.gpu_memory_gib})")
        if self.cloud == Cloud.GCP and not (self.gcp_accelerator_type and self.gcp_gpu_quota_metric):
            missing.append("gcp_accelerator_type and gcp_gpu_quota_metric")
        if self.interconnect == Interconnect.EFA and self.efa_interfaces <= 0:
            missing.append("efa_interfaces (EFA machines)")
        if self.interconnect == Interconnect.INFINIBAND and not (self.ib_hcas > 0 and self.azure_topology):
            missing.append("ib_hcas and azure_topology (InfiniBand machines)")
        if missing:
            raise ValueError(f"catalog machine {self.name}: add {', '.join(missing)} "
                             "in infra/catalog.py")

    @property
    def has_gpus(self) -> bool:
        return self.gpu_count > 0

    @property
    def gpu(self) -> "GpuModel | None":
        """The machine's GPU model record (rated throughput and bandwidth); None without GPUs."""
        return _GPU_MODELS.get((self.gpu_model, self.gpu_memory_gib)) if self.has_gpus else None

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

# --- Node join time: from the autoscaler's scale-up to a Ready trainer pod on the new node ----
# ESTIMATES, not measured here and published by no vendor as a bound: each sums the VM's start
# and node registration (minutes), the GPU stack a node gets after it joins, and the pull of a
# multi-GB trainer image onto an empty disk. Kueue's PodsReady timeout is this figure
# (workloads/kueue.py), so a slow but healthy cold start is never evicted as "no capacity".
# - AWS: the EKS accelerated AMI ships the NVIDIA driver; the EFA and GPU device plugins start
#   after registration. p4d/p5 with 4-32 EFA interfaces and 8 GPUs: 30 minutes.
# - GCP: GKE's driver installer DaemonSet, then on A3 the GPUDirect sidecar image (rxdm) and
#   NCCL plugin installer. 30 minutes.
# - Azure: AKS's own driver install is skipped on the GPU pools and the GPU Operator's driver
#   container compiles the driver on each new node (infra/azure/addons.py); with InfiniBand the
#   Network Operator's DOCA-OFED driver container builds and loads its modules first (the driver
#   container "builds the DOCA OFED driver from source code dynamically", Mellanox/
#   network-operator-docs docs/openshift/disconnected-openshift.rst), 15 minutes more; the
#   operators' own Helm timeout here is 1800 s for the same reason.
NODE_READY_MINUTES = {Cloud.AWS: 30, Cloud.GCP: 30, Cloud.AZURE: 30}
OFED_BUILD_MINUTES = 15  # Azure InfiniBand: the DOCA-OFED driver built on the node first


def node_ready_minutes(m: Machine) -> int:
    """The join-time estimate above for one machine (45 minutes for Azure ND with InfiniBand)."""
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


# --- Stop notices: how long a node has between its stop notice and the VM going away --------
class Capacity(str, Enum):
    """How a pool buys its machines."""

    ON_DEMAND = "onDemand"
    SPOT = "spot"


@dataclass(frozen=True)
class StopNotice:
    """What a node of one cloud and capacity type is told before it stops, and how much of that
    reaches the training pod as the time between its SIGTERM and its SIGKILL.

    ``pod_seconds`` is None where nothing forces a stop at a fixed time (on-demand: upgrades and
    maintenance drain nodes and honour the pod's own grace, ``job.terminationGraceSeconds``).
    infra/preemption.py derives the pod's grace, torchrun's shutdown timeout and the trainer's
    save deadline from it; nothing else may hard-code a notice.
    """

    cloud: Cloud
    capacity: Capacity
    notice_seconds: int | None  # notice to the VM; None: no forced stop
    pod_seconds: int | None  # what the pod gets of it after the delivery path
    path: str  # how the notice becomes the pod's SIGTERM
    source: str  # where the numbers come from
    # The version from which this entry applies: a minor ("1.35") or a GKE build
    # ("1.35.0-gke.1171000"), compared by `version_reaches`; None: every version.
    min_kubernetes: str | None = None


STOP_NOTICES: tuple[StopNotice, ...] = (
    StopNotice(
        Cloud.AWS, Capacity.SPOT, notice_seconds=120, pod_seconds=105,
        path="EC2 Spot Instance Interruption Warning -> EventBridge -> SQS -> AWS Node "
             "Termination Handler (queue mode) cordons and drains the node; the eviction "
             "sends SIGTERM. 15 s are kept for EventBridge delivery, the handler's SQS poll and "
             "the eviction call.",
        source="https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/spot-instance-termination-notices.html; "
               "https://github.com/aws/aws-node-termination-handler#queue-processor",
    ),
    StopNotice(
        Cloud.AZURE, Capacity.SPOT, notice_seconds=30, pod_seconds=15,
        path="Scheduled Events 'Preempt' (at least 30 s before eviction) -> the node problem "
             "detector polls it and sets a node condition -> AKS node auto-drain cordons and "
             "drains the node (best effort). Observed notices can be 'materially shorter' than "
             "30 s (Azure/karpenter-provider-azure, pkg/controllers/node/interruption), so the "
             "pod is budgeted 15 s, like GKE's.",
        source="https://learn.microsoft.com/azure/virtual-machines/linux/scheduled-events; "
               "https://learn.microsoft.com/azure/aks/node-auto-drain; "
               "https://github.com/Azure/karpenter-provider-azure",
    ),
    StopNotice(
        Cloud.GCP, Capacity.SPOT, notice_seconds=30, pod_seconds=15,
        path="Compute Engine preemption (ACPI G2 soft off, 30 s before the VM stops) -> kubelet "
             "graceful node shutdown: non-system pods get the first 15 s, system pods the rest.",
        source="https://cloud.google.com/compute/docs/instances/spot#preemption-process; "
               "https://cloud.google.com/kubernetes-engine/docs/concepts/spot-vms",
    ),
    # From GKE 1.35.0-gke.1171000 a Standard spot pool may extend graceful shutdown to 120 s
    # (kubelet shutdownGracePeriodSeconds in {0, 30, 120}); infra/gcp sets it, keeping GKE's
    # 15 s for system-critical pods (networking, the metadata server a checkpoint upload needs).
    StopNotice(
        Cloud.GCP, Capacity.SPOT, notice_seconds=120, pod_seconds=105,
        path="Compute Engine preemption -> kubelet graceful node shutdown extended to 120 s on "
             "the spot pool: non-system pods get the first 105 s, system pods the last 15 s.",
        source="https://cloud.google.com/kubernetes-engine/docs/concepts/spot-vms; "
               "https://cloud.google.com/kubernetes-engine/docs/how-to/node-system-config",
        min_kubernetes="1.35.0-gke.1171000",
    ),
    *(
        StopNotice(
            cloud, Capacity.ON_DEMAND, notice_seconds=None, pod_seconds=None,
            path="no forced stop: upgrades and host maintenance drain the node, and a drain "
                 "honours the pod's terminationGracePeriodSeconds",
            source=source,
        )
        for cloud, source in (
            (Cloud.AWS, "https://docs.aws.amazon.com/eks/latest/userguide/managed-node-update-behavior.html"),
            (Cloud.AZURE, "https://learn.microsoft.com/azure/aks/upgrade-cluster"),
            (Cloud.GCP, "https://cloud.google.com/kubernetes-engine/docs/concepts/node-pool-upgrade-strategies"),
        )
    ),
)


def stop_notice(cloud: Cloud | str, capacity: Capacity | str,
                kubernetes_version: str | None = None) -> StopNotice:
    """The notice a node of ``cloud`` bought as ``capacity`` gets on ``kubernetes_version``
    (the newest entry whose min_kubernetes it reaches; without a version, the base entry)."""
    fits = [n for n in STOP_NOTICES if n.cloud == Cloud(cloud)
            and n.capacity == Capacity(capacity)
            and (n.min_kubernetes is None or (kubernetes_version is not None
                                              and version_reaches(kubernetes_version,
                                                                  n.min_kubernetes)))]
    if not fits:
        raise KeyError(f"no stop notice for {Cloud(cloud).value} {Capacity(capacity).value}")
    return max(fits, key=lambda n: version_key(n.min_kubernetes) if n.min_kubernetes else (0,))


# --- Checkpoint write throughput: what a save can expect, for the save-time estimate ----------
@dataclass(frozen=True)
class CheckpointStoreSpeed:
    """Planning figures for checkpoint writes. DCP writes one file per rank, one stream each.

    The clouds publish object-store limits per bucket/account and per prefix, not per
    connection; a single PUT stream from Python (s3fs, adlfs, gcsfs) moves on the order of
    100 MB/s, so the per-stream figure is that, capped by the node's share of the account
    limit where one is published. Shared file systems are limited by the file system's own
    provisioned throughput, which the settings give (see infra/preemption.py).
    """

    cloud: Cloud
    object_store_mb_s_per_stream: float
    object_store_mb_s_per_account: float | None  # published account/bucket ingress limit
    source: str


CHECKPOINT_STORE_SPEEDS: tuple[CheckpointStoreSpeed, ...] = (
    CheckpointStoreSpeed(
        Cloud.AWS, 100.0, None,
        "https://docs.aws.amazon.com/AmazonS3/latest/userguide/optimizing-performance.html "
        "(3,500 PUT/s per prefix, scale with parallel connections; no bandwidth cap published)"),
    CheckpointStoreSpeed(
        Cloud.AZURE, 100.0, 7_500.0,  # 60 Gbit/s
        "https://learn.microsoft.com/azure/storage/common/scalability-targets-standard-account "
        "(default maximum ingress 60 Gbps per general-purpose v2 account in the largest regions)"),
    CheckpointStoreSpeed(
        Cloud.GCP, 100.0, None,
        "https://cloud.google.com/storage/docs/request-rate (no per-bucket bandwidth limit; "
        "ramp request rates gradually)"),
)


def checkpoint_store_speed(cloud: Cloud | str) -> CheckpointStoreSpeed:
    return next(s for s in CHECKPOINT_STORE_SPEEDS if s.cloud == Cloud(cloud))


# Shared file systems' write throughput per TiB provisioned, where the service level fixes it
# (FSx for Lustre takes it from the settings: throughputPerTib).
# https://learn.microsoft.com/azure/azure-netapp-files/azure-netapp-files-service-levels
ANF_MIB_S_PER_TIB = {"Standard": 16, "Premium": 64, "Ultra": 128}
FSX_SCRATCH_2_MB_S_PER_TIB = 200  # baseline; https://docs.aws.amazon.com/fsx/latest/LustreGuide/performance.html
# FSx for Lustre's throughput tiers (MB/s per TiB) by deployment type, the only values it takes
# (SCRATCH_2 has the fixed baseline above), and its SSD sizes: 1200 or 2400 GiB, then steps of
# 2400 GiB. https://docs.aws.amazon.com/fsx/latest/LustreGuide/performance.html; the settings'
# rule (infra/aws/rules.py), the advisors (infra/settings/cost_rules.py, torchrec_cloud/
# file_systems.py) and the prices (infra/prices.py FSX_LUSTRE_GB_MONTH) read these.
FSX_MB_S_PER_TIB_TIERS: dict[str, tuple[int, ...]] = {
    "PERSISTENT_2": (125, 250, 500, 1000), "PERSISTENT_1": (50, 100, 200), "SCRATCH_2": ()}
FSX_SMALL_CAPACITIES_GIB = (1200, 2400)
FSX_CAPACITY_STEP_GIB = 2400


def fsx_persistent_2_for(need_mb_s: float, capacity_gib: int) -> tuple[int, int]:
    """(throughputPerTib, capacityGib) of the smallest PERSISTENT_2 change that gives
    ``need_mb_s``: the lowest tier at this capacity, else the top tier with the capacity grown
    in steps."""
    tiers = FSX_MB_S_PER_TIB_TIERS["PERSISTENT_2"]
    for tier in tiers:
        if tier * capacity_gib / 1024 >= need_mb_s:
            return tier, capacity_gib
    step_mb_s = tiers[-1] * FSX_CAPACITY_STEP_GIB / 1024
    return tiers[-1], max(capacity_gib, FSX_CAPACITY_STEP_GIB * math.ceil(need_mb_s / step_mb_s))
# Filestore: write throughput of the smallest instance of each tier (conservative: it grows
# with capacity on ZONAL/REGIONAL/HIGH_SCALE_SSD). https://cloud.google.com/filestore/docs/performance
FILESTORE_WRITE_MB_S = {"BASIC_HDD": 100, "BASIC_SSD": 350, "ZONAL": 260, "REGIONAL": 260,
                        "HIGH_SCALE_SSD": 1_000}


# --- Fabric gate floors: published nccl-tests results per machine and node count ------------
GIB = 1 << 30
MIB = 1 << 20
# A healthy published run is one sample: the floor leaves 25 % for run-to-run and cluster-to-
# cluster spread (NCCL version, placement). A vendor's own health threshold is used as it is.
HEALTHY_MARGIN = 0.75


@dataclass(frozen=True)
class PublishedBusbw:
    """One published nccl-tests figure for a machine (bus bandwidth, GB/s = 1e9 B/s)."""

    machine: str
    collective: str  # "all_reduce" or "all_to_all"
    nodes: int  # node count of the run (8 GPUs each)
    size: int  # message size in bytes
    busbw_gbps: float
    kind: str  # "measured": one healthy run; "threshold": the vendor's health threshold
    source: str


PUBLISHED_BUSBW: tuple[PublishedBusbw, ...] = (
    # AWS: awsome-distributed-training micro-benchmarks/nccl-tests/README.md, "Results"
    # (all_reduce_perf -b 8 -e 2G / 16G, out-of-place busbw).
    PublishedBusbw("p4de.24xlarge", "all_reduce", 2, 2 * GIB, 78.33, "measured",
                   "aws-samples/awsome-distributed-training micro-benchmarks/nccl-tests/README.md "
                   "(2x p4de.24xlarge, 2147483648 B: 78.33 GB/s)"),
    PublishedBusbw("p5.48xlarge", "all_reduce", 2, 8 * GIB, 479.28, "measured",
                   "aws-samples/awsome-distributed-training micro-benchmarks/nccl-tests/README.md "
                   "(2x p5.48xlarge, 8589934592 B: 479.28 GB/s; 128 MiB: 289.16 GB/s)"),
    # Azure: the figure issue 22 quotes from Azure's NDv4 health guidance; the stored copies
    # searched (Azure/azurehpc-health-checks conf/nd96asr_v4.conf) hold only single-node
    # thresholds (228 GB/s NVLink all_reduce at 8 GiB, 18 GB/s IB loopback), so this one is
    # NOT re-verified here. Both A100 v4 sizes share the 8 x HDR 200 fabric.
    PublishedBusbw("Standard_ND96asr_v4", "all_reduce", 2, 8 * GIB, 180.0, "threshold",
                   "Azure NDv4 health threshold, 180 GB/s at 8 GiB (quoted in issue 22; not "
                   "found in the stored copies)"),
    PublishedBusbw("Standard_ND96amsr_A100_v4", "all_reduce", 2, 8 * GIB, 180.0, "threshold",
                   "Azure NDv4 health threshold, 180 GB/s at 8 GiB (quoted in issue 22; not "
                   "found in the stored copies)"),
    # GCP A3 Mega (TCPXO): a public 2x8 all_reduce_perf -b 8 -e 8G run.
    PublishedBusbw("a3-megagpu-8g", "all_reduce", 2, 8 * GIB, 338.82, "measured",
                   "lessizzmore/create-a3mega-ztan-fork ztan-NCCL-test-result (2x a3-megagpu-8g, "
                   "8589934592 B: 338.82 GB/s; 128 MiB: 152.32 GB/s)"),
)


@dataclass(frozen=True)
class FabricFloor:
    """What the fabric gate accepts between N nodes of a machine, both collectives judged at
    `size` (the bandwidth plateau: at 128 MiB every fabric here is still climbing)."""

    size: int
    all_reduce_gbps: float
    all_to_all_gbps: float
    all_reduce_source: str
    all_to_all_source: str

    @property
    def published(self) -> bool:
        return not self.all_reduce_source.startswith("CONSERVATIVE")


def all_to_all_bound_gbps(m: Machine, nodes: int) -> float:
    """The all_to_all bus bandwidth the network allows between `nodes` nodes of g GPUs: each
    rank sends (g*N - 1)/(g*N) of its buffer, g*(N-1)/(g*N) of it over the network, which
    carries network_gbps/8 GB/s per node, so busbw = B (gN - 1) / (g^2 (N - 1))."""
    g, n = m.gpu_count, nodes
    return m.network_gbps / 8 * (g * n - 1) / (g * g * (n - 1))


def fabric_floor(m: Machine, nodes: int) -> FabricFloor:
    """The gate's floors for `nodes` nodes of machine `m` (nodes >= 2).

    all_reduce: a published figure for this machine and node count (a vendor threshold as it
    is, a measured healthy run times HEALTHY_MARGIN), judged at its message size. On 2 nodes
    NCCL's tree algorithms exceed the network (2x p4de: 78 GB/s busbw over a 50 GB/s fabric),
    so a 2-node figure says nothing about more nodes; there, and where nothing is published,
    CONSERVATIVE: FABRIC_FLOOR_FRACTION of the rated network, at 8 GiB.
    all_to_all (what DLRM's embeddings live on): no published figure was found for any machine
    here, so CONSERVATIVE: FABRIC_FLOOR_FRACTION of what the network allows
    (all_to_all_bound_gbps), at the same size.
    """
    if nodes < 2:
        raise ValueError(f"a fabric floor needs 2 or more nodes, not {nodes}")
    figure = next((p for p in PUBLISHED_BUSBW if p.machine == m.name
                   and p.collective == "all_reduce" and p.nodes == nodes), None)
    if figure is not None:
        factor = 1.0 if figure.kind == "threshold" else HEALTHY_MARGIN
        size, all_reduce = figure.size, round(figure.busbw_gbps * factor, 1)
        all_reduce_source = (f"{figure.source}" + ("" if factor == 1.0
                                                   else f" x {HEALTHY_MARGIN:g}"))
    else:
        size, all_reduce = 8 * GIB, round(m.network_gbps / 8 * FABRIC_FLOOR_FRACTION, 1)
        all_reduce_source = (f"CONSERVATIVE: no published {nodes}-node figure; "
                             f"{FABRIC_FLOOR_FRACTION:g} x rated {m.network_gbps:g} Gbit/s")
    all_to_all = round(all_to_all_bound_gbps(m, nodes) * FABRIC_FLOOR_FRACTION, 1)
    return FabricFloor(size=size, all_reduce_gbps=all_reduce, all_to_all_gbps=all_to_all,
                       all_reduce_source=all_reduce_source,
                       all_to_all_source=(f"CONSERVATIVE: no published figure; "
                                          f"{FABRIC_FLOOR_FRACTION:g} x the network's bound"))


# --- GPU health and planning figures (the per-model ones are GpuModel's) ---------------------
# Planning figures for an evaluation's exact AUC on the GPU (trainer/metrics.py: one sort of
# the scores, then cumulative sums): keys sorted per second by torch.sort on an A100/H100-class
# GPU, CONSERVATIVE (CUB's radix sort is several times faster on float keys); and the host
# copy rate of a checkpoint's staging (device to pageable host memory), CONSERVATIVE.
GPU_SORT_KEYS_PER_S = 1e9
HOST_STAGING_GB_S = 10.0
# PLANNING CONSTANT: CPU time to draw MLPerf's multi-hot ids on the fly (214 ids a sample,
# trainer/data/multi_hot.py ``expand``) and build the batch's tensors, per sample on one core:
# ~31 ms a 4,096-sample batch (TorchRec/MLPerf review); measured here (2 loaded cores,
# OMP_NUM_THREADS=1, 500k-row tables, best of 7) 28.8 ms. The trainer spreads it over its
# reader processes (trainer/data/loader.py readers_for); the advisor adds it to the input.
MULTI_HOT_EXPAND_MS_PER_SAMPLE = 31.0 / 4096
# Filestore read throughput per TiB provisioned (ZONAL and REGIONAL scale with capacity:
# https://cloud.google.com/filestore/docs/service-tiers-zonal "260 MiB/s per 1 TiB" read,
# 88 MiB/s write); other tiers: their write figure above, conservative.
FILESTORE_READ_MIB_S_PER_TIB = {"ZONAL": 260}
# Filestore's sizes per tier: (least TiB, most TiB, step GiB or None for any size) ranges
# (https://cloud.google.com/filestore/docs/service-tiers): ZONAL and REGIONAL take 1-9.75 TiB in
# 256 GiB steps (the Enterprise class) or 10-100 TiB in 2.5 TiB steps (High Scale's successor).
# The settings' rule (infra/gcp/rules.py), the mount's nconnect (infra/gcp/filestore.py) and the
# advisor's larger size (torchrec_cloud/file_systems.py) read these.
_ZONAL_SIZES = ((1.0, 9.75, 256), (10.0, 100.0, 2560))
FILESTORE_CAPACITY_RANGES: dict[str, tuple[tuple[float, float, int | None], ...]] = {
    "BASIC_HDD": ((1.0, 63.9, None),), "BASIC_SSD": ((2.5, 63.9, None),),
    "ZONAL": _ZONAL_SIZES, "REGIONAL": _ZONAL_SIZES, "HIGH_SCALE_SSD": ((10.0, 100.0, None),)}


def filestore_capacity_fits(tier: str, gib: int) -> bool:
    return any(least * 1024 <= gib <= most * 1024 and (step is None or gib % step == 0)
               for least, most, step in FILESTORE_CAPACITY_RANGES[tier])


def filestore_capacity_at_least(tier: str, gib: float) -> int | None:
    """The smallest size of ``tier`` of at least ``gib`` GiB; None past the tier's largest."""
    for least, most, step in FILESTORE_CAPACITY_RANGES[tier]:
        size = max(gib, least * 1024)
        size = math.ceil(size / step) * step if step else math.ceil(size)
        if size <= most * 1024:
            return int(size)
    return None
# An 8192^3 BF16 matmul reaches well over half the peak on a healthy GPU; a throttled (HW
# slowdown, power brake, thermal) or broken one falls far under it. CONSERVATIVE.
GPU_MATMUL_FLOOR_FRACTION = 0.4


def gpu_matmul_floor_tflops(m: Machine) -> float:
    """The least BF16 matmul throughput (TFLOPS) the gate's GPU health check accepts per GPU
    of machine `m`; 0 (no floor) for a machine without GPUs."""
    peak = m.gpu.bf16_dense_tflops if m.gpu else 0.0
    return round(peak * GPU_MATMUL_FLOOR_FRACTION, 1)


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


# --- Training throughput: recorded runs the run estimate plans from (infra/throughput.py) -------
@dataclass(frozen=True)
class ThroughputReference:
    """One recorded training run, with every input it was recorded with: the run estimate plans
    a job's samples/s from these (infra/estimate.py, planned_throughput) and calls no figure
    "measured" for a job, since no job repeats a run's batch, model, GPUs and software.
    Model: 26 features, EmbeddingBag tables, dot interaction unless said."""

    name: str
    gpu_model: str
    gpu_memory_gib: int
    machine: str | None  # the catalog machine it ran on, where one
    nodes: int
    gpus: int  # all GPUs of the run
    samples_per_s: float  # the whole run's records/s
    batch_per_gpu: int | None  # None: not recorded
    embedding_dim: int
    ids_per_sample: int  # one-hot: one id per feature
    rows: tuple[int, ...]
    dense_arch_layer_sizes: tuple[int, ...]
    over_arch_layer_sizes: tuple[int, ...]
    interaction: str
    comm_bytes: int  # bytes per value of the embedding all-to-all (4: fp32)
    fabric: bool  # its nodes talked over the machine's fabric
    date: str
    source: str

    @property
    def samples_per_s_per_gpu(self) -> float:
        return self.samples_per_s / self.gpus


# pytorch/torchrec examples/dlrm/README.MD, "Preliminary Training Results" (commit 488c02b,
# runs of 2022-01): Criteo 1TB, CUDA 11.0, NCCL 2.10.3, p4d.24xlarge with EFA, dlrm_main.py
# with --embedding_dim 128 --dense_arch_layer_sizes 512,256,128 --over_arch_layer_sizes
# 1024,1024,512,256,1 (DLRM's dot interaction, fp32 all-to-all).
_TORCHREC_DLRM = "pytorch/torchrec examples/dlrm/README.MD, Preliminary Training Results"
_DLRM_ROWS_40M = (40000000, 39060, 17295, 7424, 20265, 3, 7122, 1543, 63, 40000000, 3067956,
                  405282, 10, 2209, 11938, 155, 4, 976, 14, 40000000, 40000000, 40000000,
                  590152, 12973, 108, 36)
_DLRM_ROWS_80M = (80000000, 39060, 17295, 7424, 20265, 3, 7122, 1543, 63, 80000000, 3067956,
                  405282, 10, 2209, 11938, 155, 4, 976, 14, 80000000, 40790948, 80000000,
                  590152, 12973, 108, 36)
THROUGHPUT_REFERENCES: tuple[ThroughputReference, ...] = (
    # The anchor of every plan: 1 x p4d.24xlarge, 8 x A100 40GB, 5,497,159.68 rec/s
    # ("MLPerf" row: local batch 8192, global 65536).
    ThroughputReference(
        "p4d 1 node", "A100", 40, "p4d.24xlarge", nodes=1, gpus=8, samples_per_s=5_497_159.68,
        batch_per_gpu=8192, embedding_dim=128, ids_per_sample=26, rows=_DLRM_ROWS_40M,
        dense_arch_layer_sizes=(512, 256, 128), over_arch_layer_sizes=(1024, 1024, 512, 256, 1),
        interaction="dot", comm_bytes=4, fabric=True, date="2022-01",
        source=f"{_TORCHREC_DLRM}, MLPerf row"),
    # The same model on 2 nodes over EFA, 2,028,339.2 rec/s ("MLPerfx2": local batch 4096):
    # the network calibration (infra/estimate.py network_efficiency).
    ThroughputReference(
        "p4d 2 nodes", "A100", 40, "p4d.24xlarge", nodes=2, gpus=16, samples_per_s=2_028_339.2,
        batch_per_gpu=4096, embedding_dim=128, ids_per_sample=26, rows=_DLRM_ROWS_80M,
        dense_arch_layer_sizes=(512, 256, 128), over_arch_layer_sizes=(1024, 1024, 512, 256, 1),
        interaction="dot", comm_bytes=4, fabric=True, date="2022-01",
        source=f"{_TORCHREC_DLRM}, MLPerfx2 row"),
    # Our trainer on 1 x H200 (bench/train_throughput.py MODEL; tests/test_estimate.py checks
    # the two agree): 26 tables of 100,000 rows, dim 64, bottom MLP 512,256,64, top MLP
    # 512,512,256,1, SGD, synthetic data; 1.70M samples/s (TorchRec's reference loop 1.96M).
    # Recorded in that session's closing note only; its per-rank batch was NOT recorded (the
    # bench's default is 512; the readers' commit 104ec66 speaks of 16k batches). Used on H200
    # only, beside the anchor, the lower of the two.
    ThroughputReference(
        "H200 bench", "H200", 141, None, nodes=1, gpus=1, samples_per_s=1_700_000.0,
        batch_per_gpu=None, embedding_dim=64, ids_per_sample=26, rows=(100_000,) * 26,
        dense_arch_layer_sizes=(512, 256, 64), over_arch_layer_sizes=(512, 512, 256, 1),
        interaction="dot", comm_bytes=4, fabric=False, date="2026-11",
        source="make bench (python bench/train_throughput.py) on 1 x H200"),
)


def throughput_reference(name: str) -> ThroughputReference:
    return next(r for r in THROUGHPUT_REFERENCES if r.name == name)


# --- Scale-down tail: how long an idle GPU node is kept after the job ends --------------------
# The cluster autoscaler's scale-down-unneeded-time on each cloud, the one source for both the
# AWS chart value (infra/aws/autoscaler.py) and the run estimate's idle tail (infra/estimate.py).
# - AWS: set by the stack on its Cluster Autoscaler chart (the upstream default, stated).
# - Azure: the stack sets no autoScalerProfile (infra/azure/cluster.py), so AKS's default:
#   "How long a node should be unneeded before it is eligible for scale down. The default is
#   '10m'" (ManagedClusterAutoScalerProfile.ScaleDownUnneededTime, learn.microsoft.com).
# - GCP: the stack sets no autoscaling profile (balanced, the default); GKE does not publish the
#   figure: 10 minutes is the open-source autoscaler's default (kubernetes/autoscaler FAQ,
#   --scale-down-unneeded-time), an ESTIMATE.
SCALE_DOWN_UNNEEDED_MINUTES = {Cloud.AWS: 10, Cloud.AZURE: 10, Cloud.GCP: 10}
