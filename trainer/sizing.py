"""Table sets and the bytes they take, without torch: shared by the trainer's sharding rule,
the sizing advisor (trainer/offline_plan.py) and the stack's settings (infra/preemption.py), which
runs where torch is not installed.

The one rule that keeps checkpoints loadable on any world size while letting the planner
replicate small tables lives here (``is_data_parallel``): a table is data-parallel when its
weights are at most ``--data_parallel_max_mb``, whatever the world size. A data-parallel table
is trained by the dense optimizer (full-size Adagrad state, key ``sum``), a sharded one by the
fused row-wise optimizer (one value per row, key ``momentum1``): the same table always gets the
same kind, so the checkpoint's keys and shapes are the same on every world size and DCP
reshards what is sharded and loads whole what is replicated.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

FP32_BYTES = 4
MB = 1_000_000

# MLPerf DLRM-DCNv2 (mlcommons/training recommendation_v2/torchrec_dlrm/README.MD, "Running the
# MLPerf DLRM v2 benchmark": --num_embeddings_per_feature, --multi_hot_sizes, --embedding_dim 128,
# --dense_arch_layer_sizes 512,256,128, --over_arch_layer_sizes 1024,1024,512,256,1,
# --dcn_num_layers 3 --dcn_low_rank_dim 512; global batch 65536 = --batch_size 8192 x 8 GPUs).
MLPERF_ROWS = [40000000, 39060, 17295, 7424, 20265, 3, 7122, 1543, 63, 40000000, 3067956,
               405282, 10, 2209, 11938, 155, 4, 976, 14, 40000000, 40000000, 40000000, 590152,
               12973, 108, 36]
MLPERF_MULTI_HOT = [3, 2, 1, 2, 6, 1, 1, 1, 1, 7, 3, 8, 1, 6, 9, 5, 1, 1, 1, 12, 100, 27, 10,
                    3, 1, 1]
MLPERF_GLOBAL_BATCH = 65536
# Criteo 1TB one-hot with torchrec's frequency-threshold-3 tables (docs/data.md, "One-hot DLRM").
CRITEO_FT3_ROWS = [45833188, 36746, 17245, 7413, 20243, 3, 7114, 1441, 62, 29275261, 1572176,
                   345138, 10, 2209, 11267, 128, 4, 974, 14, 48937457, 11316796, 40094537,
                   452104, 12606, 104, 35]
# Criteo 1TB days 0-22 (TOTAL_TRAINING_SAMPLES, recommendation_v2/torchrec_dlrm/README.MD).
CRITEO_1TB_TRAIN_SAMPLES = 4_195_197_692
# Replicate tables up to this size by default: MLPerf's 18 tables of at most 39,060 rows
# (20 MB at 128 wide) are data-parallel, its 405,282-row table (207 MB) and larger are not,
# the split torchrec's planner itself chooses for them on 2 x 8 H100 (python -m torchrec_cloud plan shows it).
# Not higher: a replicated table's Adagrad state is full size (a sharded one's is a value per
# row), so the stacks' default 100,000-row tables (51 MB) stay sharded and their checkpoint
# keeps fitting a 30 s spot notice on a shared file system (tests/test_settings.py).
DATA_PARALLEL_MAX_MB = 32.0  # what --recipe mlperf and the advisor use; the trainer's default is 0


@dataclass(frozen=True)
class TableSet:
    """Rows and ids per sample (pooling) of each of the 26 tables, at one width."""

    name: str
    rows: List[int]
    pooling: List[float]
    dim: int = 128

    def weight_bytes(self, i: int) -> int:
        return self.rows[i] * self.dim * FP32_BYTES


def table_set(name: str, dim: int = 128, layout: Optional[dict] = None) -> TableSet:
    """'mlperf' (multi-hot), 'criteo' (one-hot, frequency threshold 3), or 'layout' (a
    layout.json's num_embeddings_per_feature and multi_hot_sizes)."""
    if name == "mlperf":
        return TableSet("mlperf", list(MLPERF_ROWS), [float(p) for p in MLPERF_MULTI_HOT], dim)
    if name == "criteo":
        return TableSet("criteo", list(CRITEO_FT3_ROWS), [1.0] * len(CRITEO_FT3_ROWS), dim)
    if name == "layout" and layout is not None:
        rows = [int(r) for r in layout["num_embeddings_per_feature"]]
        pooling = [float(p) for p in layout.get("multi_hot_sizes") or [1] * len(rows)]
        return TableSet("layout.json", rows, pooling, dim)
    raise ValueError(f"table set {name!r}: use mlperf, criteo or a layout.json")


def is_data_parallel(rows: int, dim: int, max_mb: float) -> bool:
    """The world-size-free rule: replicate a table whose fp32 weights are at most ``max_mb``."""
    return rows * dim * FP32_BYTES <= max_mb * MB


def optimizer_state_bytes(rows: int, dim: int, optimizer: str, data_parallel: bool) -> int:
    """Adagrad's state: full size for a data-parallel table (torch.optim.Adagrad's ``sum``) and
    for every table under exact Adagrad (EXACT_ADAGRAD keeps one value per weight), one value
    per row for a sharded table under row-wise Adagrad (``momentum1``); SGD none."""
    if optimizer == "exact_adagrad":
        return rows * dim * FP32_BYTES
    if optimizer != "adagrad":
        return 0
    return rows * dim * FP32_BYTES if data_parallel else rows * FP32_BYTES


def checkpoint_bytes(rows: Sequence[int], dim: int, optimizer: str, max_mb: float) -> int:
    """One checkpoint: every table's weights and optimizer state, each stored once (DCP saves a
    replicated tensor from one rank only)."""
    return sum(r * dim * FP32_BYTES
               + optimizer_state_bytes(r, dim, optimizer, is_data_parallel(r, dim, max_mb))
               for r in rows)


def largest_rank_checkpoint_bytes(rows: Sequence[int], dim: int, optimizer: str, max_mb: float,
                                  ranks: int, ranks_per_node: int) -> int:
    """A bound on the bytes the fullest rank writes, without running the planner (the stack's
    settings have no torch): a sharded table may sit on one rank (table-wise) only if it fits
    an even share; a larger one is split at least over one node's ranks (table-row-wise), as
    torchrec's planner does for MLPerf's 40M-row tables. Replicated tables are spread by DCP's
    deduplication, which gives each to the rank with the least to write so far.
    Where the planner's own figure is recorded, fullest_rank_checkpoint_bytes uses that."""
    ranks = max(ranks, 1)
    per_node = max(1, min(ranks_per_node, ranks))
    sizes = [r * dim * FP32_BYTES + optimizer_state_bytes(r, dim, optimizer,
                                                          is_data_parallel(r, dim, max_mb))
             for r in rows]
    even = sum(sizes) / ranks
    biggest_piece = max((s / per_node if s > even else s) for s in sizes) if sizes else 0
    return int(max(even, biggest_piece) + biggest_piece)


@dataclass(frozen=True)
class PlannedRank:
    """torchrec's own plan for one table set on one machine type, as the sizing advisor
    (torchrec_cloud/plan.py, trainer/offline_plan.py) computes it: the fullest rank's
    checkpoint bytes, the slowest rank's embedding step and the dense weights the step
    all-reduces. The planner needs torch, which `make check` does not install, so the stack's
    settings (its checkpoint sizes, its run estimate and derived cadence) read it here.
    tests/test_plan.py plans each entry again and compares."""

    machine: str
    nodes: int
    rows: Tuple[int, ...]
    dim: int
    optimizer: str
    max_mb: float
    batch_per_rank: int
    fullest_bytes: int
    embeddings_ms: float  # the planner's fwd + bwd of the slowest rank's shards, over the fabric
    dense_parameters: int  # MLP and interaction weights, all-reduced each step
    dense: Tuple[Tuple[int, ...], Tuple[int, ...], str, int, int]  # the model they belong to


# MLPerf DLRM-DCNv2 (--recipe mlperf: exact Adagrad, 18 tables replicated, global batch 65,536)
# on each cloud's 2 x 8 H100: the planner splits the five 40M-row tables table-row-wise over
# one node's 8 ranks and puts three of them on one node (3 x 5.12 GB) beside an eighth of the
# 590,152-row table: 15.4 GB, where the bound above says 18.2 GB. Its embedding step is that
# of each machine's fabric (EFA and InfiniBand 400 Gbit/s a GPU; GCP's A3 Mega 200).
MLPERF_DENSE_SHAPE = ((512, 256, 128), (1024, 1024, 512, 256, 1), "dcn", 3, 512)
PLANNED_FULLEST_RANKS = tuple(
    PlannedRank(machine, 2, tuple(MLPERF_ROWS), 128, "exact_adagrad", DATA_PARALLEL_MAX_MB,
                MLPERF_GLOBAL_BATCH // 16, 15_435_539_456, embeddings_ms, 16_044_545,
                MLPERF_DENSE_SHAPE)
    for machine, embeddings_ms in (("p5.48xlarge", 2.4477807508165834),
                                   ("Standard_ND96isr_H100_v5", 2.4477807508165834),
                                   ("a3-megagpu-8g", 3.1507275952610283)))


def planned_rank(rows: Sequence[int], dim: int, optimizer: str, max_mb: float, machine: str,
                 nodes: int, batch_per_rank: int) -> Optional[PlannedRank]:
    """torchrec's planner's own plan where this shape was planned (PLANNED_FULLEST_RANKS)."""
    for p in PLANNED_FULLEST_RANKS:
        if (p.machine, p.nodes, p.rows, p.dim, p.optimizer, p.max_mb, p.batch_per_rank) == (
                machine, nodes, tuple(rows), dim, optimizer, max_mb, batch_per_rank):
            return p
    return None


def planned_fullest_rank_bytes(rows: Sequence[int], dim: int, optimizer: str, max_mb: float,
                               machine: str, nodes: int, batch_per_rank: int) -> Optional[int]:
    """torchrec's planner's own fullest rank where this shape was planned (PLANNED_FULLEST_RANKS)."""
    found = planned_rank(rows, dim, optimizer, max_mb, machine, nodes, batch_per_rank)
    return None if found is None else found.fullest_bytes


def fullest_rank_checkpoint_bytes(rows: Sequence[int], dim: int, optimizer: str, max_mb: float,
                                  ranks: int, ranks_per_node: int, machine: Optional[str] = None,
                                  batch_per_rank: Optional[int] = None) -> int:
    """What the fullest rank writes: the planner's own figure where it was recorded for this
    machine, node count and batch (the advisor prints the same), else the bound above."""
    if machine and batch_per_rank and ranks_per_node and ranks % ranks_per_node == 0:
        planned = planned_fullest_rank_bytes(rows, dim, optimizer, max_mb, machine,
                                             ranks // ranks_per_node, batch_per_rank)
        if planned is not None:
            return planned
    return largest_rank_checkpoint_bytes(rows, dim, optimizer, max_mb, ranks, ranks_per_node)
