"""Sizing advisor: ``python -m trainer.plan`` plans a table set on a cloud machine offline (CPU,
tables on the meta device, no GPU) with torchrec's own planner, told the machine's topology
from infra/catalog.py, and prints what the run would need and cost before it is paid for.

    python -m trainer.plan --tables mlperf --cloud aws --machine p5.48xlarge --nodes 2
    python -m trainer.plan --tables mlperf            # the cheapest fit per cloud

It runs from the repository (it reads infra/catalog.py and infra/preemption.py), not in the
training image. Figures: per-rank HBM and host memory and the embedding time per step are the
planner's (the same numbers its EmbeddingStats table prints); the checkpoint is every table's
weights and optimizer state, the largest rank's write is what the plan puts on it (replicated
tables spread as DCP's deduplication does), timed at the catalog's object-store speed; the cost
uses the embedding step time only (dense layers and data loading come on top), so hours and
dollars per epoch are lower bounds.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence

from trainer.sizing import (CRITEO_1TB_TRAIN_SAMPLES, DATA_PARALLEL_MAX_MB, MLPERF_GLOBAL_BATCH,
                            TableSet, is_data_parallel, optimizer_state_bytes, table_set)

GB = 1e9
GIB = 1 << 30
NODE_COUNTS = (1, 2, 4, 8)
# The MLPerf DLRM-DCNv2 model around the tables (sizing.py cites the reference's flags).
MLPERF_DENSE = dict(dense_arch_layer_sizes=[512, 256, 128],
                    over_arch_layer_sizes=[1024, 1024, 512, 256, 1],
                    interaction="dcn", dcn_num_layers=3, dcn_low_rank_dim=512)


@dataclass
class Advice:
    """One table set on one machine type and node count."""

    machine: str
    cloud: str
    nodes: int
    ranks: int
    sharding: Dict[str, str]  # table -> sharding type
    hbm_gib: List[float]  # per rank, the planner's storage estimate (GiB, as its stats print)
    ddr_gib: List[float]
    step_ms: float  # the planner's embedding time per step (slowest rank)
    checkpoint_gb: float
    largest_rank_write_gb: float
    write_seconds: float
    spot_save_deadline_seconds: int
    usd_per_hour: float
    spot_usd_per_hour: float
    hours_per_epoch: float
    compare: Dict[str, float] = field(default_factory=dict)  # other rules' step estimates

    @property
    def usd_per_epoch(self) -> float:
        return self.usd_per_hour * self.hours_per_epoch

    @property
    def save_fits_spot_notice(self) -> bool:
        return self.write_seconds <= self.spot_save_deadline_seconds


def _model(tables: TableSet) -> Any:
    """The DLRM-DCNv2 model with ``tables`` on the meta device, its embedding optimizer marked
    (the planner sizes the optimizer state from it), as the trainer builds it."""
    import torch

    from trainer.config import TrainConfig
    from trainer.distributed import fuse_embedding_optimizer
    from trainer.model import build_model

    cfg = TrainConfig(num_embeddings_per_feature=list(tables.rows), embedding_dim=tables.dim,
                      **MLPERF_DENSE)  # type: ignore[arg-type]
    model = build_model(cfg, torch.device("meta"))
    fuse_embedding_optimizer(model, cfg)
    return model


def hardware_of(machine: Any, nodes: int, fabric: bool = True) -> Any:
    """planning.Hardware of ``nodes`` catalog machines, one rank per GPU, the network between
    them over the fabric (the stack's default, interconnect.fabric) or plain sockets."""
    from infra.catalog import gpu_hbm_gb_s, gpu_nvlink_gb_s, inter_host_gb_s_per_gpu
    from trainer.planning import Hardware

    gpus = machine.gpu_count
    return Hardware(world_size=gpus * nodes, local_world_size=gpus, compute_device="cuda",
                    hbm_bytes=int(machine.gpu_memory_gib * (1 << 30)),
                    ddr_bytes=int(machine.memory_gib * (1 << 30)) // gpus,
                    hbm_gb_per_sec=gpu_hbm_gb_s(machine),
                    intra_host_gb_per_sec=gpu_nvlink_gb_s(machine),
                    inter_host_gb_per_sec=inter_host_gb_s_per_gpu(machine, fabric))


def run_planner(tables: TableSet, hw: Any, batch_per_rank: int, rule: str = "resumable",
                max_mb: float = DATA_PARALLEL_MAX_MB, debug: bool = False) -> Any:
    """torchrec's planner on ``tables``: 'resumable' = the trainer's constraints (data-parallel
    by the size rule, the rest reshardable); 'sharded' = the old rule (no data-parallel);
    'free' = only the pooling factors, the planner chooses every sharding type itself.
    Returns the planner after plan() (its _best_plan holds the chosen options)."""
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
    planner.plan(_model(tables), planning.sharders())
    return planner


def largest_rank_write_bytes(tables: TableSet, best_plan: Sequence[Any], ranks: int,
                             optimizer: str = "adagrad") -> int:
    """Bytes the fullest rank writes: its shards (weights and optimizer state) of sharded
    tables, plus the replicated tables DCP hands it (dedup_save_plans gives each replicated
    item to the rank with the least to write so far)."""
    load = [0] * ranks
    replicated: List[int] = []
    for option in best_plan:
        rows, dim = option.tensor.shape
        dp = option.sharding_type == "data_parallel"
        if dp:
            replicated.append(rows * dim * 4 + optimizer_state_bytes(rows, dim, optimizer, True))
            continue
        for shard in option.shards:
            shard_rows, shard_dim = shard.size
            load[shard.rank] += shard_rows * shard_dim * 4 + optimizer_state_bytes(
                shard_rows, shard_dim, optimizer, False)
    for size in replicated:
        load[load.index(min(load))] += size
    return max(load)


def advise(tables: TableSet, cloud: str, machine_name: str, nodes: int,
           global_batch: int = MLPERF_GLOBAL_BATCH, compare: bool = True,
           max_mb: float = DATA_PARALLEL_MAX_MB, debug: bool = False) -> Advice:
    """Plan ``tables`` on ``nodes`` x ``machine_name`` and work out memory, time and cost.
    Raises torchrec's PlannerError when the tables do not fit."""
    from infra.catalog import machine as catalog_machine, checkpoint_store_speed
    from infra.preemption import stop_budget
    from trainer import planning

    machine = catalog_machine(cloud, machine_name)
    hw = hardware_of(machine, nodes)
    ranks = hw.world_size
    if global_batch % ranks:
        raise ValueError(f"--global_batch {global_batch} does not divide over {ranks} ranks")
    batch = global_batch // ranks
    done = run_planner(tables, hw, batch, max_mb=max_mb, debug=debug)
    chosen = done._best_plan
    loads = planning.planned_loads(done, ranks)
    step_ms = max(load.perf_ms for load in loads)
    total = sum(tables.weight_bytes(i) + optimizer_state_bytes(
        r, tables.dim, "adagrad", is_data_parallel(r, tables.dim, max_mb))
        for i, r in enumerate(tables.rows))
    largest = largest_rank_write_bytes(tables, chosen, ranks)
    speed = checkpoint_store_speed(cloud)
    per_stream = speed.object_store_mb_s_per_stream
    if speed.object_store_mb_s_per_account is not None:
        per_stream = min(per_stream, speed.object_store_mb_s_per_account / ranks)
    others = {}
    if compare:
        for rule in ("sharded", "free"):
            try:
                others[rule] = planning.step_estimate_ms(
                    run_planner(tables, hw, batch, rule=rule)._best_plan, ranks)
            except Exception:  # noqa: BLE001 (a rule that does not fit has no estimate)
                others[rule] = float("nan")
    steps = CRITEO_1TB_TRAIN_SAMPLES / global_batch
    return Advice(
        machine=machine.name, cloud=machine.cloud.value, nodes=nodes, ranks=ranks,
        sharding={o.name: o.sharding_type for o in chosen},
        hbm_gib=[load.hbm_bytes / GIB for load in loads],
        ddr_gib=[load.ddr_bytes / GIB for load in loads], step_ms=step_ms,
        checkpoint_gb=total / GB, largest_rank_write_gb=largest / GB,
        write_seconds=largest / 1e6 / per_stream,
        spot_save_deadline_seconds=stop_budget(cloud, spot=True,
                                               planned_grace_seconds=0).save_deadline_seconds,
        usd_per_hour=machine.on_demand_usd_per_hour * nodes,
        spot_usd_per_hour=machine.spot_usd_per_hour * nodes,
        hours_per_epoch=steps * step_ms / 1000 / 3600, compare=others)


def recommend(tables: TableSet, global_batch: int = MLPERF_GLOBAL_BATCH) -> Dict[str, Advice]:
    """Per cloud, the GPU machine and node count (of NODE_COUNTS) that fits with the fewest
    dollars per epoch."""
    from infra.catalog import MACHINES
    from torchrec.distributed.planner.types import PlannerError

    best: Dict[str, Advice] = {}
    for m in MACHINES:
        if not m.has_gpus:
            continue
        for nodes in NODE_COUNTS:
            if global_batch % (m.gpu_count * nodes):
                continue
            try:
                advice = advise(tables, m.cloud.value, m.name, nodes, global_batch, compare=False)
            except PlannerError:
                continue  # does not fit: more nodes may
            if m.cloud.value not in best or advice.usd_per_epoch < best[m.cloud.value].usd_per_epoch:
                best[m.cloud.value] = advice
            break  # more nodes of this machine: faster, but not cheaper per epoch here
    return best


def render(advice: Advice, tables: TableSet) -> str:
    """A short human-readable report."""
    kinds: Dict[str, int] = {}
    for kind in advice.sharding.values():
        kinds[kind] = kinds.get(kind, 0) + 1
    lines = [
        f"{tables.name} tables on {advice.nodes} x {advice.machine} ({advice.cloud}, "
        f"{advice.ranks} GPUs)",
        "  plan: " + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())),
        f"  HBM per rank (planner): max {max(advice.hbm_gib):.1f} GiB, mean "
        f"{sum(advice.hbm_gib) / len(advice.hbm_gib):.1f} GiB; host memory per rank: max "
        f"{max(advice.ddr_gib):.1f} GiB",
        f"  embedding step (planner's estimate, slowest rank): {advice.step_ms:.2f} ms",
    ]
    if advice.compare:
        lines.append("  same tables, other rules: " + ", ".join(
            f"{rule} {ms:.2f} ms" for rule, ms in advice.compare.items())
            + " (sharded = no data-parallel tables; free = the planner's unconstrained choice)")
    lines += [
        f"  checkpoint: {advice.checkpoint_gb:.1f} GB; largest rank writes "
        f"{advice.largest_rank_write_gb:.1f} GB in about {advice.write_seconds:.0f} s against "
        f"a {advice.spot_save_deadline_seconds} s spot save deadline: "
        + ("fits" if advice.save_fits_spot_notice else "does not fit (rely on periodic saves)"),
        f"  cost: ${advice.usd_per_hour:,.2f}/h on demand (${advice.spot_usd_per_hour:,.2f}/h "
        f"spot); at least {advice.hours_per_epoch:.2f} h and "
        f"${advice.usd_per_epoch:,.0f} per epoch of Criteo 1TB",
    ]
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainer.plan", description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", default="mlperf",
                        help="mlperf (multi-hot), criteo (one-hot, frequency threshold 3) or a "
                             "path to a layout.json")
    parser.add_argument("--cloud", choices=("aws", "azure", "gcp"))
    parser.add_argument("--machine", help="a GPU machine of infra/catalog.py")
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--embedding_dim", type=int, default=128)
    parser.add_argument("--global_batch", type=int, default=MLPERF_GLOBAL_BATCH)
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    args = parser.parse_args(argv)
    logging.disable(logging.WARNING)  # torchrec's planner chatter
    if args.tables.endswith(".json"):
        with open(args.tables) as fh:
            tables = table_set("layout", args.embedding_dim, json.load(fh))
    else:
        tables = table_set(args.tables, args.embedding_dim)
    if args.machine:
        if not args.cloud:
            parser.error("--machine needs --cloud")
        results = {args.cloud: advise(tables, args.cloud, args.machine, args.nodes,
                                      args.global_batch)}
    else:
        results = recommend(tables, args.global_batch)
    if args.json:
        print(json.dumps({cloud: {**a.__dict__, "usd_per_epoch": a.usd_per_epoch}
                          for cloud, a in results.items()}, indent=1))
    else:
        print("\n\n".join(render(a, tables) for a in results.values()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
