"""What the fabric gate accepts on a machine: published nccl-tests figures per machine and node
count, the floors derived from them (or a conservative share of the rated network where none
is published), and the GPU health check's matmul floor."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from infra.catalog.gpus import GpuModel


class RatedMachine(Protocol):
    """What a floor reads of a catalog machine (machines.py `Machine`, whose fabric_floor
    method calls this module, so the floors name the figures rather than import the table)."""

    @property
    def name(self) -> str: ...
    @property
    def network_gbps(self) -> float: ...
    @property
    def gpu_count(self) -> int: ...
    @property
    def gpu(self) -> GpuModel | None: ...


# Where no published nccl-tests result for a machine exists, the gate's floor is this fraction
# of what its rated inter-node bandwidth allows: CONSERVATIVE, a guess marked as such.
FABRIC_FLOOR_FRACTION = 0.5

GIB = 1 << 30
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


def all_to_all_bound_gbps(m: RatedMachine, nodes: int) -> float:
    """The all_to_all bus bandwidth the network allows between `nodes` nodes of g GPUs: each
    rank sends (g*N - 1)/(g*N) of its buffer, g*(N-1)/(g*N) of it over the network, which
    carries network_gbps/8 GB/s per node, so busbw = B (gN - 1) / (g^2 (N - 1))."""
    g, n = m.gpu_count, nodes
    return m.network_gbps / 8 * (g * n - 1) / (g * g * (n - 1))


def fabric_floor(m: RatedMachine, nodes: int) -> FabricFloor:
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


# An 8192^3 BF16 matmul reaches well over half the peak on a healthy GPU; a throttled (HW
# slowdown, power brake, thermal) or broken one falls far under it. CONSERVATIVE.
GPU_MATMUL_FLOOR_FRACTION = 0.4


def gpu_matmul_floor_tflops(m: RatedMachine) -> float:
    """The least BF16 matmul throughput (TFLOPS) the gate's GPU health check accepts per GPU
    of machine `m`; 0 (no floor) for a machine without GPUs."""
    peak = m.gpu.bf16_dense_tflops if m.gpu else 0.0
    return round(peak * GPU_MATMUL_FLOOR_FRACTION, 1)
