"""torchrec's sharding planner run offline (CPU, tables on the meta device, no GPU) on a table
set, and what its plan puts on each rank: the trainer-side half of the sizing advisor
(`python -m torchrec_cloud plan`, torchrec_cloud/plan.py). It imports only the trainer, so the
trainer's image never depends on the command line or the Pulumi program above it.

Figures are the planner's own: per-rank storage and the fwd/bwd time of its shards (the numbers
its EmbeddingStats table prints), and the checkpoint each rank writes computed from the shards
the plan places there (weights plus the optimizer state torchrec keeps for them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Sequence

from trainer.sizing import DATA_PARALLEL_MAX_MB, FP32_BYTES, TableSet, optimizer_state_bytes

# The MLPerf DLRM-DCNv2 model around the tables (trainer/recipe.py cites the reference's flags).
MLPERF_DENSE = dict(dense_arch_layer_sizes=[512, 256, 128],
                    over_arch_layer_sizes=[1024, 1024, 512, 256, 1],
                    interaction="dcn", dcn_num_layers=3, dcn_low_rank_dim=512)


@dataclass(frozen=True)
class RankShare:
    """One rank's share of a plan."""

    hbm_bytes: int
    ddr_bytes: int
    step_ms: float  # fwd + bwd compute and comms of its shards (the planner's perf)
    forward_ms: float  # fwd compute and comms only: what an evaluation step costs it
    checkpoint_bytes: int  # weights + optimizer state of what it writes


@dataclass(frozen=True)
class OfflinePlan:
    """A plan of the table set on ``ranks`` ranks."""

    sharding: Dict[str, str]  # table -> sharding type
    ranks: List[RankShare]
    checkpoint_bytes: int  # every table's weights and optimizer state, each stored once
    dense_parameters: int  # MLP and interaction weights (all-reduced every step)

    @property
    def fullest_rank_bytes(self) -> int:
        return max(r.checkpoint_bytes for r in self.ranks)

    @property
    def step_ms(self) -> float:
        """The plan's embedding time per step: its slowest rank (the all-to-alls wait for it)."""
        return max(r.step_ms for r in self.ranks)

    @property
    def forward_ms(self) -> float:
        return max(r.forward_ms for r in self.ranks)


def meta_model(tables: TableSet, optimizer: str, dense: Dict[str, Any] | None = None) -> Any:
    """The trainer's DLRM with ``tables`` on the meta device and its embedding optimizer marked
    as the trainer marks it (trainer/distributed.py fuse_embedding_optimizer): the planner
    sizes the optimizer state from it (exact Adagrad: one value per weight)."""
    import torch

    from trainer.config import TrainConfig
    from trainer.distributed import fuse_embedding_optimizer
    from trainer.model import build_model

    cfg = TrainConfig(num_embeddings_per_feature=list(tables.rows), embedding_dim=tables.dim,
                      optimizer=optimizer, **(dense or MLPERF_DENSE))  # type: ignore[arg-type]
    model = build_model(cfg, torch.device("meta"))
    fuse_embedding_optimizer(model, cfg)
    return model


def run_planner(tables: TableSet, hw: Any, batch_per_rank: int, optimizer: str,
                rule: str = "resumable", max_mb: float = DATA_PARALLEL_MAX_MB,
                dense: Dict[str, Any] | None = None, debug: bool = False) -> tuple[Any, Any]:
    """torchrec's planner on ``tables``: 'resumable' = the trainer's constraints (data-parallel
    by the size rule, the rest reshardable); 'sharded' = no data-parallel table; 'free' = only
    the pooling factors, the planner chooses every sharding type. Returns (planner after
    plan(), the model it planned)."""
    from torchrec.distributed.planner.types import ParameterConstraints

    from trainer import planning

    names = [(f"t_cat_{i}", rows, tables.dim) for i, rows in enumerate(tables.rows)]
    if rule == "free":
        constraints = {name: ParameterConstraints(pooling_factors=[tables.pooling[i]])
                       for i, (name, _, _) in enumerate(names)}
    else:
        constraints = planning.constraints(names, tables.pooling,
                                           max_mb if rule == "resumable" else 0.0)
    planner = planning.planner(hw, batch_per_rank, constraints, debug=debug)
    model = meta_model(tables, optimizer, dense)
    planner.plan(model, planning.sharders())
    return planner, model


def checkpoint_bytes_per_rank(best_plan: Sequence[Any], ranks: int, optimizer: str) -> List[int]:
    """Bytes each rank writes: its shards (weights and optimizer state) of sharded tables, plus
    the replicated tables DCP hands it (dedup_save_plans gives each replicated item to the rank
    with the least to write so far). Exact Adagrad keeps one state value per weight, row-wise
    Adagrad one per shard row, a data-parallel table's dense Adagrad one per weight."""
    load = [0] * ranks
    replicated: List[int] = []
    for option in best_plan:
        rows, dim = option.tensor.shape
        if option.sharding_type == "data_parallel":
            replicated.append(rows * dim * FP32_BYTES
                              + optimizer_state_bytes(rows, dim, optimizer, True))
            continue
        for shard in option.shards:
            shard_rows, shard_dim = shard.size
            load[shard.rank] += shard_rows * shard_dim * FP32_BYTES + optimizer_state_bytes(
                shard_rows, shard_dim, optimizer, False)
    for size in replicated:
        load[load.index(min(load))] += size
    return load


def _dense_parameters(model: Any) -> int:
    """Weights outside the embedding tables: what DDP all-reduces every step."""
    return sum(p.numel() for name, p in model.named_parameters()
               if "embedding_bags" not in name)


def offline_plan(tables: TableSet, hw: Any, batch_per_rank: int, optimizer: str,
                 max_mb: float = DATA_PARALLEL_MAX_MB, dense: Dict[str, Any] | None = None,
                 debug: bool = False) -> OfflinePlan:
    """The trainer's plan of ``tables`` on ``hw`` and what it puts on each rank. Raises
    torchrec's PlannerError when the tables do not fit."""
    from trainer import planning

    done, model = run_planner(tables, hw, batch_per_rank, optimizer, max_mb=max_mb,
                              dense=dense, debug=debug)
    chosen = done._best_plan
    loads = planning.planned_loads(done, hw.world_size)
    forward = [0.0] * hw.world_size
    for option in chosen:
        for shard in option.shards:
            forward[shard.rank] += shard.perf.fwd_compute + shard.perf.fwd_comms
    writes = checkpoint_bytes_per_rank(chosen, hw.world_size, optimizer)
    return OfflinePlan(
        sharding={o.name: o.sharding_type for o in chosen},
        ranks=[RankShare(l.hbm_bytes, l.ddr_bytes, l.perf_ms, f, w)
               for l, f, w in zip(loads, forward, writes)],
        checkpoint_bytes=sum(writes), dense_parameters=_dense_parameters(model))
