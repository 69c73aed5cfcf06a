"""The TorchRec sharding plan: the topology the planner is told, the per-table constraints that
keep checkpoints loadable on any world size, and the sharders (with reduced-precision
embedding communication when asked). Used by the trainer (trainer/distributed.py) and by the
offline sizing advisor (trainer/offline_plan.py), so both plan alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

from torchrec.distributed.embedding_types import EmbeddingComputeKernel
from torchrec.distributed.embeddingbag import EmbeddingBagCollectionSharder
from torchrec.distributed.fbgemm_qcomm_codec import CommType, QCommsConfig, get_qcomm_codecs_registry
from torchrec.distributed.planner import EmbeddingShardingPlanner, Topology
from torchrec.distributed.planner.storage_reservations import FixedPercentageStorageReservation
from torchrec.distributed.planner.types import (HardwareConfig, KernelConfig, ParameterConstraints,
                                                ShardingOption, Storage, TopologyFactory,
                                                TrainerConfig)
from torchrec.distributed.types import ModuleSharder, ShardingType

from trainer.sizing import is_data_parallel

# Sharding types whose fused row-wise optimizer state has the same keys and global shape
# [rows] whatever the plan, so DCP reshards a checkpoint onto another world size. Not
# column-wise / table-column-wise (one row-wise momentum per column shard: the state's
# shape is rows x shards, which changes with the plan), not grid (the same, per node).
# Data-parallel is decided per table by trainer/sizing.py's size rule, never by the planner.
RESHARDABLE_SHARDING_TYPES = [ShardingType.TABLE_WISE.value, ShardingType.ROW_WISE.value,
                              ShardingType.TABLE_ROW_WISE.value]
POOLING_FACTOR_ONE_HOT = 1.0  # one id per sample: torchrec's planner default
# Keep 20% of each device for dense weights, activations and the allocator's slack.
RESERVED_FRACTION = 0.2
GB = 1e9


@dataclass(frozen=True)
class Hardware:
    """What the planner is told about the ranks. Bandwidths in GB/s (1e9 bytes) per rank;
    None keeps torchrec's default (its constants: 12.5 GiB/s between hosts, 600 GiB/s within,
    an A100-class HBM)."""

    world_size: int
    local_world_size: int
    compute_device: str  # "cuda" or "cpu"
    hbm_bytes: Optional[int]
    ddr_bytes: int
    hbm_gb_per_sec: Optional[float] = None
    intra_host_gb_per_sec: Optional[float] = None
    inter_host_gb_per_sec: Optional[float] = None


def _bytes_per_ms(gb_per_sec: float) -> float:
    return gb_per_sec * GB / 1000.0  # torchrec's bandwidths are bytes per millisecond


def topology(hw: Hardware) -> Topology:
    """torchrec's Topology for ``hw``, through the factory torchrec asks for
    (torchrec/distributed/planner/types.py: TopologyFactory, HardwareConfig)."""
    bandwidths: Dict[str, float] = {}
    for name, value in (("hbm_mem_bw", hw.hbm_gb_per_sec),
                        ("intra_host_bw", hw.intra_host_gb_per_sec),
                        ("inter_host_bw", hw.inter_host_gb_per_sec)):
        if value:
            bandwidths[name] = _bytes_per_ms(value)
    return TopologyFactory.create_topology(
        trainer_config=TrainerConfig(world_size=hw.world_size,
                                     local_world_size=hw.local_world_size),
        hardware_config=HardwareConfig(hbm_cap_bytes=hw.hbm_bytes, ddr_cap_bytes=hw.ddr_bytes,
                                       **bandwidths),  # type: ignore[arg-type]
        # Without use_hardware_based_bandwidth the factory ignores the bandwidths given.
        kernel_config=KernelConfig(compute_device=hw.compute_device,
                                   use_hardware_based_bandwidth=bool(bandwidths)))


def constraints(tables: Sequence[tuple[str, int, int]], pooling: Optional[Sequence[float]],
                data_parallel_max_mb: float) -> Dict[str, ParameterConstraints]:
    """Per table (name, rows, dim): data-parallel (dense kernel) when the size rule says so,
    else a reshardable sharding type with the fused kernel, so the checkpoint's keys and
    shapes do not depend on the world size that wrote it; with multi-hot data, the feature's
    ids per sample as its pooling factor (the planner's default is 1.0), as MLPerf's
    DLRM-DCNv2 reference does (recommendation_v2/torchrec_dlrm/dlrm_main.py,
    ``pooling_factors=[args.multi_hot_sizes[i]]``): a table read 100 times per sample costs
    the planner's estimates 100 times the lookups and all-to-all traffic."""
    out = {}
    for i, (name, rows, dim) in enumerate(tables):
        factor = [float(pooling[i])] if pooling else [POOLING_FACTOR_ONE_HOT]
        if is_data_parallel(rows, dim, data_parallel_max_mb):
            out[name] = ParameterConstraints(
                sharding_types=[ShardingType.DATA_PARALLEL.value],
                compute_kernels=[EmbeddingComputeKernel.DENSE.value], pooling_factors=factor)
        else:
            out[name] = ParameterConstraints(
                sharding_types=list(RESHARDABLE_SHARDING_TYPES),
                compute_kernels=[EmbeddingComputeKernel.FUSED.value], pooling_factors=factor)
    return out


def sharders(forward_precision: str = "fp32", backward_precision: str = "fp32"
             ) -> List[ModuleSharder]:
    """The EmbeddingBagCollection sharder, its all-to-alls quantized as asked (torchrec's
    fbgemm_qcomm_codec: QCommsConfig(forward_precision, backward_precision), as the MLPerf
    DLRM-DCNv2 submissions run FP16 forward / BF16 backward); fp32 both: no codec."""
    registry = None
    if (forward_precision, backward_precision) != ("fp32", "fp32"):
        registry = get_qcomm_codecs_registry(QCommsConfig(
            forward_precision=CommType(forward_precision),
            backward_precision=CommType(backward_precision)))
    return [EmbeddingBagCollectionSharder(qcomm_codecs_registry=registry)]


def planner(hw: Hardware, batch_size: int, table_constraints: Dict[str, ParameterConstraints],
            debug: bool = False) -> EmbeddingShardingPlanner:
    """The planner for ``batch_size`` samples per rank (after a resize: the checkpoint's
    global batch over this world size)."""
    return EmbeddingShardingPlanner(
        topology=topology(hw), batch_size=batch_size,
        storage_reservation=FixedPercentageStorageReservation(RESERVED_FRACTION),
        constraints=table_constraints, debug=debug)


@dataclass(frozen=True)
class RankLoad:
    """One rank's share of a plan as the planner estimates it."""

    hbm_bytes: int
    ddr_bytes: int
    perf_ms: float  # fwd + bwd compute and comms of this rank's shards


def rank_loads(best_plan: Sequence[ShardingOption], world_size: int,
               features: Optional[Storage] = None) -> List[RankLoad]:
    """Per rank: the storage and estimated time of the shards placed on it, plus the input
    features' storage every rank holds (``features``: the planner's KJT reservation), which is
    what torchrec's EmbeddingStats reports (planner/stats.py ``_compute_mem_usage_and_perf``)."""
    extra = features or Storage(hbm=0, ddr=0)
    hbm, ddr, perf = [extra.hbm] * world_size, [extra.ddr] * world_size, [0.0] * world_size
    for option in best_plan:
        for shard in option.shards:
            assert shard.rank is not None and shard.storage is not None and shard.perf is not None
            hbm[shard.rank] += shard.storage.hbm
            ddr[shard.rank] += shard.storage.ddr
            perf[shard.rank] += shard.perf.total
    return [RankLoad(h, d, p) for h, d, p in zip(hbm, ddr, perf)]


def planned_loads(done: EmbeddingShardingPlanner, world_size: int) -> List[RankLoad]:
    """rank_loads of a planner after plan(), with its reservation for the input features."""
    reservation = done._storage_reservation
    assert done._best_plan is not None, "plan() first"
    return rank_loads(done._best_plan, world_size, getattr(reservation, "_kjt_storage", None))


def step_estimate_ms(best_plan: Sequence[ShardingOption], world_size: int) -> float:
    """The plan's embedding time per step: its slowest rank (ranks wait for each other in the
    all-to-alls), the figure the planner minimises."""
    return max(load.perf_ms for load in rank_loads(best_plan, world_size))
